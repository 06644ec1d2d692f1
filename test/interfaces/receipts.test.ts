import anyTest, { type TestFn } from 'ava';
import { createClient, errorCode } from '../../interfaces/client/index.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { receiptHash, receiptOf, type ReceiptV1 } from '../../domain/receipts/schema.ts';
import { http, issueKey, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { buildChain, buildReceipt, headOf, unknownSignature } from '../support/receipts.ts';

// hosted-api §4.7: receipts pushed, listed, read by hash and walked, on REST, tRPC and GraphQL; each receipt
// with a transaction checked against the embedded ledger.

interface Ctx {
  app: TestApp;
  key: string;
  other: string;
  mainnet: string;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const app = await startTestApp();
  t.context = { app, key: await issueKey(app), other: await issueKey(app), mainnet: await issueKey(app, 'chain-mainnet') };
});

const push = (t: { context: Ctx }, agent: string, body: unknown, key = t.context.key) => http(t.context.app, 'POST', `/v1/receipts/${agent}`, { key, body });

async function eventsOf(t: { context: Ctx }, kind: string, agent: string): Promise<any[]> {
  const res = await http(t.context.app, 'GET', `/v1/events?kind=${kind}&agent=${agent}&limit=200`, { key: t.context.key });
  return res.body.data;
}

test('push: a chain from nonce 0, receipt.published per new receipt, an idempotent repeat writes nothing', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const chain = buildChain(mint, 3);
  for (const r of chain) {
    const res = await push(t, mint, r);
    t.is(res.status, 200, JSON.stringify(res.body));
    t.like(res.body, { ok: true, duplicate: false, receipt_hash: r.receipt_hash, nonce: r.nonce, verification: { status: 'not_applicable' } });
    t.is(typeof res.body.event_id, 'string');
  }
  const again = await push(t, mint, chain[1]);
  t.is(again.status, 200);
  t.like(again.body, { ok: true, duplicate: true, event_id: null, receipt_hash: chain[1]!.receipt_hash });
  const published = await eventsOf(t, 'receipt.published', mint);
  t.is(published.length, 3, 'the repeat wrote no event');
  t.deepEqual(published.map((e) => e.metadata.nonce).sort(), [0, 1, 2]);
  t.is(published[0].metadata.source, 'push');
});

test('push refusals: agent mismatch, bad hash, broken chain, unknown field, another principal, another network', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const other = await recordAgent(t.context.app, t.context.key);
  const [first] = buildChain(mint, 1);

  const mismatch = await push(t, other.mint, first);
  t.is(mismatch.status, 422);
  t.is(mismatch.body.error, 'receipt_agent_mismatch');

  const badHash = await push(t, mint, { ...first, receipt_hash: 'a'.repeat(64) });
  t.is(badHash.status, 422);
  t.is(badHash.body.error, 'receipt_hash_invalid');
  t.is(badHash.body.details.expected, first!.receipt_hash);

  const notFirst = buildReceipt(mint, { nonce: 4, receiptHash: 'b'.repeat(64) });
  const gap = await push(t, mint, notFirst);
  t.is(gap.status, 422);
  t.is(gap.body.error, 'receipt_chain_invalid');
  t.like(gap.body.details, { expected_nonce: 0, expected_prev_receipt_hash: null });

  const unknown = await push(t, mint, { ...first, extra_field: true });
  t.is(unknown.status, 400);
  t.is(unknown.body.error, 'invalid_request');
  t.regex(JSON.stringify(unknown.body.details), /extra_field/);

  const stranger = await push(t, mint, first, t.context.other);
  t.is(stranger.status, 404);
  t.is(stranger.body.error, 'agent_not_found');
  const mainnet = await push(t, mint, first, t.context.mainnet);
  t.is(mainnet.status, 404);

  t.is((await push(t, mint, first)).status, 200, 'the owner may push it');
  const fork = buildReceipt(mint, null, { request: { method: 'POST', url: 'https://fork.example/' } });
  const forked = await push(t, mint, fork);
  t.is(forked.status, 422);
  t.is(forked.body.error, 'receipt_chain_invalid');
});

