import anyTest, { type TestFn } from 'ava';
import type { Keypair } from '@solana/web3.js';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { receiptHash, sha256Hex, type ReceiptV1 } from '../../domain/receipts/schema.ts';
import type { Repositories, Store } from '../../domain/ports/store.ts';
import { http } from '../support/app.ts';
import { statementsOf as pooledStatementsOf } from '../support/statements.ts';
import {
  buildPayment,
  createLink,
  decodeBase64Json,
  eventsOf,
  fundBuyer,
  getLink,
  paidCallsOf,
  receiptsOf,
  startLocalServer,
  fundFeeVault,
  startPaywallApp,
  type CreatedLink,
  type PaywallWorld,
} from '../support/paywall.ts';

// Group commit: the paid calls that land while a record transaction runs are recorded together in the next one,
// whichever sellers they pay; a seller whose chain is held elsewhere is deferred to a queue of its own. Proven without timing: the seller's chain is held by an open transaction (as a
// receipt push in progress would), N paid calls are sent, the first one's record transaction waits on the chain and
// the other N-1 wait in the recorder's queue (observed, not slept for); released, they are written by one transaction.

const test = anyTest as TestFn<PaywallWorld>;
const N = 6;

test.before(async (t) => {
  const w = await startPaywallApp();
  await fundFeeVault(w);
  t.context = w;
});

/** Every statement the app's main pool runs while `fn` runs (test/support/statements.ts). */
async function statementsOf<T>(w: PaywallWorld, fn: () => Promise<T>): Promise<{ value: T; statements: string[] }> {
  let value!: T;
  const statements = await pooledStatementsOf(w.app, [], async () => {
    value = await fn();
  });
  return { value, statements };
}

interface Payment {
  header: string;
  paymentKey: string;
}

/** N payments of `link` by N buyers (built by hand: each PAYMENT-SIGNATURE can be replayed). */
async function payments(w: PaywallWorld, link: CreatedLink, buyers: Keypair[]): Promise<Payment[]> {
  return Promise.all(
    buyers.map(async (buyer) => {
      const built = await buildPayment(w, link.url, buyer);
      return {
        header: built.paymentSignature,
        paymentKey: sha256Hex(decodeTransaction(Uint8Array.from(Buffer.from(built.transaction, 'base64'))).messageBytes),
      };
    }),
  );
}

/**
 * Sends `paid` while the seller's chain is held by an open transaction; once the first call's record transaction waits
 * on the chain and the others wait in the recorder's queue, `whenQueued` runs and the chain is released.
 */
async function sendWhileChainHeld(w: PaywallWorld, link: CreatedLink, paid: Payment[], whenQueued: () => void = () => {}) {
  const store = w.app.database.store;
  const recorder = w.app.services.paywall!.recorder;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let holding!: () => void;
  const held = new Promise<void>((r) => (holding = r));
  const push = store.transaction(async (tx) => {
    await tx.receipts.lockHead('chain-devnet', link.agent);
    holding();
    await gate;
  });
  await held;
  const answers = paid.map((p) =>
    fetch(link.url, { headers: { 'PAYMENT-SIGNATURE': p.header } }).then(async (res) => ({
      status: res.status,
      paymentResponse: decodeBase64Json(res.headers.get('payment-response')),
      body: await res.text(),
    })),
  );
  // polled, never timed: the queue holds the N-1 calls behind the one whose transaction waits on the chain (or a call
  // failed before reaching it: the answers are there to say why)
  let answered = false;
  void Promise.all(answers).then(() => (answered = true));
  while (!answered && recorder.waiting('chain-devnet', link.agent) < paid.length - 1) await new Promise((r) => setTimeout(r, 5));
  whenQueued();
  release();
  await push;
  return Promise.all(answers);
}

