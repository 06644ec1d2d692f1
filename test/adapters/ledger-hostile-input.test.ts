import test, { type ExecutionContext } from 'ava';
import fc from 'fast-check';
import WebSocket from 'ws';
import { startLedgerRpcServer } from '../../adapters/ledger/embedded/rpc-server.ts';
import { ledgerDir, openTestLedger, removeDir } from '../support/ledger.ts';

// No request may kill the process: no body sent to the embedded ledger's JSON-RPC (HTTP) or PubSub
// (WebSocket) may throw out of its listener; each answers the protocol's error and the server keeps serving. The
// server runs in this test's process, so a crash fails the file.

async function served(t: ExecutionContext) {
  const dir = await ledgerDir();
  const ledger = await openTestLedger({ dir });
  const server = await startLedgerRpcServer({ ledger, port: 0, adminSecret: 'x'.repeat(64) });
  t.teardown(async () => {
    await server.close();
    await ledger.close();
    await removeDir(dir);
  });
  const post = async (body: string | Uint8Array) => {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : Buffer.from(body),
    });
    return { status: res.status, text: await res.text() };
  };
  return { server, post };
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSON-RPC 2.0 response object: `jsonrpc`, an id (string, number, null), and either a result or an error with an integer code. */
function isResponse(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const r = value as { jsonrpc?: unknown; id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
  if (r.jsonrpc !== '2.0' || !(r.id === null || typeof r.id === 'string' || typeof r.id === 'number')) return false;
  if ('error' in r) return !('result' in r) && Number.isInteger(r.error?.code) && typeof r.error?.message === 'string';
  return 'result' in r;
}

/** The body of one HTTP answer: a response, or for a non-empty batch an array of them. */
function isAnswer(text: string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return false;
  }
  return Array.isArray(parsed) ? parsed.length > 0 && parsed.every(isResponse) : isResponse(parsed);
}

const errorCode = (text: string) => (JSON.parse(text) as { error?: { code: number } }).error?.code;

const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

test('ledger JSON-RPC over HTTP: null, [null], [1,null] and other non-requests answer -32600, garbage -32700, and the server keeps serving', async (t) => {
  const { post } = await served(t);
  for (const body of [
    'null',
    '1',
    '"text"',
    'true',
    '{}',
    `{"jsonrpc":"2.0","id":${deep(3000)},"method":"getSlot"}`,
    '{"jsonrpc":"2.0","id":{"a":1},"method":"getSlot"}',
  ]) {
    const answer = await post(body);
    t.is(answer.status, 200, body.slice(0, 40));
    t.true(isAnswer(answer.text), body.slice(0, 40));
    t.is(errorCode(answer.text), -32600, body.slice(0, 40));
  }
  for (const body of ['[null]', '[1,null]', '[1,"x",[]]', '[[]]', deep(100_000)]) {
    const answer = await post(body);
    t.true(isAnswer(answer.text), body);
    t.true(
      (JSON.parse(answer.text) as { error: { code: number } }[]).every((r) => r.error.code === -32600),
      body,
    );
  }
  for (const body of ['', '{', 'nul', '[1,', Uint8Array.from([0xff, 0xfe, 0x00, 0x7b])]) {
    const answer = await post(body);
    t.true(isAnswer(answer.text));
    t.is(errorCode(answer.text), -32700);
  }
  t.is((await post('x'.repeat(300 * 1024)).catch(() => ({ status: 413 }))).status, 413, 'a body over the limit');
  t.deepEqual(JSON.parse((await post('{"jsonrpc":"2.0","id":7,"method":"getHealth"}')).text), { jsonrpc: '2.0', result: 'ok', id: 7 });
});

async function openSocket(url: string) {
  const socket = new WebSocket(url);
  socket.on('error', () => {});
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  const messages: string[] = [];
  const waiters: Array<() => void> = [];
  socket.on('message', (raw) => {
    messages.push(raw.toString());
    for (const w of waiters.splice(0)) w();
  });
  const next = async () => {
    while (!messages.length) await new Promise<void>((resolve) => waiters.push(resolve));
    return messages.shift()!;
  };
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, next, closed };
}