test('v0.2 (MPP) receipts join the same chain', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const [r0] = buildChain(mint, 1);
  t.is((await push(t, mint, r0)).status, 200);
  const body = { ...buildReceipt(mint, headOf(r0!)), v: '0.2', protocol: 'mpp', mpp_challenge_id: 'ch_1', mpp_settlement_tx: unknownSignature() } as Record<
    string,
    unknown
  >;
  delete body.receipt_hash;
  const v2 = { ...body, receipt_hash: receiptHash(body as any) };
  const res = await push(t, mint, v2);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.verification.status, 'pending', 'its settlement transaction is looked up on the ledger');
});

test('50 concurrent pushes for one agent never fork the chain', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const [r0] = buildChain(mint, 1);
  t.is((await push(t, mint, r0)).status, 200);
  // 50 different receipts all claiming nonce 1: exactly one joins the chain.
  const rivals = Array.from({ length: 50 }, (_, i) => buildReceipt(mint, headOf(r0!), { request: { method: 'GET', url: `https://seller.example/${i}` } }));
  const results = await Promise.all(rivals.map((r) => push(t, mint, r)));
  t.is(results.filter((r) => r.status === 200).length, 1, JSON.stringify(results.map((r) => r.status)));
  t.true(results.filter((r) => r.status !== 200).every((r) => r.status === 422 && r.body.error === 'receipt_chain_invalid'));
  // 50 copies of the same next receipt: one new, 49 duplicates, one event.
  const winner = rivals[results.findIndex((r) => r.status === 200)]!;
  const next = buildReceipt(mint, headOf(winner));
  const copies = await Promise.all(Array.from({ length: 50 }, () => push(t, mint, next)));
  t.true(
    copies.every((r) => r.status === 200),
    JSON.stringify(copies.map((r) => r.body)),
  );
  t.is(copies.filter((r) => r.body.duplicate === false).length, 1);
  t.is((await eventsOf(t, 'receipt.published', mint)).length, 3);
  const report = await http(t.context.app, 'GET', `/v1/receipts/${mint}/verify-chain`, { key: t.context.key });
  t.like(report.body, { ok: true, length: 3, first_break: null, head: { nonce: 2, receipt_hash: next.receipt_hash } });
});

test('list: nonce descending, limit and cursor, filters kind, decision and since', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const chain = buildChain(mint, 7, (i) => ({ kind: i % 2 ? 'spend' : 'earn', decision: i === 3 ? 'deny' : 'allow' }));
  for (const r of chain) t.is((await push(t, mint, r)).status, 200);
  const list = (q: string) => http(t.context.app, 'GET', `/v1/receipts/${mint}${q}`, { key: t.context.key });

  const all = await list('');
  t.deepEqual(
    all.body.data.map((r: any) => r.nonce),
    [6, 5, 4, 3, 2, 1, 0],
  );
  t.like(all.body.data[0], { network: 'chain-devnet', source: 'push', verification: { status: 'not_applicable' } });
  t.false(all.body.has_more);

  const p1 = await list('?limit=3');
  t.deepEqual(
    p1.body.data.map((r: any) => r.nonce),
    [6, 5, 4],
  );
  t.true(p1.body.has_more);
  const p2 = await list(`?limit=3&cursor=${p1.body.next_cursor}`);
  t.deepEqual(
    p2.body.data.map((r: any) => r.nonce),
    [3, 2, 1],
  );
  const p3 = await list(`?limit=3&cursor=${p2.body.next_cursor}`);
  t.deepEqual(
    p3.body.data.map((r: any) => r.nonce),
    [0],
  );
  t.is(p3.body.next_cursor, null);

  t.deepEqual(
    (await list('?kind=spend')).body.data.map((r: any) => r.nonce),
    [5, 3, 1],
  );
  t.deepEqual(
    (await list('?decision=deny')).body.data.map((r: any) => r.nonce),
    [3],
  );
  t.deepEqual(
    (await list('?kind=earn&decision=allow')).body.data.map((r: any) => r.nonce),
    [6, 4, 2, 0],
  );
  t.deepEqual(
    (await list(`?since=${encodeURIComponent(chain[4]!.ts)}`)).body.data.map((r: any) => r.nonce),
    [6, 5, 4],
  );
  t.deepEqual((await list(`?since=${encodeURIComponent('2030-01-01T00:00:00Z')}`)).body.data, []);

  t.is((await list('?limit=201')).status, 400);
  t.is((await list('?cursor=not-a-cursor')).status, 400);
  t.is((await list('?kind=gift')).status, 400);
  const stranger = await http(t.context.app, 'GET', `/v1/receipts/${mint}`, { key: t.context.other });
  t.is(stranger.status, 404);
});

