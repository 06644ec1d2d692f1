import { statementsOf } from '../support/statements.ts';
import { until } from '../support/until.ts';
import anyTest, { type TestFn } from 'ava';
import { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { FacilitatorService } from '../../domain/facilitator/service.ts';
import { MikroOrmFacilitatorStore } from '../../adapters/store/repositories/facilitator.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { issueKey, syntheticEvent } from '../support/app.ts';
import { newId } from '../../domain/shared/ids.ts';
import { PgEventFeed } from '../../adapters/store/event-feed.ts';
import { EVENTS_HELD_BACK_SQL, eventPageSql, eventsSinceSql } from '../../adapters/store/repositories/events.ts';
import type { MikroOrmStore } from '../../adapters/store/mikro-orm-store.ts';
import { decodeTransaction } from '../../domain/facilitator/decode.ts';
import { sha256Hex } from '../../domain/receipts/schema.ts';
import type { EventRecord } from '../../domain/events/schema.ts';
import {
  buildPayment,
  createLink,
  decodeBase64Json,
  eventsOf,
  fundBuyer,
  receiptsOf,
  fundFeeVault,
  startPaywallApp,
  type CreatedLink,
  type PaywallWorld,
} from '../support/paywall.ts';

// The paid path end to end: what one paid call costs in PostgreSQL statements and ledger-thread messages,
// and what the receipts' check after publish costs per group. Counted, never timed.

const test = anyTest as TestFn<PaywallWorld & { link: CreatedLink }>;

test.before(async (t) => {
  const w = await startPaywallApp();
  await fundFeeVault(w);
  const link = await createLink(w);
  // warm: the seller's token account, the link cache, the facilitator's terms
  const warm = await buildPayment(w, link.url, await fundBuyer(w));
  const res = await fetch(link.url, { headers: { 'PAYMENT-SIGNATURE': warm.paymentSignature } });
  if (res.status !== 200) throw new Error(`warm-up payment: ${res.status} ${await res.text()}`);
  t.context = { ...w, link };
});

/** The background statements of the process's timers and feed (rate-limit exchange, usage flush, event catch-up, the indexer job). */
const BACKGROUND = [/insert into rate_hits/i, /insert into request_records/i, /from events\b.*seq/is, /insert into indexer_runs/i, /\bindexer_watch\b/i];

/** The messages the app sends its embedded ledger thread while `fn` runs, by method. */
async function ledgerCallsOf(fn: () => Promise<unknown>): Promise<string[]> {
  const proto = LedgerThread.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  const original = proto.call!;
  const calls: string[] = [];
  proto.call = function (this: unknown, method: unknown, ...rest: unknown[]) {
    calls.push(String(method));
    return original.call(this, method, ...rest);
  };
  try {
    await fn();
  } finally {
    proto.call = original;
  }
  return calls;
}

const paymentKeyOf = (transaction: string) => sha256Hex(decodeTransaction(Uint8Array.from(Buffer.from(transaction, 'base64'))).messageBytes);

test.serial(
  'a paid call: one claim statement (already attempted), the guard claim and finish, one record transaction; the ledger asked three times, no separate simulation',
  async (t) => {
    const w = t.context;
    const built = await buildPayment(w, w.link.url, await fundBuyer(w));
    // Hold the receipt's check after publish (it runs when the feed brings the event): not the call's own work.
    const receipts = w.app.services.receipts as unknown as { verifyPublished: (...a: unknown[]) => Promise<number> };
    const verify = receipts.verifyPublished;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    receipts.verifyPublished = async function (this: unknown, ...args: unknown[]) {
      await held;
      return verify.apply(this, args);
    };
    let status = 0;
    let statements: string[] = [];
    let ledger: string[] = [];
    try {
      ledger = await ledgerCallsOf(async () => {
        statements = await statementsOf(w.app, BACKGROUND, async () => {
          const res = await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': built.paymentSignature } });
          status = res.status;
          await res.arrayBuffer();
        });
      });
    } finally {
      release();
      receipts.verifyPublished = verify;
    }
    t.is(status, 200);
    const begin = statements.indexOf('BEGIN;');
    t.true(begin > 0, statements.join('\n'));
    const outside = [...statements.slice(0, begin), ...statements.slice(statements.indexOf('COMMIT;') + 1)];
    t.is(outside.length, 3, outside.join('\n'));
    t.regex(outside[0]!, /^insert into paid_calls .* attempted, request,/, 'the claim keeps the request and marks the attempt');
    t.regex(outside[1]!, /^insert into facilitator_settlements/, "the facilitator's guard claim");
    t.regex(outside[2]!, /^update facilitator_settlements f set status = x.status/, "the facilitator's guard finish");
    t.false(
      statements.some((s) => /^update paid_calls set attempted/.test(s)),
      'no separate markAttempted',
    );
    t.is(statements.filter((s) => s === 'BEGIN;').length, 1, 'one transaction: the record');
    // (background work — the indexer's slot reads — may ask the ledger meanwhile: the paid path's methods are counted)
    const count = (m: string) => ledger.filter((x) => x === m).length;
    t.deepEqual(
      ['getMultipleAccounts', 'simulateTransaction', 'sendTransaction', 'waitForSignature'].map((m) => [m, count(m)]),
      [
        ['getMultipleAccounts', 1],
        ['simulateTransaction', 0],
        ['sendTransaction', 1],
        ['waitForSignature', 1],
      ],
      `the send preflights: no simulateTransaction before it (${ledger.join(', ')})`,
    );
  },
);

test.serial("a paid call's own events (settled, served) leave the link cached: the next paid call reads no link", async (t) => {
  const w = t.context;
  const admin = await w.app.services.access.authenticate(`Bearer ${await issueKey(w.app, 'chain-devnet', 'admin')}`);
  const first = await buildPayment(w, w.link.url, await fundBuyer(w));
  const second = await buildPayment(w, w.link.url, await fundBuyer(w));
  // the first call's payment_link.served, as this process's feed hands it to its listeners (the link cache's among them)
  let unwatch = () => {};
  const served = new Promise<void>((resolve) => {
    unwatch = w.app.services.events.watch(admin, { kinds: ['payment_link.served'] }, (e) => {
      if (e.metadata.payment_link_id === w.link.link.id) resolve();
    });
  });
  t.teardown(() => unwatch());
  t.is((await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': first.paymentSignature } })).status, 200);
  await served;
  const statements = await statementsOf(w.app, BACKGROUND, async () => {
    const res = await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': second.paymentSignature } });
    t.is(res.status, 200, await res.text());
  });
  t.deepEqual(
    statements.filter((s) => /^select l\.\*.* from payment_links/.test(s)),
    [],
    'the link is answered from the cache',
  );
});

test.serial('the claim is durable before money can move: when the facilitator is asked to settle, the row is attempted and holds the request', async (t) => {
  const w = t.context;
  const built = await buildPayment(w, w.link.url, await fundBuyer(w));
  const paymentKey = paymentKeyOf(built.transaction);
  const seen: { attempted: boolean; request: { transaction: string } | null; status: string }[] = [];
  const settle = FacilitatorService.prototype.settle;
  FacilitatorService.prototype.settle = async function (this: FacilitatorService, ...args: Parameters<FacilitatorService['settle']>) {
    const rows = (await w.app.database.orm.em
      .fork()
      .execute(`select attempted, request, status from paid_calls where network = 'chain-devnet' and payment_key = ?`, [paymentKey])) as typeof seen;
    seen.push(...rows);
    return settle.apply(this, args);
  };
  let status = 0;
  try {
    const res = await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': built.paymentSignature } });
    status = res.status;
    await res.arrayBuffer();
  } finally {
    FacilitatorService.prototype.settle = settle;
  }
  t.is(status, 200);
  t.is(seen.length, 1, 'settled once');
  t.like(seen[0], { attempted: true, status: 'running' });
  t.is(seen[0]!.request?.transaction, built.transaction, 'the request a replay or the reconciliation needs is kept');
});

test.serial("a failing settlement is refused by the send's preflight: nothing lands, the payment is forgotten and may be paid again", async (t) => {
  const w = t.context;
  const buyer = await fundBuyer(w, '0.001'); // less than price + fee
  const built = await buildPayment(w, w.link.url, buyer);
  const history = async () => (await w.app.services.ledgers['chain-devnet']!.getSignaturesForAddress(buyer.publicKey.toBase58())).map((s) => s.signature);
  const funded = await history();
  const ledger = await ledgerCallsOf(async () => {
    const res = await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': built.paymentSignature } });
    t.is(res.status, 402);
    t.is(((await res.json()) as { error: string }).error, 'insufficient_funds');
  });
  t.false(ledger.includes('simulateTransaction'));
  const rows = (await w.app.database.orm.em
    .fork()
    .execute(`select status from paid_calls where network = 'chain-devnet' and payment_key = ?`, [paymentKeyOf(built.transaction)])) as unknown[];
  t.deepEqual(rows, [], 'released: nothing moved');
  t.deepEqual(await history(), funded, 'nothing landed for the buyer');
  // funded now, the same signed payment is paid: the refusal left nothing that would make it a duplicate
  await w.app.services.dev.fund('chain-devnet', { address: buyer.publicKey.toBase58(), token: 'USDC', amount: '1' });
  const again = await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': built.paymentSignature } });
  t.is(again.status, 200, await again.text());
});

test.serial('receipts published together are checked together: one transaction, one verification statement and one event append for the group', async (t) => {
  const w = t.context;
  const N = 4;
  const before = new Set((await receiptsOf(w, w.link.agent)).map((r) => r.receipt_hash));
  const receipts = w.app.services.receipts;
  // The watcher is held for the whole test (the receipts stay pending), and the group is checked here at once.
  const service = receipts as unknown as { verifyPublished: (...a: unknown[]) => Promise<number> };
  const verify = service.verifyPublished;
  service.verifyPublished = async () => 0;
  // settled as by an outside facilitator: its receipts are recorded pending, for the ledger check (DECISIONS "Receipts")
  const recorder = w.app.services.paywall!.recorder as unknown as { deps: { ownFacilitator?: boolean } };
  recorder.deps.ownFacilitator = false;
  t.teardown(() => {
    delete (service as { verifyPublished?: unknown }).verifyPublished; // the prototype's again
    recorder.deps.ownFacilitator = true;
  });
  const built = await Promise.all(Array.from({ length: N }, async () => buildPayment(w, w.link.url, await fundBuyer(w))));
  for (const b of built) t.is((await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': b.paymentSignature } })).status, 200);
  const fresh = (await receiptsOf(w, w.link.agent)).filter((r) => !before.has(r.receipt_hash));
  t.is(fresh.length, N);
  const pending = (await w.app.database.orm.em
    .fork()
    .execute(
      `select receipt_hash from receipts where network = 'chain-devnet' and verification = 'pending' and receipt_hash in (select jsonb_array_elements_text(?::jsonb))`,
      [JSON.stringify(fresh.map((r) => r.receipt_hash))],
    )) as unknown[];
  t.is(pending.length, N, 'held: still pending');
  const published = fresh.map(
    (receipt) =>
      ({
        kind: 'receipt.published',
        network: 'chain-devnet',
        metadata: { source: 'paywall', receipt_hash: receipt.receipt_hash, receipt },
      }) as unknown as EventRecord,
  );

  let decided = 0;
  const statements = await statementsOf(w.app, BACKGROUND, async () => (decided = await verify.call(receipts, 'chain-devnet', published)));
  t.is(decided, N);
  t.is(statements.filter((s) => s === 'BEGIN;').length, 1, statements.join('\n'));
  t.is(statements.filter((s) => /^update receipts r set verification/.test(s)).length, 1, 'one statement decides the group');
  t.is(statements.filter((s) => /insert into events/.test(s)).length, 1, "one append for the group's events");
  t.false(
    statements.some((s) => /^update receipts set verification/.test(s)),
    'no receipt decided alone',
  );
  const verified = (await eventsOf(w, 'receipt.verified', w.link.agent)).filter((e) => fresh.some((r) => r.receipt_hash === e.metadata.receipt_hash));
  t.is(verified.length, N, 'one receipt.verified per receipt');
  t.true(verified.every((e) => e.metadata.verification === 'verified'));

  // checked again (a second instance saw the same events): nothing is decided twice
  t.is(await verify.call(receipts, 'chain-devnet', published), 0);
  t.is((await eventsOf(w, 'receipt.verified', w.link.agent)).filter((e) => fresh.some((r) => r.receipt_hash === e.metadata.receipt_hash)).length, N);
});

test.serial(
  'a receipt our facilitator saw confirmed is recorded verified with its receipt.verified, in the record transaction; the check after publish asks the ledger nothing',
  async (t) => {
    const w = t.context;
    const built = await buildPayment(w, w.link.url, await fundBuyer(w));
    const receipts = w.app.services.receipts as unknown as { verifyPublished: (...a: unknown[]) => Promise<number> };
    const verify = receipts.verifyPublished;
    let checked!: (n: number) => void;
    const checkedNow = new Promise<number>((r) => (checked = r));
    receipts.verifyPublished = async function (this: unknown, ...args: unknown[]) {
      const n = (await verify.apply(this, args)) as number;
      checked(n);
      return n;
    };
    let statements: string[] = [];
    let signature = '';
    try {
      statements = await statementsOf(w.app, BACKGROUND, async () => {
        const res = await fetch(w.link.url, { headers: { 'PAYMENT-SIGNATURE': built.paymentSignature } });
        t.is(res.status, 200, await res.text());
        signature = decodeBase64Json(res.headers.get('payment-response'))?.transaction as string;
      });
      // decided already: the check after publish finds nothing pending (no second read of the settlement)
      t.is(await checkedNow, 0, 'nothing left to decide after publish');
    } finally {
      delete (receipts as { verifyPublished?: unknown }).verifyPublished; // the prototype's again
    }
    const record = statements.slice(statements.indexOf('BEGIN;'), statements.indexOf('COMMIT;'));
    t.true(
      record.some((s) => /insert into receipts/.test(s)),
      record.join('\n'),
    );
    const [receipt] = (await w.app.database.orm.em
      .fork()
      .execute(`select receipt_hash, verification, verification_reason, verify_after from receipts where network = 'chain-devnet' and tx_sig = ?`, [
        signature,
      ])) as { receipt_hash: string; verification: string; verification_reason: string; verify_after: Date | null }[];
    t.like(receipt, { verification: 'verified', verify_after: null });
    t.regex(receipt!.verification_reason, /confirmed on the ledger .* and 100 to the fee authority/);
    const events = (await eventsOf(w, 'receipt.verified', w.link.agent)).filter((e) => e.metadata.receipt_hash === receipt!.receipt_hash);
    t.is(events.length, 1);
    t.like(events[0]!.metadata, { source: 'paywall', verification: 'verified', tx_sig: signature });
    t.is(record.filter((s) => /insert into events/.test(s)).length, 1, "one append: the call's events and its receipt.verified");
  },
);

test.serial("the facilitator's guard claims and finishes that arrive together are written together, each decided as alone", async (t) => {
  const w = t.context;
  const store = new MikroOrmFacilitatorStore(w.app.database.orm);
  const N = 6;
  const at = new Date();
  const signatures = Array.from({ length: N }, () => encodeBase58(randomBytes(64)));
  const claim = (signature: string) => store.claimSettlement({ network: 'chain-devnet', signature, payer: 'payer', blockhash: 'hash', at });
  let claims: Awaited<ReturnType<typeof claim>>[] = [];
  // N claims at once and the first one again: the first goes alone, the others wait for it and go as one statement
  const claimed = await statementsOf(w.app, BACKGROUND, async () => (claims = await Promise.all([...signatures.map(claim), claim(signatures[0]!)])));
  t.is(claimed.filter((s) => /^insert into facilitator_settlements/.test(s)).length, 2, claimed.join('\n'));
  t.deepEqual(
    claims.slice(0, N).map((c) => c.claimed),
    Array.from({ length: N }, () => true),
    'each new signature claimed',
  );
  t.like(claims[N], { claimed: false, existing: { status: 'pending', signature: signatures[0] } }, 'a signature claimed once');

  const finished = await statementsOf(w.app, BACKGROUND, () =>
    Promise.all(
      signatures.map((s, i) =>
        store.finishSettlement({ network: 'chain-devnet', signature: s, status: i % 2 ? 'failed' : 'settled', error: i % 2 ? 'boom' : null, at }),
      ),
    ),
  );
  t.is(finished.filter((s) => /^update facilitator_settlements/.test(s)).length, 2, finished.join('\n'));
  for (const [i, signature] of signatures.entries())
    t.like(await store.getSettlement('chain-devnet', signature), { status: i % 2 ? 'failed' : 'settled', error: i % 2 ? 'boom' : null });
  // a failed row (nothing landed) may be claimed again; a settled one may not
  const again = await Promise.all(signatures.slice(0, 2).map(claim));
  t.deepEqual(
    again.map((c) => c.claimed),
    [false, true],
  );
});

test.serial(
  'while committed events are held back by an older open transaction, the feed keeps one look-again pending however many catch-ups end',
  async (t) => {
    const w = t.context;
    const store = w.app.database.store as MikroOrmStore;
    // A fault-injecting store around the real one: the horizon stays held until `held` is lifted; the catch-ups are counted.
    let held = true;
    let catchUps = 0;
    const faulty = Object.assign(Object.create(store) as MikroOrmStore, {
      eventsSince: (after: bigint, limit: number) => {
        catchUps++;
        return store.eventsSince(after, limit);
      },
      eventsHeldBack: async () => held,
    });
    const feed = new PgEventFeed(w.app.database.url, faulty, { warn: () => {} });
    t.teardown(() => feed.close());
    (feed as unknown as { lastSeq: bigint }).lastSeq = await store.maxEventSeq();
    const pump = () => (feed as unknown as { pump: () => Promise<void> }).pump();
    // ten catch-ups end one after the other (as ten notifications would make them), each seeing the horizon held
    for (let i = 0; i < 10; i++) await pump();
    held = false;
    const before = catchUps;
    // the one pending look again runs, and finds the horizon passed: the feed goes idle (not pumping, no look pending;
    // it is not listening, so nothing else starts one) and the count is final — waited on the feed's state, not timed
    const state = feed as unknown as { pumping: boolean; heldRetry: unknown };
    await until('the look again ran and the feed is idle', () => catchUps > before && !state.pumping && state.heldRetry === undefined, { everyMs: 5 });
    t.is(catchUps - before, 1, 'one look again pending, not one per catch-up');
  },
);

test.serial(
  "the feed's and the event lists' statements compute the horizon once per statement, never per row, whatever plan the table's statistics give",
  async (t) => {
    const w = t.context;
    const em = w.app.database.orm.em.fork();
    // the statements as the feed sends them (the catch-up after a seq, the look whether events are held back), and the
    // network-scoped lists (first page, a replay after a cursor, two kinds as a union of per-kind branches)
    const page = { owner: 'someone', limit: 51 };
    const statements = [
      eventsSinceSql(0n, 500),
      { sql: EVENTS_HELD_BACK_SQL, params: [] },
      eventPageSql('chain-devnet', { ...page, kinds: undefined }),
      eventPageSql('chain-devnet', { ...page, kinds: undefined, after: 1n }),
      eventPageSql('chain-devnet', { ...page, kinds: ['payment_link.settled', 'receipt.published'] }),
    ];
    // a plan with a scan (as on a young table before its statistics) and one with the index
    for (const scans of ['off', 'on']) {
      await em.transactional(async (tx) => {
        await tx.execute(`set local enable_indexscan = ${scans}`);
        await tx.execute(`set local enable_bitmapscan = ${scans}`);
        for (const { sql, params } of statements) {
          const plan = ((await tx.execute(`explain ${sql}`, params)) as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
          const perRow = plan.split('\n').filter((l) => /(Filter|Index Cond):.*svc_events_horizon\(\)/.test(l));
          t.deepEqual(perRow, [], `${sql} (index scans ${scans}):\n${plan}`);
          t.regex(plan, /InitPlan/, 'the horizon is an init plan: computed once');
        }
      });
    }
  },
);

test.serial(
  'paid-call claims that arrive together are one statement, each decided as alone: fresh ones claimed and marked, a repeated payment claimed once, a lapsed one taken over unmarked',
  async (t) => {
    const w = t.context;
    const { paidCalls } = w.app.database.store;
    const link = (await w.app.database.orm.em.fork().execute(`select pk from payment_links where network = 'chain-devnet' and id = ?`, [w.link.link.id])) as {
      pk: string;
    }[];
    const linkPk = link[0]!.pk;
    const now = new Date();
    const claimOf = (paymentKey: string, attempt: boolean, at = now) => ({
      network: 'chain-devnet' as const,
      paymentKey,
      linkPk,
      linkId: w.link.link.id,
      lockedUntil: new Date(at.getTime() + 60_000),
      at,
      expiresAt: new Date(at.getTime() + 86_400_000),
      attempt: attempt ? { request: { version: 2, transaction: `tx-${paymentKey}` } as never } : undefined,
    });
    // a call whose lease lapsed long ago, never attempted: the next claim takes it over
    const lapsed = `lapsed-${randomBytes(8).toString('hex')}`;
    t.true((await paidCalls.claim(claimOf(lapsed, false, new Date(now.getTime() - 3_600_000)))).claimed);
    const fresh = Array.from({ length: 5 }, () => `fresh-${randomBytes(8).toString('hex')}`);
    let results: Awaited<ReturnType<typeof paidCalls.claim>>[] = [];
    const statements = await statementsOf(w.app, BACKGROUND, async () => {
      results = await Promise.all([
        paidCalls.claim(claimOf(fresh[0]!, true)),
        ...fresh.slice(1).map((k) => paidCalls.claim(claimOf(k, true))),
        paidCalls.claim(claimOf(fresh[1]!, true)),
        paidCalls.claim(claimOf(lapsed, true)),
      ]);
    });
    t.is(statements.filter((s) => /^insert into paid_calls/.test(s)).length, 2, 'the first alone, the rest together');
    for (let i = 0; i < 5; i++) t.like(results[i], { claimed: true, marked: true, record: { attempted: true, status: 'running' } }, `fresh ${i}`);
    t.like(results[5], { claimed: false, record: { paymentKey: fresh[1], status: 'running' } }, 'the same payment again: taken');
    t.like(results[6], { claimed: true, marked: false, record: { attempted: false } }, 'taken over, left unmarked: its claimer marks it');
    const kept = (await w.app.database.orm.em
      .fork()
      .execute(`select request from paid_calls where network = 'chain-devnet' and payment_key = ?`, [fresh[3]])) as { request: { transaction: string } }[];
    t.is(kept[0]!.request.transaction, `tx-${fresh[3]}`, 'each row keeps its own request');
    for (const k of [...fresh, lapsed]) await paidCalls.release('chain-devnet', k);
  },
);

test.serial('one append of several events wakes the feeds once, not once per event', async (t) => {
  const w = t.context;
  const listener = new pg.Client({ connectionString: w.app.database.url });
  await listener.connect();
  t.teardown(() => listener.end());
  const payloads: string[] = [];
  listener.on('notification', (n) => payloads.push(n.payload ?? ''));
  await listener.query('LISTEN svc_events');
  const events = Array.from({ length: 5 }, () =>
    syntheticEvent({
      id: newId(),
      network: 'chain-devnet',
      agentAsset: null,
      owner: null,
      phase: 'confirmed',
      createdAt: new Date(),
      kind: 'payment_link.deleted',
      metadata: { payment_link_id: 'x' },
    }),
  );
  await w.app.database.store.transaction((tx) => tx.events.appendMany(events));
  await listener.query('select 1'); // the notification, sent at commit, is delivered before this answer
  const newest = (await listener.query<{ m: string }>(`select max(seq)::text as m from events where id = any($1)`, [events.map((e) => e.id)])).rows[0]!.m;
  t.deepEqual(payloads, [newest], 'one notification for the statement, naming its newest seq');
});
