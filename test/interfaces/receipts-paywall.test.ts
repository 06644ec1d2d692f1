import anyTest, { type TestFn } from 'ava';
import { http } from '../support/app.ts';
import { until as waitUntil } from '../support/until.ts';
import { receiptOf } from '../../domain/receipts/schema.ts';
import { createLink, fundFeeVault, fundBuyer, payingFetch, startPaywallApp, type PaywallWorld } from '../support/paywall.ts';

// The paywall's earn receipts (source "paywall") are receipts like any other — listed, read by hash, part of
// the verifiable chain — and each is checked against the ledger, fee leg included.

const test = anyTest as TestFn<PaywallWorld>;

test.before(async (t) => {
  const w = await startPaywallApp();
  // The fee authority's token account exists before the payment (the facilitator sponsors one account per owner).
  await fundFeeVault(w);
  t.context = w;
});

async function until<T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const found = await waitUntil(
    'the read-back',
    async () => {
      const v = await read();
      return done(v) ? { v } : undefined;
    },
    { everyMs: 200 },
  );
  return found.v;
}

test('a paid call’s earn receipt is listed, read by hash, on a sound chain, and verified against the ledger', async (t) => {
  const w = t.context;
  const { agent, url } = await createLink(w);
  const buyer = await fundBuyer(w);
  const pay = payingFetch(w, buyer);
  for (let i = 0; i < 2; i++) t.is((await pay(url)).status, 200);

  const list = await http(w.app, 'GET', `/v1/receipts/${agent}`, { key: w.key });
  t.is(list.status, 200);
  t.deepEqual(
    list.body.data.map((r: any) => [r.nonce, r.source, r.kind]),
    [
      [1, 'paywall', 'earn'],
      [0, 'paywall', 'earn'],
    ],
  );
  const hash = list.body.data[0].receipt_hash;

  const checked = await until(
    () => http(w.app, 'GET', `/v1/receipts/by-hash/${hash}`, { key: w.key }),
    (r) => r.body.verification.status !== 'pending',
  );
  t.is(checked.body.verification.status, 'verified', JSON.stringify(checked.body.verification));
  t.regex(checked.body.verification.reason, /and 100 to the fee authority/);
  const events = await until(
    () => http(w.app, 'GET', `/v1/events?kind=receipt.verified&agent=${agent}`, { key: w.key }),
    (r) => r.body.data.length === 2,
  );
  t.is(events.body.data.length, 2);
  t.true(events.body.data.every((e: any) => e.metadata.source === 'paywall'));

  const chain = await http(w.app, 'GET', `/v1/receipts/${agent}/verify-chain`, { key: w.key });
  t.like(chain.body, { ok: true, length: 2 });
  // Pushing onto a chain the paywall writes continues it.
  const stale = await http(w.app, 'POST', `/v1/receipts/${agent}`, { key: w.key, body: receiptOf(list.body.data[1]) });
  t.like(stale.body, { duplicate: true, event_id: null });
});
