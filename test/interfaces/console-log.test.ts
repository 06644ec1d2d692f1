import anyTest, { type TestFn } from 'ava';
import { Keypair, SystemProgram, Transaction } from '@solana/web3.js';
import { http, linkBody, recordAgent, startTestApp, type TestApp } from '../support/app.ts';
import { fundBuyer, payingFetch, startLocalServer, type LocalServer } from '../support/paywall.ts';
import { until } from '../support/until.ts';
import { createLogger, readableFormatter, resolveLogFormat } from '../../interfaces/log.ts';
import { loadConfig } from '../../interfaces/config.ts';
import { type AccessLine, loggableUrl, writeAccessLine } from '../../interfaces/http/logging.ts';
import pino from 'pino';
import { run, RUN_TS } from '../support/commands.ts';

// The console a person reads (interfaces/log.ts): with the pretty format a paid call, a submit, its confirmation and
// a webhook delivery each make one readable line and the per-request lines are folded away; with JSON the lines parse
// and carry the same fields. One app logs JSON into memory; every line also goes through the pretty formatter, so both
// formats are read from the same run.

interface Ctx {
  app: TestApp;
  receiver: LocalServer;
  json: Record<string, any>[];
  pretty: string[];
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const json: Record<string, any>[] = [];
  const pretty: string[] = [];
  const format = readableFormatter({ colorize: false });
  const logger = createLogger({
    level: 'info',
    format: 'json',
    sink: {
      write(line: string) {
        json.push(JSON.parse(line) as Record<string, any>);
        const text = format(line);
        if (text) pretty.push(text);
      },
    },
  });
  const receiver = await startLocalServer(() => ({ status: 204 }));
  const app = await startTestApp({ env: { SVC_OUTBOUND_ALLOW: new URL(receiver.url).host }, appOptions: { logger } });
  t.context = { app, receiver, json, pretty };
});

test.after.always(async (t) => {
  await t.context.receiver?.close();
});