test('list queries are served by an index in their order (no sort)', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const em = t.context.app.database.orm.em.fork();
  await em.execute('set enable_seqscan = off');
  for (const extra of ['', "and kind = 'earn'", "and decision = 'allow'", "and kind = 'earn' and decision = 'allow'"]) {
    const plan = (await em.execute(
      `explain select * from receipts where network = 'chain-devnet' and agent = ? and nonce >= 0 and nonce < 100 ${extra} order by nonce desc limit 51`,
      [mint],
    )) as { 'QUERY PLAN': string }[];
    const text = plan.map((p) => p['QUERY PLAN']).join('\n');
    t.notRegex(text, /Sort/, text);
    t.regex(text, /Index Scan Backward/, text);
  }
  // since: one probe of the ts_max index for the first nonce, then the same backward range scan.
  const probe = (await em.execute(
    `explain select nonce from receipts where network = 'chain-devnet' and agent = ? and ts_max >= now() order by ts_max, nonce limit 1`,
    [mint],
  )) as { 'QUERY PLAN': string }[];
  const probeText = probe.map((p) => p['QUERY PLAN']).join('\n');
  t.regex(probeText, /receipts_agent_ts_max/, probeText);
  t.notRegex(probeText, /Sort/, probeText);
});

test('by-hash: the receipt with its network; 404 for another principal and on the other network', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const [r0] = buildChain(mint, 1);
  await push(t, mint, r0);
  const own = await http(t.context.app, 'GET', `/v1/receipts/by-hash/${r0!.receipt_hash}`, { key: t.context.key });
  t.is(own.status, 200);
  // hosted-api §4.7 "one receipt plus a network field": the receipt's own fields at the top level, the read's beside them
  t.like(own.body, { network: 'chain-devnet', source: 'push', receipt_hash: r0!.receipt_hash, nonce: 0, verification: { status: 'not_applicable' } });
  t.false('receipt' in own.body, 'no nested copy');
  t.deepEqual(Object.keys(own.body).sort(), [...Object.keys(r0!), 'network', 'received_at', 'source', 'verification'].sort());
  t.deepEqual(receiptOf(own.body), r0, 'the read without its read fields is the receipt as pushed');
  t.is(receiptHash(receiptOf(own.body)), r0!.receipt_hash);
  for (const key of [t.context.other, t.context.mainnet]) {
    const res = await http(t.context.app, 'GET', `/v1/receipts/by-hash/${r0!.receipt_hash}`, { key });
    t.is(res.status, 404);
    t.is(res.body.error, 'receipt_not_found');
  }
  t.is((await http(t.context.app, 'GET', `/v1/receipts/by-hash/nothex`, { key: t.context.key })).status, 400);
});

test('verify-chain reports the first break of a tampered stored chain', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const chain = buildChain(mint, 4);
  for (const r of chain) await push(t, mint, r);
  const ok = await http(t.context.app, 'GET', `/v1/receipts/${mint}/verify-chain`, { key: t.context.key });
  t.like(ok.body, { ok: true, length: 4, first_break: null });
  // Someone with database access rewrites nonce 2's amount: its hash no longer matches.
  await t.context.app.database.orm.em
    .fork()
    .execute(`update receipts set body = jsonb_set(body, '{price,amount_atomic}', '"1"') where network = 'chain-devnet' and agent = ? and nonce = 2`, [mint]);
  const broken = await http(t.context.app, 'GET', `/v1/receipts/${mint}/verify-chain`, { key: t.context.key });
  t.like(broken.body, { ok: false, length: 2, head: { nonce: 1 }, first_break: { nonce: 2, problem: 'hash_invalid', receipt_hash: chain[2]!.receipt_hash } });
  t.is((await http(t.context.app, 'GET', `/v1/receipts/${mint}/verify-chain`, { key: t.context.other })).status, 404);
});

