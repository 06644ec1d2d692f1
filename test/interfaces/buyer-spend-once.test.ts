import test from 'ava';
import { recordSpendReceipt } from '../../domain/transactions/spend-receipt.ts';
import type { PreparedTransactionRecord } from '../../domain/transactions/schema.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { randomAddress, removeDataDir, startTestApp } from '../support/app.ts';

// A buyer payment's settlement gets ONE spend receipt whichever records it first: POST /v1/buyer/receipt/finalize (a
// client that finalizes as soon as the payment lands) or the confirmations job (recordSpendReceipt). Recorded twice,
// the agent's chain would hold a duplicate and the daily spend rollup (the daily cap) would count it twice.
test('the confirmation of a buyer payment already finalized records no second spend receipt (chain, daily rollup)', async (t) => {
  const app = await startTestApp({ env: { SVC_JOBS: 'off' } });
  t.teardown(async () => {
    await app.close();
    await removeDataDir(app.dataDir);
  });
  const agent = await randomAddress();
  const usdc = STABLES['chain-devnet'].find((s) => s.symbol === 'USDC')!;
  const signature = '5'.repeat(87);
  const row = {
    eventId: 'ev-spend-once',
    network: 'chain-devnet',
    kind: 'buyer.payment',
    agent,
    owner: 'key:spend-once',
    signature,
  } as unknown as PreparedTransactionRecord;
  const metadata = {
    echo: {
      buyer_agent: agent,
      pay_to: await randomAddress(),
      currency: 'USDC',
      mint: usdc.mint,
      amount_atomic: '1500000',
      fee_atomic: '15000',
      gross_atomic: '1515000',
      fee_bps: 100,
      fee_authority: null,
    },
  };
  const record = () =>
    app.database.store.transaction((tx) => recordSpendReceipt(tx, { row, metadata, landed: null, signature, now: new Date(), baseUrl: app.url }));
  const first = await record(); // as finalize would have
  const second = await record(); // the confirmation afterwards
  t.is(second.receipt_hash, first.receipt_hash, 'the second answers the receipt already recorded');
  const em = app.database.orm.em.fork();
  const receipts = (await em.execute(`select count(*)::int as n from receipts where agent = ? and kind = 'spend' and tx_sig = ?`, [agent, signature])) as {
    n: number;
  }[];
  t.is(receipts[0]!.n, 1);
  const daily = (await em.execute('select gross_atomic::text as g, receipts from buyer_spend_daily where agent = ?', [agent])) as {
    g: string;
    receipts: number;
  }[];
  t.deepEqual(
    daily.map((d) => [d.g, Number(d.receipts)]),
    [['1515000', 1]],
  );
});
