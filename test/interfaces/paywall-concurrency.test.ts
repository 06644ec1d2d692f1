import anyTest, { type TestFn } from 'ava';
import { newEvent } from '../../domain/events/kinds.ts';
import { newId } from '../../domain/shared/ids.ts';
import { createLink, fundBuyer, payingFetch, receiptsOf, fundFeeVault, startPaywallApp, type PaywallWorld } from '../support/paywall.ts';

// One seller's paid calls share only that seller's locks (its receipt chain, its link's counters row); no
// lock is shared between sellers. Proven without timing: seller A's chain is held by an open transaction that also
// appended an event (a receipt push in progress), and seller B's paid call completes while A's cannot.

const test = anyTest as TestFn<PaywallWorld>;

test.before(async (t) => {
  const w = await startPaywallApp();
  await fundFeeVault(w);
  t.context = w;
});

test("two sellers' paid calls proceed concurrently: B's completes while A's chain is held by an open transaction, A's completes after", async (t) => {
  const w = t.context;
  const a = await createLink(w);
  const b = await createLink(w);
  const [buyerA, buyerB] = [await fundBuyer(w), await fundBuyer(w)];
  const store = w.app.database.store;

  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let holding!: () => void;
  const held = new Promise<void>((r) => (holding = r));
  // A receipt push for seller A, in progress: its chain head locked and its event appended, not committed yet.
  const push = store.transaction(async (tx) => {
    await tx.receipts.lockHead('chain-devnet', a.agent);
    await tx.events.append(
      newEvent(
        'payment_link.deleted',
        { id: newId(), network: 'chain-devnet', agentAsset: a.agent, owner: null, phase: 'confirmed', createdAt: new Date() },
        { payment_link_id: 'held-by-test' },
      ),
    );
    holding();
    await gate;
  });
  await held;

  let aDone = false;
  const paidA = payingFetch(
    w,
    buyerA,
  )(a.url).then(async (res) => {
    aDone = true;
    return { status: res.status, body: await res.text() };
  });
  const resB = await payingFetch(w, buyerB)(b.url);
  t.is(resB.status, 200, await resB.text());
  t.is((await receiptsOf(w, b.agent)).length, 1, "B's earn receipt is recorded while A's chain is held");
  t.false(aDone, "A's paid call cannot be recorded while its chain is held");

  release();
  await push;
  const resA = await paidA;
  t.is(resA.status, 200, resA.body);
  const chainA = await receiptsOf(w, a.agent);
  t.is(chainA.length, 1);
  t.is(chainA[0]!.nonce, 0);
});