test('★ ledger check: a real transaction verifies, wrong amounts are a mismatch with the reason, an unknown one is pending', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const treasury = treasuryOf(mint);
  const funded = await app.services.dev.fund('chain-devnet', { address: treasury, token: 'USDC', amount: '0.01' });
  const sig = funded.mint!.signature;

  const [r0] = buildChain(mint, 1, () => ({ tx_sig: sig }));
  const ok = await push(t, mint, r0);
  t.is(ok.status, 200, JSON.stringify(ok.body));
  t.is(ok.body.verification.status, 'verified', JSON.stringify(ok.body.verification));
  const verified = await eventsOf(t, 'receipt.verified', mint);
  t.is(verified.length, 1);
  t.like(verified[0].metadata, { receipt_hash: r0!.receipt_hash, tx_sig: sig, verification: 'verified' });

  // The same transaction claimed for twice the amount.
  const r1 = buildReceipt(mint, headOf(r0!), {
    tx_sig: sig,
    price: { ...r0!.price, amount: '0.02', amount_atomic: '20000', gross: '20000' },
  });
  const bad = await push(t, mint, r1);
  t.is(bad.body.verification.status, 'mismatch');
  t.regex(bad.body.verification.reason, /moved 10000 .* says 20000/);
  const mismatches = await eventsOf(t, 'receipt.mismatch', mint);
  t.is(mismatches.length, 1);
  t.regex(mismatches[0].metadata.reason, /says 20000/);

  // Another agent claiming this agent's income: nothing reached its treasury.
  const thief = await recordAgent(app, key);
  const stolen = buildReceipt(thief.mint, null, { tx_sig: sig });
  t.is((await push(t, thief.mint, stolen)).body.verification.status, 'mismatch');

  // A signature the ledger never saw stays pending, and the retry job checks it again when due.
  const r2 = buildReceipt(mint, headOf(r1), { tx_sig: unknownSignature() });
  const pending = await push(t, mint, r2);
  t.is(pending.body.verification.status, 'pending');
  const byHash = await http(app, 'GET', `/v1/receipts/by-hash/${r2.receipt_hash}`, { key });
  t.like(byHash.body.verification, { status: 'pending' });
  await app.database.orm.em.fork().execute(`update receipts set verify_after = now() - interval '1 second' where receipt_hash = ?`, [r2.receipt_hash]);
  const due = await app.services.receipts.verifyDue();
  t.true(due.checked >= 1);
  const rows = (await app.database.orm.em
    .fork()
    .execute(`select verification, verification_attempts from receipts where receipt_hash = ?`, [r2.receipt_hash])) as any[];
  t.like(rows[0], { verification: 'pending', verification_attempts: 2 });
});