/** The chain is whole: nonces 0…n-1, each linked to the one before, each hash recomputes. */
function assertChain(t: { is: (a: unknown, b: unknown, m?: string) => void }, chain: ReceiptV1[], n: number) {
  t.is(chain.length, n, 'receipts on the chain');
  chain.forEach((r, i) => {
    t.is(r.nonce, i, `nonce ${i}`);
    t.is(r.prev_receipt_hash, i === 0 ? null : chain[i - 1]!.receipt_hash, `receipt ${i} links to the one before`);
    const { receipt_hash: _h, ...unhashed } = r;
    t.is(receiptHash(unhashed), r.receipt_hash, `receipt ${i}'s hash`);
  });
}

test.serial("one seller's queued paid calls are recorded by one transaction: N receipts chained, counters exact, each payer answered once", async (t) => {
  const w = t.context;
  const link = await createLink(w);
  const buyers = await Promise.all(Array.from({ length: N }, () => fundBuyer(w)));
  const paid = await payments(w, link, buyers);
  // a subscription of the link's owner that sees two of each call's events: the group's fan-out makes their deliveries
  const receiver = await startLocalServer();
  t.teardown(() => receiver.close());
  const hook = await http(w.app, 'POST', '/v1/webhooks', { key: w.key, body: { url: `${receiver.url}/hook`, events: ['payment_link.settled', 'receipt.*'] } });
  t.is(hook.status, 201, JSON.stringify(hook.body));

  // The receipts' check after publish (grouped by the receipt service, its own statements) is held out of the count.
  const receiptCheck = w.app.services.receipts as unknown as { verifyPublished: (...a: unknown[]) => Promise<number> };
  const verifyPublished = receiptCheck.verifyPublished;
  receiptCheck.verifyPublished = async () => 0;
  const { value: answers, statements } = await statementsOf(w, () => sendWhileChainHeld(w, link, paid)).finally(
    () => (receiptCheck.verifyPublished = verifyPublished),
  );
  for (const a of answers) t.is(a.status, 200, a.body);
  const signatures = answers.map((a) => a.paymentResponse?.transaction as string);
  t.is(new Set(signatures).size, N, 'each payer gets its own settlement');

  // the first call alone (it waited on the chain), then the other N-1 together: two of each write, not N
  const count = (re: RegExp) => statements.filter((s) => re.test(s)).length;
  t.is(count(/^with x as \( select x\.\*, max\(x\.ts\)/), 2, 'receipts: one insert per record transaction');
  t.is(count(/^update paid_calls p set status = 'done'/), 2, 'paid calls: one completion per record transaction');
  t.is(count(/^with x as \( select \* from jsonb_to_recordset.*insert into events/), 2, 'events: one append per record transaction');
  t.is(count(/update payment_links l set call_count/), 2, 'counters: one update per record transaction');
  t.is(count(/^insert into receipts/), 0, 'no receipt is inserted alone');

  const chain = await receiptsOf(w, link.agent);
  assertChain(t, chain, N);
  t.deepEqual(chain.map((r) => r.tx_sig).sort(), [...signatures].sort(), 'one receipt per settlement');
  // ts_max is the running maximum of ts along the chain, across the batch too
  const rows = (await w.app.database.orm.em
    .fork()
    .execute(`select ts, ts_max from receipts where network = 'chain-devnet' and agent = ? order by nonce`, [link.agent])) as { ts: Date; ts_max: Date }[];
  let max = 0;
  for (const r of rows) {
    max = Math.max(max, new Date(r.ts).getTime());
    t.is(new Date(r.ts_max).getTime(), max);
  }

  const { counters } = await getLink(w, link.link.id);
  t.is(counters.call_count, N);
  t.is(counters.settled_count, N);
  t.true(signatures.includes(counters.last_tx_sig!), 'last_tx_sig is one of the batch');
  for (const kind of ['payment_link.settled', 'payment_link.served', 'receipt.published', 'protocol.fee.collected']) {
    const events = await eventsOf(w, kind, link.agent);
    t.deepEqual(events.map((e) => e.signature).sort(), [...signatures].sort(), `${kind}: one per call`);
    t.is(events.length, N, kind);
  }
  t.true((await paidCallsOf(w, link.link.id)).every((c) => c.status === 'done'));
  const deliveries = (await w.app.database.orm.em
    .fork()
    .execute(`select d.kind, e.signature from webhook_deliveries d join events e on e.id = d.event_id where d.webhook_id = ?`, [hook.body.id])) as {
    kind: string;
    signature: string;
  }[];
  t.deepEqual(
    deliveries
      .filter((d) => d.kind === 'payment_link.settled')
      .map((d) => d.signature)
      .sort(),
    [...signatures].sort(),
    'a delivery per settled event',
  );
  t.deepEqual(
    deliveries
      .filter((d) => d.kind === 'receipt.published')
      .map((d) => d.signature)
      .sort(),
    [...signatures].sort(),
    'a delivery per receipt event',
  );
  t.deepEqual(
    deliveries.filter((d) => !/^(payment_link\.settled|receipt\..*)$/.test(d.kind)),
    [],
    'no delivery for the kinds it does not subscribe to',
  );

  // each payer answered once: a replay serves the stored response, nothing is recorded again
  const replay = await fetch(link.url, { headers: { 'PAYMENT-SIGNATURE': paid[2]!.header } });
  t.is(replay.status, 200);
  t.is(decodeBase64Json(replay.headers.get('payment-response'))?.transaction, answers[2]!.paymentResponse.transaction);
  t.is((await receiptsOf(w, link.agent)).length, N);
  t.is((await getLink(w, link.link.id)).counters.call_count, N);
});

test.serial(
  'a fault in one call of a group loses nothing: the others are recorded one by one, the faulty one stays pending and its replay records it',
  async (t) => {
    const w = t.context;
    const link = await createLink(w);
    const buyers = await Promise.all(Array.from({ length: N }, () => fundBuyer(w)));
    const paid = await payments(w, link, buyers);

    // A fault-injecting adapter around the real store: completing the paid calls of a group fails for the group's second
    // call, in that transaction and in every later one, until the fault is lifted.
    const store = w.app.database.store as Store;
    const original = store.transaction;
    let armed = false;
    let poisoned: string | null = null;
    store.transaction = function <T>(this: Store, work: (tx: Repositories) => Promise<T>): Promise<T> {
      return original.call(this, (tx) => {
        const faulty: Repositories = {
          ...tx,
          paidCalls: {
            ...tx.paidCalls,
            completeMany: async (network, done) => {
              if (armed && poisoned === null && done.length > 1) poisoned = done[1]!.paymentKey;
              if (poisoned !== null && done.some((d) => d.paymentKey === poisoned)) throw new Error('injected fault: completing the paid call failed');
              return tx.paidCalls.completeMany(network, done);
            },
          },
        };
        return work(faulty);
      }) as Promise<T>;
    };
    let answers: Awaited<ReturnType<typeof sendWhileChainHeld>>;
    try {
      answers = await sendWhileChainHeld(w, link, paid, () => (armed = true));
    } finally {
      store.transaction = original;
    }
    t.truthy(poisoned, 'the fault hit a group');
    const faulty = paid.findIndex((p) => p.paymentKey === poisoned);
    t.true(faulty >= 0);
    answers.forEach((a, i) => {
      if (i === faulty) t.not(a.status, 200, 'the faulty call is not answered as served');
      else t.is(a.status, 200, a.body);
    });

    // the others are recorded, on an intact chain; the faulty one's payment is kept pending with its settlement
    assertChain(t, await receiptsOf(w, link.agent), N - 1);
    t.is((await getLink(w, link.link.id)).counters.settled_count, N - 1);
    const rows = await paidCallsOf(w, link.link.id);
    t.is(rows.filter((r) => r.status === 'done').length, N - 1);
    const pending = rows.filter((r) => r.status !== 'done');
    t.is(pending.length, 1);
    t.is(pending[0]!.status, 'pending');
    t.truthy(pending[0]!.signature, 'the faulty call keeps its settlement signature');

    // lifted: the same request finishes it (the payment landed once; it is recorded, not charged again)
    const replay = await fetch(link.url, { headers: { 'PAYMENT-SIGNATURE': paid[faulty]!.header } });
    t.is(replay.status, 200, await replay.text());
    t.is(decodeBase64Json(replay.headers.get('payment-response'))?.transaction, pending[0]!.signature);
    assertChain(t, await receiptsOf(w, link.agent), N);
    const { counters } = await getLink(w, link.link.id);
    t.is(counters.call_count, N);
    t.is(counters.settled_count, N);
    t.is((await eventsOf(w, 'receipt.published', link.agent)).length, N);
  },
);

test.serial(
  "several sellers' paid calls are recorded by one transaction; a seller whose chain is held is deferred from that group while the others commit",
  async (t) => {
    const w = t.context;
    const sellers = await Promise.all(Array.from({ length: 4 }, () => createLink(w)));
    const [held, ...others] = sellers as [CreatedLink, ...CreatedLink[]];
    const gate = await createLink(w);
    const paid = await Promise.all([gate, ...sellers].map(async (link) => ({ link, payment: (await payments(w, link, [await fundBuyer(w)]))[0]! })));
    const send = (p: (typeof paid)[number]) => fetch(p.link.url, { headers: { 'PAYMENT-SIGNATURE': p.payment.header } });
    const recorder = w.app.services.paywall!.recorder;

    // A fault-injecting adapter around the real store: the group recording the gate seller's call waits, its chains
    // taken, until the gate opens; the calls that land meanwhile wait for the next group.
    const store = w.app.database.store as Store;
    const original = store.transaction;
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    let entered!: () => void;
    const inGroup = new Promise<void>((r) => (entered = r));
    store.transaction = function <T>(this: Store, work: (tx: Repositories) => Promise<T>): Promise<T> {
      return original.call(this, (tx) => {
        const gating: Repositories = {
          ...tx,
          receipts: {
            ...tx.receipts,
            tryLockHeads: async (network, agents) => {
              const heads = await tx.receipts.tryLockHeads(network, agents);
              if (agents.includes(gate.agent)) {
                entered();
                await opened;
              }
              return heads;
            },
          },
        };
        return work(gating);
      }) as Promise<T>;
    };
    t.teardown(() => {
      store.transaction = original;
    });
    const gated = send(paid[0]!);
    await inGroup;

    // One seller's chain is held by another open transaction (a receipt push in progress).
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let holding!: () => void;
    const holds = new Promise<void>((r) => (holding = r));
    const push = w.app.database.store.transaction(async (tx) => {
      await tx.receipts.lockHead('chain-devnet', held.agent);
      holding();
      await released;
    });
    await holds;
    let heldDone = false;
    const heldAnswer = send(paid[1]!).then(async (res) => {
      heldDone = true;
      return { status: res.status, body: await res.text() };
    });
    const answers = paid.slice(2).map((p) => send(p).then(async (res) => ({ status: res.status, body: await res.text() })));
    // polled, never timed: every seller's call waits for the next group
    while (sellers.some((s) => recorder.waiting('chain-devnet', s.agent) < 1)) await new Promise((r) => setTimeout(r, 5));

    open();
    t.is((await gated).status, 200);
    for (const a of await Promise.all(answers)) t.is(a.status, 200, a.body);
    t.false(heldDone, "the held seller's call waits for its chain");
    const rows = (await w.app.database.orm.em
      .fork()
      .execute(`select agent, xmin::text as xid from receipts where network = 'chain-devnet' and agent in (select jsonb_array_elements_text(?::jsonb))`, [
        JSON.stringify(others.map((o) => o.agent)),
      ])) as { agent: string; xid: string }[];
    t.is(rows.length, others.length, 'one earn receipt per seller');
    t.is(new Set(rows.map((r) => r.xid)).size, 1, "the other sellers' calls were recorded by one transaction");
    t.deepEqual(await receiptsOf(w, held.agent), [], 'nothing recorded on the held chain');

    release();
    await push;
    const last = await heldAnswer;
    t.is(last.status, 200, last.body);
    assertChain(t, await receiptsOf(w, held.agent), 1);
    for (const s of sellers) t.is((await getLink(w, s.link.id)).counters.call_count, 1);
  },
);
