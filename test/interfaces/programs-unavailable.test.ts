import anyTest, { type TestFn } from 'ava';
import { Keypair } from '@solana/web3.js';
import { http, issueKey, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { AGENT_REGISTRY_IDENTITY_PROGRAM_ID } from '../../domain/ledger/programs.ts';
import { MPL_CORE_PROGRAM_ID, treasuryOf } from '../../domain/treasury/derive.ts';
import { PREPARE_ROUTES } from '../../domain/agents/build/index.ts';

// A gateway whose embedded ledgers lack Metaplex Core (no SVC_LEDGER_PROGRAMS, nothing cached: a default start): every
// prepare route that builds a Core or Agent Registry instruction answers 503 program_unavailable naming the program and
// the command that adds it (`npm run programs`, from settings) — after input validation (a bad body is 400 first) and
// before anything is signed or stored (no event).

interface Ctx {
  app: TestApp;
  key: string;
  mint: string;
  owner: string;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const app = await startTestApp({ env: { SVC_LEDGER_PROGRAMS: '' } });
  const key = await issueKey(app);
  const { mint, owner } = await recordAgent(app, key);
  t.context = { app, key, mint, owner };
});

const command = (app: TestApp) => `npm run programs -- --data-dir ${app.dataDir}`;

/** events a route prepared (the indexer's record of the test's own deposit is an observed event, not one of them) */
async function eventCount(t: { context: Ctx }): Promise<number> {
  const res = await http(t.context.app, 'GET', '/v1/events?limit=200', { key: t.context.key });
  return (res.body.data as { phases: { phase: string }[] }[]).filter((e) => e.phases.some((p) => p.phase === 'prepared')).length;
}

test.serial('agents/prepare without Core: 503 program_unavailable naming Metaplex Core and `npm run programs`; nothing prepared', async (t) => {
  const { app, key } = t.context;
  const before = await eventCount(t);
  const owner = Keypair.generate().publicKey.toBase58();
  const res = await http(app, 'POST', '/v1/agents/prepare', { key, body: { owner, name: 'No Core', uri: 'https://example.com/a.json' } });
  t.is(res.status, 503, JSON.stringify(res.body));
  t.is(res.body.error, 'program_unavailable');
  t.deepEqual(res.body.details, { program: MPL_CORE_PROGRAM_ID, program_name: 'mpl-core', command: command(app) });
  t.is(
    res.body.message,
    `The chain-devnet ledger does not run Metaplex Core (${MPL_CORE_PROGRAM_ID}): the transaction could only fail. Run \`${command(app)}\` to copy it into this installation's ledgers, then restart the gateway.`,
  );
  t.is(await eventCount(t), before, 'no event: nothing was prepared');

  const bad = await http(app, 'POST', '/v1/agents/prepare', { key, body: { owner, uri: 'https://example.com/a.json' } });
  t.is(bad.status, 400, 'a bad body is refused before availability is looked at');
  t.is(bad.body.error, 'invalid_request');
});

test.serial('identity/prepare: a null body is 400, a valid one 503 naming the identity program and the command', async (t) => {
  const { app, key, mint } = t.context;
  const nullBody = await http(app, 'POST', `/v1/agents/${mint}/identity/prepare`, { key, body: 'null' });
  t.is(nullBody.status, 400, JSON.stringify(nullBody.body));
  t.is(nullBody.body.error, 'invalid_request');
  const list = await http(app, 'POST', `/v1/agents/${mint}/identity/prepare`, { key, body: '[]' });
  t.is(list.status, 400);
  const bad = await http(app, 'POST', `/v1/agents/${mint}/identity/prepare`, { key, body: { uri: 'not a url' } });
  t.is(bad.status, 400);
  const res = await http(app, 'POST', `/v1/agents/${mint}/identity/prepare`, { key, body: { uri: 'https://example.com/a.json' } });
  t.is(res.status, 503, JSON.stringify(res.body));
  t.like(res.body, {
    error: 'program_unavailable',
    details: { program: AGENT_REGISTRY_IDENTITY_PROGRAM_ID, program_name: 'mpl-agent-registry-identity', command: command(app) },
  });
  // no body at all is an empty object: every field of this route is optional
  const none = await http(app, 'POST', `/v1/agents/${mint}/identity/prepare`, { key });
  t.is(none.status, 503);
});