test('tRPC and GraphQL: the same push, list, by-hash and verify-chain, with the same error codes', async (t) => {
  const { app, key } = t.context;
  const { mint } = await recordAgent(app, key);
  const [r0, r1] = buildChain(mint, 2);
  const trpc = createClient({ url: app.url, apiKey: key });
  const pushed = await trpc.receipts.push.mutate({ ...r0!, agent_mint: mint });
  t.like(pushed, { ok: true, duplicate: false, nonce: 0 });
  const dup = await trpc.receipts.push.mutate({ ...r0!, agent_mint: mint });
  t.like(dup, { duplicate: true, event_id: null });
  const err = await t.throwsAsync(trpc.receipts.push.mutate({ ...r0!, receipt_hash: 'c'.repeat(64), agent_mint: mint }));
  t.is(errorCode(err), 'receipt_hash_invalid');
  const viaTrpc = await trpc.receipts.byHash.query({ hash: r0!.receipt_hash });
  t.like(viaTrpc, { nonce: 0, receipt_hash: r0!.receipt_hash, network: 'chain-devnet', source: 'push' });
  t.deepEqual(receiptOf(viaTrpc), r0);
  t.deepEqual((await trpc.receipts.list.query({ agent: mint, limit: 1 })).data.map(receiptOf), [r0]);

  const gql = (query: string, variables: Record<string, unknown>) => http(app, 'POST', '/graphql', { key, body: { query, variables } });
  const m = await gql(
    `mutation($agent: String!, $receipt: JSON!) { pushReceipt(agent: $agent, receipt: $receipt) { ok duplicate eventId receiptHash nonce verification { status } } }`,
    { agent: mint, receipt: r1 },
  );
  t.like(m.body.data.pushReceipt, { ok: true, duplicate: false, nonce: 1, verification: { status: 'NOT_APPLICABLE' } });
  const chainErr = await gql(`mutation($agent: String!, $receipt: JSON!) { pushReceipt(agent: $agent, receipt: $receipt) { ok } }`, {
    agent: mint,
    receipt: buildReceipt(mint, null, { request: { method: 'PUT', url: 'https://x.example/' } }),
  });
  t.is(chainErr.body.errors[0].extensions.code, 'receipt_chain_invalid');
  const q = await gql(
    `query($agent: String!, $hash: String!) {
       receipts(agent: $agent, first: 1) { data { nonce receiptHash source receipt } nextCursor hasMore }
       receipt(hash: $hash) { nonce network verification { status } }
       receiptChain(agent: $agent) { ok length headNonce firstBreak { nonce } }
     }`,
    { agent: mint, hash: r0!.receipt_hash },
  );
  t.is(q.body.errors, undefined, JSON.stringify(q.body.errors));
  t.like(q.body.data.receipts, { hasMore: true, data: [{ nonce: 1, receiptHash: r1!.receipt_hash, source: 'PUSH' }] });
  t.deepEqual(q.body.data.receipts.data[0].receipt, r1);
  t.like(q.body.data.receipt, { nonce: 0, network: 'CHAIN_DEVNET', verification: { status: 'NOT_APPLICABLE' } });
  t.like(q.body.data.receiptChain, { ok: true, length: 2, headNonce: 1, firstBreak: null });
  const rest = await http(app, 'GET', `/v1/receipts/${mint}?limit=1`, { key });
  t.deepEqual(receiptOf(rest.body.data[0]), q.body.data.receipts.data[0].receipt);
  const hidden = await http(app, 'POST', '/graphql', {
    key: t.context.other,
    body: { query: `query($h: String!) { receipt(hash: $h) { nonce } }`, variables: { h: r0!.receipt_hash } },
  });
  t.is(hidden.body.errors[0].extensions.code, 'receipt_not_found');
});

test('an earn receipt with a fee collects protocol.fee.collected once', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const feeAuthority = treasuryOf(mint); // any address
  const r0 = buildReceipt(mint, null, {
    tx_sig: unknownSignature(),
    price: {
      amount: '0.01',
      currency: 'USDC',
      asset: '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU',
      network: 'x',
      amount_atomic: '10000',
      fee: '100',
      gross: '10100',
      feeBps: 100,
      feeAuthority,
    },
  }) as ReceiptV1;
  t.is((await push(t, mint, r0)).status, 200);
  t.is((await push(t, mint, r0)).body.duplicate, true);
  const fees = await eventsOf(t, 'protocol.fee.collected', mint);
  t.is(fees.length, 1);
  t.like(fees[0].metadata, { source: 'receipt', receipt_hash: r0.receipt_hash, fee_atomic: '100' });
});

test('hostile receipt bodies are 400 invalid_request, never a 500', async (t) => {
  const { mint } = await recordAgent(t.context.app, t.context.key);
  const [r0] = buildChain(mint, 1);
  const cases: unknown[] = [
    { ...r0, nonce: -1 },
    { ...r0, nonce: 1.5 },
    { ...r0, nonce: Number.MAX_SAFE_INTEGER + 2 },
    { ...r0, ts: 'yesterday' },
    { ...r0, reason: 'x'.repeat(5000) },
    { ...r0, price: { ...r0!.price, fee: '-1' } },
    { ...r0, tx_sig: 'not a signature' },
    { ...r0, v: '0.2' },
    { ...r0, agent: 'not-an-address' },
    { ...r0, request: { method: 'GET', url: 'https://x.example/', smuggled: 1 } },
    [r0],
  ];
  for (const body of cases) {
    const res = await http(t.context.app, 'POST', `/v1/receipts/${mint}`, { key: t.context.key, body });
    t.is(res.status, 400, JSON.stringify(res.body));
    t.is(res.body.error, 'invalid_request');
  }
  const notJson = await http(t.context.app, 'POST', `/v1/receipts/${mint}`, {
    key: t.context.key,
    body: '{"v":',
    headers: { 'content-type': 'application/json' },
  });
  t.is(notJson.status, 400);
  t.is((await http(t.context.app, 'POST', `/v1/receipts/not-an-address`, { key: t.context.key, body: r0 })).status, 400);
});