test('a paid call, a submit with its confirmation and a webhook delivery: one readable line each; JSON lines carry the same fields', async (t) => {
  const { app, json, pretty } = t.context;
  const issued = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user' });
  const key = issued.key;
  const { mint } = await recordAgent(app, key);
  const created = await http(app, 'POST', '/v1/payment-links', {
    key,
    body: linkBody(mint, { id: 'console-link', label: 'Console weather', webhook_url: `${t.context.receiver.url}/hook` }),
  });
  t.is(created.status, 201, JSON.stringify(created.body));

  // A paid call (and its payment link webhook).
  const world = { app, key, rpcUrl: app.ledgers.rpcUrls['chain-devnet']! };
  const buyer = await fundBuyer(world, '1');
  const paid = await payingFetch(world, buyer)(created.body.share_url);
  t.is(paid.status, 200, await paid.text());
  const paidLine = await until('the paid-call JSON line', () => json.find((l) => l.evt === 'paid_call'));
  t.like(paidLine, {
    msg: 'paid call',
    link_id: 'console-link',
    label: 'Console weather',
    amount: '0.01',
    currency: 'USDC',
    buyer: buyer.publicKey.toBase58(),
    status: 200,
    protocol: 'x402',
  });
  t.regex(paidLine.signature, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
  t.true(Number.isInteger(paidLine.ms));
  const paidText = pretty.filter((l) => l.includes('paid   Console weather'));
  t.is(paidText.length, 1, pretty.join(''));
  t.regex(
    paidText[0]!,
    new RegExp(`INFO: paid {3}Console weather \\(console-link\\) · 0\\.01 USDC from \\w{6}…\\w{4} · x402 → 200 · tx ${paidLine.signature} · \\d+ ms\n$`),
  );

  const hook = await until('the webhook JSON line', () => json.find((l) => l.evt === 'webhook'));
  t.like(hook, {
    msg: 'webhook delivered',
    outcome: 'delivered',
    status: 204,
    kind: 'payment_link.settled',
    host: new URL(t.context.receiver.url).host,
    attempt: 1,
  });
  t.truthy(hook.delivery_id);
  const hookText = pretty.filter((l) => l.includes(`webhook payment_link.settled/`));
  t.is(hookText.length, 1, pretty.join(''));
  t.regex(
    hookText[0]!,
    new RegExp(
      `INFO: webhook payment_link\\.settled/\\w+ → ${new URL(t.context.receiver.url).host} · 204 · \\d+ ms \\(delivery ${hook.delivery_id}, attempt 1\\)`,
    ),
  );

  // A submit (of a prepared System transfer) and its confirmation.
  const from = Keypair.generate();
  await app.services.dev.fund('chain-devnet', { address: from.publicKey.toBase58(), sol: '1' });
  const caller = { network: 'chain-devnet' as const, role: 'user' as const, owner: `key:${issued.id}`, ownerWallet: null };
  const envelope = await prepareTransfer(app, mint, from, caller);
  const tx = Transaction.from(Buffer.from(envelope.transaction!.base64, 'base64'));
  tx.partialSign(from);
  const submitted = await http(app, 'POST', '/v1/submit', {
    key,
    body: { event_id: envelope.event_id, transaction_base64: tx.serialize().toString('base64') },
  });
  t.is(submitted.status, 202, JSON.stringify(submitted.body));
  const submitLine = json.find((l) => l.evt === 'submit');
  t.like(submitLine, {
    msg: 'transaction submitted',
    outcome: 'submitted',
    event_id: envelope.event_id,
    signature: submitted.body.signature,
    kind: 'agent.treasury.withdraw_sol',
    network: 'chain-devnet',
  });
  const confirmation = await until('the confirmation JSON line', () => json.find((l) => l.evt === 'confirmation' && l.event_id === envelope.event_id));
  t.like(confirmation, { msg: 'transaction confirmed', phase: 'confirmed', signature: submitted.body.signature, error_code: null });
  t.true(Number.isInteger(confirmation.slot));
  t.is(
    pretty.filter((l) => l.includes(`INFO: submit agent.treasury.withdraw_sol event ${envelope.event_id} · tx ${submitted.body.signature} · `)).length,
    1,
    pretty.join(''),
  );
  t.is(
    pretty.filter((l) => l.includes(`INFO: confirmed agent.treasury.withdraw_sol event ${envelope.event_id} · tx ${submitted.body.signature} · slot `)).length,
    1,
    pretty.join(''),
  );

  // One access line per request, at its completion (none at its start): JSON only, folded away in the readable console
  // but for refused requests (not the 402 offer).
  t.false(pretty.some((l) => l.includes('402 GET /x/console-link')));
  t.false(json.some((l) => l.msg === 'incoming request'));
  const access = json.filter((l) => l.msg === 'request completed');
  t.true(access.length > 0);
  const ids = access.map((l) => l.reqId);
  t.is(new Set(ids).size, ids.length, 'one line per request');
  t.like(
    access.find((l) => l.req?.url === '/v1/payment-links'),
    { level: 30, req: { method: 'POST', remoteAddress: '127.0.0.1' }, res: { statusCode: 201 } },
  );
  t.false(pretty.some((l) => /incoming request|request completed/.test(l)));
  const refused = await http(app, 'GET', '/v1/events/01JZZZZZZZZZZZZZZZZZZZZZZZ', { key });
  t.is(refused.status, 404);
  await until('the refused request line', () => pretty.find((l) => l.includes('WARN: 404 GET /v1/events/01JZZZZZZZZZZZZZZZZZZZZZZZ')));
  // No line of either format carries the API key.
  t.false(pretty.some((l) => l.includes(key)));
  if (process.env.SHOW_CONSOLE) t.log(pretty.join(''));
  t.false(json.some((l) => JSON.stringify(l).includes(key)));
});

test('the format: auto is pretty on a terminal and JSON otherwise; SVC_LOG_FORMAT forces either; pretty writes readable text', (t) => {
  t.is(resolveLogFormat('auto', true), 'pretty');
  t.is(resolveLogFormat('auto', false), 'json');
  t.is(resolveLogFormat('json', true), 'json');
  t.is(resolveLogFormat('pretty', false), 'pretty');
  t.is(loadConfig({}).logFormat, 'auto');
  t.is(loadConfig({ SVC_LOG_FORMAT: 'pretty' }).logFormat, 'pretty');

  const written: string[] = [];
  const sink = { write: (s: string) => void written.push(s) };
  const pretty = createLogger({ level: 'info', format: 'pretty', sink, isTTY: false, colorize: false });
  pretty.info(
    { evt: 'submit', outcome: 'rejected', kind: 'buyer.payment', event_id: 'E1', error_code: 'instruction_error', ms: 3, signature: 'x' },
    'transaction refused by the ledger',
  );
  pretty.info({ reqId: 'r1', req: { method: 'GET', url: '/v1/health' }, res: { statusCode: 200 }, responseTime: 1 }, 'request completed');
  pretty.info({ reqId: 'r2', req: { method: 'GET', url: '/x/l' }, res: { statusCode: 402 }, responseTime: 1 }, 'request completed');
  pretty.info({ reqId: 'r3', req: { method: 'GET', url: '/v1/events/E9' }, res: { statusCode: 404 }, responseTime: 2.4 }, 'request completed');
  pretty.warn(
    {
      delivery_id: 'D1',
      webhook_id: 'W1',
      kind: 'payment_link.settled',
      phase: 'confirmed',
      host: 'example.com',
      attempt: 2,
      status: 500,
      error: 'the receiver answered 500',
      next_attempt_at: '2026-01-01T00:05:00.000Z',
    },
    'webhook not delivered',
  );
  pretty.error({ err: new Error('boom') }, 'unexpected error');
  t.is(written.length, 4, written.join(''));
  t.regex(written.splice(1, 1)[0]!, /WARN: 404 GET \/v1\/events\/E9 · 2 ms \(request r3\)\n$/);
  t.regex(
    written[1]!,
    /WARN: webhook payment_link\.settled\/confirmed → example\.com not delivered: the receiver answered 500 · retry at 2026-01-01T00:05:00\.000Z \(delivery D1, attempt 2\)\n$/,
  );
  t.regex(written[0]!, /INFO: submit buyer\.payment event E1 refused by the ledger \(instruction_error\): event failed, nothing charged · 3 ms\n$/);
  t.regex(written[2]!, /ERROR: unexpected error/);
  t.regex(written[2]!, /boom/);

  const lines: string[] = [];
  const jsonLogger = createLogger({ level: 'info', format: 'auto', sink: { write: (s: string) => void lines.push(s) }, isTTY: false });
  jsonLogger.info({ evt: 'paid_call', link_id: 'l', headers: { authorization: 'Bearer secret' } }, 'paid call');
  const parsed = JSON.parse(lines[0]!);
  t.like(parsed, { evt: 'paid_call', link_id: 'l', msg: 'paid call' });
  t.false(lines[0]!.includes('Bearer secret'));
});

test('the access line written without the walk over its fields is the very line pino writes, for any URL, id and bindings', (t) => {
  const written: string[] = [];
  const sink = { write: (text: string) => void written.push(text) };
  const root = createLogger({ level: 'info', format: 'json', sink });
  const lines: AccessLine[] = [
    { reqId: 'R1', method: 'GET', url: '/x/abc?network=chain-devnet', remoteAddress: '127.0.0.1', statusCode: 402, responseTime: 0.123 },
    { reqId: 'R2', method: 'POST', url: '/v1/identity/disclosures/secret-token', remoteAddress: undefined, statusCode: 404, responseTime: 12 },
    { reqId: 'R3', method: 'GET', url: '/v1/a"b\\c\u0007\u2028é', remoteAddress: '::1', statusCode: 200, responseTime: Number.NaN, clientRequestId: 'x"\\y' },
  ];
  for (const log of [root, root.child({ bound: 'yes' })]) {
    for (const line of lines) {
      written.length = 0;
      writeAccessLine(log, line);
      const ours = written.join('');
      written.length = 0;
      log.info(accessFieldsOf(line), 'request completed');
      // the same line but for its time
      t.is(ours.replace(/"time":\d+/, ''), written.join('').replace(/"time":\d+/, ''));
    }
  }
  t.false(JSON.stringify(written).includes('secret-token'));
  // a logger pino must format itself (a mixin) still gets its fields
  written.length = 0;
  writeAccessLine(pino({ mixin: () => ({ mixed: 1 }) }, sink), lines[0]!);
  t.like(JSON.parse(written[0]!), { mixed: 1, reqId: 'R1', msg: 'request completed', res: { statusCode: 402 } });
});

/** The fields the access line carries, as a caller of pino would pass them. */
function accessFieldsOf(line: AccessLine): Record<string, unknown> {
  return {
    reqId: line.reqId,
    ...(line.clientRequestId === undefined ? {} : { client_request_id: line.clientRequestId }),
    req: { method: line.method, url: loggableUrl(line.url), remoteAddress: line.remoteAddress },
    res: { statusCode: line.statusCode },
    responseTime: line.responseTime,
  };
}

/** A prepared System transfer through the real TransactionService (the builders of the 14 routes have their own tests). */
async function prepareTransfer(app: TestApp, mint: string, from: Keypair, caller: { network: 'chain-devnet'; role: 'user'; owner: string; ownerWallet: null }) {
  const to = Keypair.generate().publicKey;
  return app.services.transactions.prepareForAgent(caller, mint, async () => ({
    kind: 'agent.treasury.withdraw_sol',
    agent: mint,
    feePayer: from.publicKey.toBase58(),
    instructions: [SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports: 1_000_000n })],
    echo: { destination: to.toBase58() },
    metadata: { lamports: '1000000', destination: to.toBase58() },
  }));
}

test('the JSON destination loses no line: written out when the process crashes and when a shutdown signal ends it', async (t) => {
  const COUNT = 5000; // over the destination's buffer many times: some writes are in flight when the process ends
  for (const how of ['crash', 'signal'] as const) {
    const ended = await run(process.execPath, [RUN_TS, 'test/support/log-child.ts', how, String(COUNT)]);
    t.is(ended.code, how === 'crash' ? 1 : 0, ended.stderr);
    if (how === 'crash') t.regex(ended.stderr, /a crash right after logging/);
    const lines = ended.stdout.split('\n').filter(Boolean);
    t.is(lines.length, COUNT, `${how}: every line written`);
    t.true(
      lines.every((l, n) => (JSON.parse(l) as { n: number }).n === n),
      `${how}: whole lines, in order`,
    );
  }
});