test.serial('withdraw-sol and delegation (Core Execute): 400 for what the input gets wrong, then 503 naming Core', async (t) => {
  const { app, key, mint, owner } = t.context;
  await app.services.dev.fund('chain-devnet', { address: treasuryOf(mint), sol: '1' });
  const destination = Keypair.generate().publicKey.toBase58();
  const body = { payer: owner, authority: owner, destination };
  const tooMuch = await http(app, 'POST', `/v1/agents/${mint}/treasury/withdraw-sol/prepare`, { key, body: { ...body, lamports: '5000000000' } });
  t.is(tooMuch.status, 400, JSON.stringify(tooMuch.body));
  const res = await http(app, 'POST', `/v1/agents/${mint}/treasury/withdraw-sol/prepare`, { key, body: { ...body, lamports: '1000' } });
  t.is(res.status, 503, JSON.stringify(res.body));
  t.like(res.body, { error: 'program_unavailable', details: { program: MPL_CORE_PROGRAM_ID, command: command(app) } });

  const executive = Keypair.generate().publicKey.toBase58();
  const badAllowance = await http(app, 'POST', `/v1/agents/${mint}/delegation/prepare`, {
    key,
    body: { executive, stable_symbol: 'USDC', allowance: '1.0000001' },
  });
  t.is(badAllowance.status, 400, JSON.stringify(badAllowance.body));
  const delegation = await http(app, 'POST', `/v1/agents/${mint}/delegation/prepare`, { key, body: { executive, stable_symbol: 'USDC', allowance: '5' } });
  t.is(delegation.status, 503, JSON.stringify(delegation.body));
  t.is(delegation.body.details.program, MPL_CORE_PROGRAM_ID);
  t.is(await eventCount(t), 0, 'no route prepared anything');
});

test.serial('every prepare route checks its input before the ledger: a null body is 400 over REST and tRPC, never 503', async (t) => {
  const { app, key, mint } = t.context;
  for (const [name, route] of Object.entries(PREPARE_ROUTES)) {
    const rest = await http(app, 'POST', route.path.replace('{mint}', mint), { key, body: 'null' });
    t.is(rest.status, 400, `${route.path}: ${JSON.stringify(rest.body)}`);
    t.is(rest.body.error, 'invalid_request', route.path);
    const trpc = await http(app, 'POST', `/trpc/prepare.${name}`, { key, body: 'null' });
    t.is(trpc.status, 400, `prepare.${name}: ${JSON.stringify(trpc.body)}`);
    t.is(trpc.body.error.data.code, 'invalid_request', `prepare.${name}`);
  }
  // and a valid body of each Agent Registry route is then 503 naming what the ledger lacks
  const wallet = Keypair.generate().publicKey.toBase58();
  for (const [path, body] of [
    ['executive/register', { authority: wallet }],
    ['executive/delegate', { executive: wallet }],
    ['executive/revoke', { executive: wallet }],
    ['token/set', { genesis_account: wallet }],
    ['delegation/revoke', { stable_symbol: 'USDC' }],
  ] as const) {
    const res = await http(app, 'POST', `/v1/agents/${mint}/${path}/prepare`, { key, body });
    t.is(res.status, 503, `${path}: ${JSON.stringify(res.body)}`);
    t.is(res.body.error, 'program_unavailable', path);
  }
  const events = await http(app, 'GET', '/v1/events?limit=200', { key });
  t.deepEqual(
    (events.body.data as { phase: string }[]).filter((e) => e.phase === 'prepared'),
    [],
    'no route prepared anything',
  );
});
