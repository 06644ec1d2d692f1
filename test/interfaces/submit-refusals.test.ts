import anyTest, { type TestFn } from 'ava';
import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { http, startTestApp, type TestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { watchEvents } from '../support/graphql.ts';
import { metaplexTest } from '../support/programs.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';

// hosted-api §4.5 over REST on the embedded devnet running Metaplex Core: a refused submit says whose signature is
// missing and how to keep the gateway's, and leaves the event resubmittable; a submit the ledger refuses is written on
// the event (failed, error_code, error_logs) so GET /v1/events/{id} and a subscription end a tracking loop, and the
// failed event cannot be submitted again.

interface Ctx {
  app: TestApp;
  key: string;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const app = await startTestApp();
  const key = (await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' })).key;
  t.context = { app, key };
});

const bytesOf = (envelope: PreparedEnvelope) => Buffer.from(envelope.transaction!.base64, 'base64');

/** The right way: add the signature, keep the gateway's. */
function partialSigned(envelope: PreparedEnvelope, ...signers: Keypair[]): string {
  const tx = Transaction.from(bytesOf(envelope));
  tx.partialSign(...signers);
  return tx.serialize({ requireAllSignatures: true }).toString('base64');
}

async function confirmed(app: TestApp, key: string, id: string): Promise<Record<string, unknown>> {
  return until(
    `${id} decided`,
    async () => {
      const e = await http(app, 'GET', `/v1/events/${id}`, { key });
      return e.body.phase === 'confirmed' || e.body.phase === 'failed' ? e.body : undefined;
    },
    { everyMs: 250 },
  );
}

metaplexTest(
  test,
  'agents/prepare signed with legacy Transaction.sign() is 422 naming the new asset’s key and the fix; the same event re-signed confirms',
  async (t) => {
    const { app, key } = t.context;
    const owner = Keypair.generate();
    await app.services.dev.fund('chain-devnet', { address: owner.publicKey.toBase58(), sol: '2' });
    const prepared = await http<PreparedEnvelope>(app, 'POST', '/v1/agents/prepare', {
      key,
      body: { owner: owner.publicKey.toBase58(), name: 'Signed wrong', uri: 'https://example.com/a.json' },
    });
    t.is(prepared.status, 200, JSON.stringify(prepared.body));
    const envelope = prepared.body;
    const asset = String(envelope.echo.asset);

    // The trap: Transaction.sign() resets every signature slot, dropping the gateway's signature for the new asset.
    const wrong = Transaction.from(bytesOf(envelope));
    wrong.sign(owner);
    const refused = await http(app, 'POST', '/v1/submit', {
      key,
      body: { event_id: envelope.event_id, transaction_base64: wrong.serialize({ requireAllSignatures: false }).toString('base64') },
    });
    t.is(refused.status, 422);
    t.is(refused.body.error, 'transaction_invalid');
    t.regex(refused.body.message, new RegExp(`${asset} \\(the new agent asset’s key`));
    t.regex(refused.body.message, /partialSign\(key\)/);
    t.regex(refused.body.message, /never Transaction\.sign\(\)/);
    t.regex(refused.body.message, /partiallySignTransaction/);
    t.deepEqual(refused.body.details.missing_signers, [asset]);
    t.deepEqual(refused.body.details.signers, [{ address: asset, roles: ['new_asset'], presigned: true, problem: 'missing' }]);
    t.like(refused.body.details, { event_id: envelope.event_id, phase: 'prepared' });
    t.regex(refused.body.details.hint, /VersionedTransaction\.deserialize\(bytes\)\.sign\(\[key\]\)/);

    // The owner's key unsigned: named with its roles.
    const unsigned = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: envelope.transaction!.base64 } });
    t.is(unsigned.status, 422);
    t.deepEqual(unsigned.body.details.signers, [{ address: owner.publicKey.toBase58(), roles: ['fee_payer', 'owner'], presigned: false, problem: 'missing' }]);
    t.regex(unsigned.body.message, /\(fee payer, agent owner\)/);

    // Nothing was written: the event is still prepared, records its signers' roles, and the same event re-signed confirms.
    const still = await http(app, 'GET', `/v1/events/${envelope.event_id}`, { key });
    t.like(still.body, { phase: 'prepared', error_code: null, error_logs: null });
    t.deepEqual(still.body.metadata.signers, [
      { address: owner.publicKey.toBase58(), roles: ['fee_payer', 'owner'], presigned: false },
      { address: asset, roles: ['new_asset'], presigned: true },
    ]);
    const ok = await http(app, 'POST', '/v1/submit', { key, body: { event_id: envelope.event_id, transaction_base64: partialSigned(envelope, owner) } });
    t.is(ok.status, 202, JSON.stringify(ok.body));
    t.like(await confirmed(app, key, envelope.event_id!), { phase: 'confirmed', error_code: null });
  },
);