test('ledger PubSub over WebSocket: null and other non-requests answer -32600, garbage -32700; bad frames close that socket only', async (t) => {
  const { server } = await served(t);
  const { socket, next } = await openSocket(server.wsUrl);
  t.teardown(() => socket.terminate());
  for (const body of [
    'null',
    '[null]',
    '[1,null]',
    '1',
    '"x"',
    '[]',
    '{"jsonrpc":"2.0","id":{"a":1},"method":"slotSubscribe"}',
    `{"jsonrpc":"2.0","id":${deep(3000)},"method":"slotSubscribe"}`,
    deep(100_000),
  ]) {
    socket.send(body);
    const answer = await next();
    t.true(isAnswer(answer), body.slice(0, 40));
    t.is(errorCode(answer), -32600, body.slice(0, 40));
  }
  for (const body of ['{', 'nul', '[1,']) {
    socket.send(body);
    t.is(errorCode(await next()), -32700);
  }
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'slotSubscribe' }));
  t.like(JSON.parse(await next()), { id: 1, result: 1 });

  // invalid UTF-8 in a text frame and a frame over the size limit: the server closes that socket, nothing else
  for (const frame of [Buffer.from([0xff, 0xfe]), Buffer.alloc(300 * 1024, 0x20)]) {
    const bad = await openSocket(server.wsUrl);
    bad.socket.send(frame, { binary: false });
    await bad.closed;
    t.pass();
  }
  const fresh = await openSocket(server.wsUrl);
  t.teardown(() => fresh.socket.terminate());
  fresh.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'rootSubscribe' }));
  t.like(JSON.parse(await fresh.next()), { id: 9 });
});

/** Requests shaped enough to reach the method handlers: known and unknown methods with arbitrary params and ids. */
const METHODS = [
  'getSlot',
  'getBalance',
  'getAccountInfo',
  'getMultipleAccounts',
  'getSignatureStatuses',
  'getTransaction',
  'sendTransaction',
  'simulateTransaction',
  'getSignaturesForAddress',
  'getLatestBlockhash',
  'isBlockhashValid',
  'getFeeForMessage',
  'getMinimumBalanceForRentExemption',
  'getTokenAccountsByOwner',
  'requestAirdrop',
  'svc_mintStable',
  'getProgramAccounts',
  'getBlock',
  'getBlocks',
  'getBlocksWithLimit',
  'getBlockTime',
  'getBlockProduction',
  'getTransactionsForAddress',
  'getTokenAccountsByDelegate',
  'getTokenLargestAccounts',
  'getStakeActivation',
  'getInflationReward',
  'getSlotLeaders',
  'logsSubscribe',
  'programSubscribe',
  'nope',
  'constructor',
  '__proto__',
];
const jsonValue = fc.jsonValue() as fc.Arbitrary<Json>;
const requestLike = fc.record(
  {
    jsonrpc: fc.oneof(fc.constant('2.0'), jsonValue),
    id: jsonValue,
    method: fc.oneof(fc.constantFrom(...METHODS), jsonValue),
    params: fc.oneof(fc.array(jsonValue, { maxLength: 4 }), jsonValue),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  { weight: 3, arbitrary: requestLike.map((r) => JSON.stringify(r)) },
  { weight: 2, arbitrary: fc.array(fc.oneof(requestLike, jsonValue), { maxLength: 5 }).map((r) => JSON.stringify(r)) },
  { weight: 2, arbitrary: jsonValue.map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary' }) },
);

test('ledger JSON-RPC fuzz (fast-check): arbitrary JSON and bytes get well-formed JSON-RPC answers over HTTP and the server keeps serving', async (t) => {
  const { post } = await served(t);
  await fc.assert(
    fc.asyncProperty(fc.oneof(body, fc.uint8Array({ maxLength: 200 })), async (input) => {
      const answer = await post(input);
      return answer.status === 200 && isAnswer(answer.text);
    }),
    { numRuns: 400 },
  );
  t.like(JSON.parse((await post('{"jsonrpc":"2.0","id":1,"method":"getHealth"}')).text), { result: 'ok' });
});

test('ledger PubSub fuzz (fast-check): arbitrary JSON over WebSocket gets well-formed JSON-RPC answers (or none for a notification) and the socket stays open', async (t) => {
  const { server } = await served(t);
  const { socket, next } = await openSocket(server.wsUrl);
  t.teardown(() => socket.terminate());
  let probe = 0;
  await fc.assert(
    fc.asyncProperty(body, async (input) => {
      if (socket.readyState !== socket.OPEN) return false;
      socket.send(input);
      // a probe after each input: whatever the input answered comes before the probe's answer
      const id = `probe-${++probe}`;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'slotUnsubscribe', params: [-1] }));
      for (;;) {
        const answer = await next();
        const parsed = JSON.parse(answer) as { id?: unknown; method?: unknown };
        if (parsed.id === id) return isAnswer(answer);
        if (typeof parsed.method === 'string') continue; // a notification of a subscription the input made
        if (!isAnswer(answer)) return false;
      }
    }),
    { numRuns: 400 },
  );
  t.is(socket.readyState, socket.OPEN);
});