metaplexTest(
  test,
  'a submit the ledger refuses fails the event with error_code and logs (REST and a subscription); submitting it again is 409 event_failed',
  async (t) => {
    const { app, key } = t.context;
    const owner = Keypair.generate();
    const ownerAddress = owner.publicKey.toBase58();
    await app.services.dev.fund('chain-devnet', { address: ownerAddress, sol: '3' });
    const minted = await http<PreparedEnvelope>(app, 'POST', '/v1/agents/prepare', {
      key,
      body: { owner: ownerAddress, name: 'Overdrawn', uri: 'https://example.com/b.json' },
    });
    t.is(minted.status, 200, JSON.stringify(minted.body));
    const mint = String(minted.body.echo.asset);
    t.is(
      (await http(app, 'POST', '/v1/submit', { key, body: { event_id: minted.body.event_id, transaction_base64: partialSigned(minted.body, owner) } })).status,
      202,
    );
    t.like(await confirmed(app, key, minted.body.event_id!), { phase: 'confirmed' });

    // 1 SOL into the treasury; two withdrawals of 0.6 SOL are each within the balance when prepared.
    const ledger = app.services.ledgers['chain-devnet']!;
    const { blockhash } = await ledger.getLatestBlockhash();
    const deposit = new Transaction({ feePayer: owner.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: owner.publicKey, toPubkey: new PublicKey(treasuryOf(mint)), lamports: 1_000_000_000n }),
    );
    deposit.sign(owner);
    t.true((await ledger.sendTransaction(Uint8Array.from(deposit.serialize()))).ok);
    const withdraw = () =>
      http<PreparedEnvelope>(app, 'POST', `/v1/agents/${mint}/treasury/withdraw-sol/prepare`, {
        key,
        body: { payer: ownerAddress, authority: ownerAddress, destination: Keypair.generate().publicKey.toBase58(), lamports: '600000000' },
      });
    const first = await withdraw();
    const second = await withdraw();
    t.is(second.status, 200, JSON.stringify(second.body));
    t.is(
      (await http(app, 'POST', '/v1/submit', { key, body: { event_id: first.body.event_id, transaction_base64: partialSigned(first.body, owner) } })).status,
      202,
    );
    t.like(await confirmed(app, key, first.body.event_id!), { phase: 'confirmed' });

    const live = await watchEvents(app, key);
    t.teardown(live.close);
    const signed = partialSigned(second.body, owner);
    const rejected = await http(app, 'POST', '/v1/submit', { key, body: { event_id: second.body.event_id, transaction_base64: signed } });
    t.is(rejected.status, 422, JSON.stringify(rejected.body));
    t.is(rejected.body.error, 'transaction_rejected');
    t.like(rejected.body.details, { event_id: second.body.event_id, phase: 'failed', error_code: 'instruction_error' });
    t.regex(rejected.body.message, /Nothing landed and nothing was charged/);
    t.truthy(rejected.body.details.hint);

    // The tracking loop ends: the event is failed, with the cause, over REST and on the live subscription.
    const failed = await http(app, 'GET', `/v1/events/${second.body.event_id}`, { key });
    t.like(failed.body, { phase: 'failed', error_code: 'instruction_error', signature: null });
    const logs = failed.body.error_logs as string[];
    t.regex(logs[0]!, /^hint: nothing landed and nothing was charged\./);
    t.regex(logs[1]!, /^err: \{"InstructionError"/);
    t.true(
      logs.some((l) => /insufficient lamports/i.test(l)),
      JSON.stringify(logs),
    );
    t.true(logs.length <= 22);
    const pushed = await until('the failure on the subscription', async () => live.seen.find((e) => e.id === second.body.event_id && e.phase === 'FAILED'), {
      everyMs: 50,
    });
    t.is(pushed.errorCode, 'instruction_error');
    t.deepEqual(pushed.errorLogs, logs);

    // The same bytes (or any) again: refused clearly, nothing broadcast, the event unchanged.
    const again = await http(app, 'POST', '/v1/submit', { key, body: { event_id: second.body.event_id, transaction_base64: signed } });
    t.is(again.status, 409);
    t.is(again.body.error, 'event_failed');
    t.like(again.body.details, { event_id: second.body.event_id, phase: 'failed', error_code: 'instruction_error' });
    t.like((await http(app, 'GET', `/v1/events/${second.body.event_id}`, { key })).body, { phase: 'failed', signature: null });
  },
);
