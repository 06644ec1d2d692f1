import anyTest, { type TestFn } from 'ava';
import fc from 'fast-check';
import { Agent, request as httpRequest } from 'node:http';
import { BUCKETS } from '../../domain/policies/rate-limit.ts';
import { appRouter } from '../../interfaces/trpc/router.ts';
import { issueKey, linkBody, randomAddress, recordAgent, startTestApp, http, type TestApp } from '../support/app.ts';

// Property-based fuzz of every front door. Every operation of /openapi.json gets malformed bodies, path
// and query parameters and odd headers; /trpc and /graphql get their own malformed forms; the paywall, hostile ids.
// Whatever is sent, the answer is below 500, carries X-Svc-Request-Id, and an error is the envelope naming that id.
// FUZZ_SEED replays a run; FUZZ_RUNS sets the runs per operation.

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2_147_483_647);
const RUNS = Number(process.env.FUZZ_RUNS ?? 30);
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const ENVELOPE_KEYS = new Set(['error', 'message', 'details', 'request_id']);

interface Ctx {
  app: TestApp;
  user: string;
  admin: string;
  owner: string;
  /** the owner of `owner`'s Core asset on the ledger (what a record of it must name) */
  agentOwner: string;
  linkId: string;
  eventId: string;
  spareKeyId: string;
  agent: Agent;
}
const test = anyTest as TestFn<Ctx>;

// ── HTTP without a client's opinions: any method, header set, path bytes and body ──────────────────────────────────

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | undefined;
}
interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

function send(ctx: Ctx, req: Req): Promise<Res> {
  const url = new URL(ctx.app.url);
  return new Promise((resolve, reject) => {
    const r = httpRequest(
      { host: url.hostname, port: url.port, method: req.method, path: req.path, headers: req.headers, agent: ctx.agent, timeout: 20_000 },
      (res) => {
        // A live subscription (SSE) is an answer too: its status and headers are what there is to check.
        if (String(res.headers['content-type']).startsWith('text/event-stream')) {
          res.destroy();
          return resolve({ status: res.statusCode ?? 0, headers: res.headers, text: '' });
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    r.on('timeout', () => r.destroy(new Error('no answer within 20 s (a hang)')));
    const deadline = setTimeout(() => r.destroy(new Error('no complete answer within 30 s (a hang)')), 30_000);
    r.on('close', () => clearTimeout(deadline));
    r.on('error', reject);
    if (req.body !== undefined) r.write(req.body);
    r.end();
  });
}

function describe(req: Req): string {
  const body = req.body === undefined ? '' : ` body=${JSON.stringify(req.body.length > 300 ? `${req.body.slice(0, 300)}…(${req.body.length})` : req.body)}`;
  const headers = JSON.stringify(req.headers, (_k, v: unknown) => (typeof v === 'string' && v.length > 100 ? `${v.slice(0, 100)}…(${v.length})` : v));
  const path = req.path.length > 300 ? `${req.path.slice(0, 300)}…(${req.path.length})` : req.path;
  return `${req.method} ${path} ${headers}${body}`;
}

/** The invariant: below 500, X-Svc-Request-Id (a ULID), and errors in the transport's envelope naming that id. */
type EnvelopeCheck = (status: number, json: unknown, requestId: string) => string | undefined;

/** Answers seen, by status class: printed so a run shows how far past validation the fuzz reached. */
const seen = new Map<string, number>();

async function probe(ctx: Ctx, req: Req, envelope: EnvelopeCheck): Promise<string | undefined> {
  let res: Res;
  const started = Date.now();
  try {
    res = await send(ctx, req);
    if (process.env.FUZZ_SLOW && Date.now() - started > Number(process.env.FUZZ_SLOW)) console.log(`slow ${Date.now() - started} ms: ${describe(req)}`);
  } catch (e) {
    return `no answer (${(e as Error).message}) to ${describe(req)}`;
  }
  const klass = `${res.status}`;
  seen.set(klass, (seen.get(klass) ?? 0) + 1);
  const fail = (why: string) => `${why}: ${res.status} ${res.text.slice(0, 300)} ← ${describe(req)}`;
  if (res.status >= 500) return fail('5xx');
  const requestId = res.headers['x-svc-request-id'];
  if (typeof requestId !== 'string' || !ULID.test(requestId)) return fail('no X-Svc-Request-Id');
  if (req.method === 'HEAD' || res.status === 204 || res.status === 304) return undefined;
  if (String(res.headers['content-type']).startsWith('text/event-stream')) return res.status === 200 ? undefined : fail('SSE with an error status');
  if (res.status < 400 && !/json/.test(String(res.headers['content-type']))) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(res.text);
  } catch {
    return fail('not JSON');
  }
  // An Idempotency-Key replay is the first answer byte for byte: its body names the request that produced it.
  const replayedId = (json as { request_id?: unknown } | null)?.request_id;
  const expectedId = res.headers['idempotent-replayed'] === 'true' && typeof replayedId === 'string' && ULID.test(replayedId) ? replayedId : requestId;
  const problem = envelope(res.status, json, expectedId);
  return problem ? fail(problem) : undefined;
}

const restEnvelope: EnvelopeCheck = (status, json, requestId) => {
  if (status < 400) return undefined;
  const body = json as Record<string, unknown>;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'error body is not an object';
  if (typeof body.error !== 'string' || typeof body.message !== 'string') return 'no error/message';
  if (body.request_id !== requestId) return `request_id ${String(body.request_id)} is not the header's ${requestId}`;
  const extra = Object.keys(body).filter((k) => !ENVELOPE_KEYS.has(k) && k !== 'retry_after_ms');
  if (extra.length) return `unexpected envelope keys ${extra.join(',')}`;
  return undefined;
};

const trpcEnvelope: EnvelopeCheck = (status, json, requestId) => {
  // Headers over 16 KiB are refused before any URL is read: the REST envelope, whatever the door.
  if (status === 431) return restEnvelope(status, json, requestId);
  for (const item of Array.isArray(json) ? json : [json]) {
    const error = (item as { error?: { message?: unknown; data?: { code?: unknown; request_id?: unknown } } })?.error;
    if (!error) continue;
    if (typeof error.message !== 'string' || typeof error.data?.code !== 'string') return 'tRPC error without message or data.code';
    if (error.data.code === 'internal_error') return 'internal_error';
    if (error.data.request_id !== requestId) return `data.request_id ${String(error.data.request_id)} is not the header's ${requestId}`;
  }
  return undefined;
};

const graphqlEnvelope: EnvelopeCheck = (_status, json, requestId) => {
  for (const item of Array.isArray(json) ? json : [json]) {
    const errors = (item as { errors?: { message?: unknown; extensions?: { code?: unknown; request_id?: unknown } }[] })?.errors;
    for (const error of errors ?? []) {
      if (typeof error.message !== 'string' || typeof error.extensions?.code !== 'string') return 'GraphQL error without extensions.code';
      if (error.extensions.code === 'internal_error') return 'internal_error';
      if (error.extensions.request_id !== requestId) return `extensions.request_id ${String(error.extensions.request_id)} is not the header's ${requestId}`;
    }
  }
  return undefined;
};

// ── Hostile values ─────────────────────────────────────────────────────────────────────────────────────────────────

/** A raw JSON literal spliced into the serialised body (numbers JSON.stringify cannot write, hostile depth). */
const RAW = (text: string) => `\u0001RAW${text}\u0001`;
const toJson = (value: unknown): string => JSON.stringify(value).replace(/"\\u0001RAW(.*?)\\u0001"/g, (_m, raw: string) => JSON.parse(`"${raw}"`) as string);

const sizes = [65, 201, 513, 2049, 70_000];
const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udfff',
    '\ud83d',
    '\u202e\ufeff',
    '\r\n',
    '%00',
    '../..',
    '11111111111111111111111111111111',
    '18446744073709551616',
    '99999999999999999999.999999999',
    '-1',
    '0',
    '1e309',
    'NaN',
    '$-1',
    '$0.0000001',
    '0x1f',
    'null',
    '{}',
    '__proto__',
    "' OR 1=1 --",
    '*',
    'payment_link.*',
    'chain-mainnet',
    'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA',
    'SysvarRent111111111111111111111111111111111',
    'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr',
    '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU',
    'svc_test_',
    '😀',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom(...sizes).map((n) => 'x'.repeat(n)),
);
const hostileNumber: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(0, -1, 1.5, 2 ** 31, 2 ** 53 + 2, 1e308, -1e308, Number.MAX_SAFE_INTEGER),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom('1e400', '-1e400', '123456789012345678901234567890', '1.00000000000000000000001', '-0').map(RAW),
);
const deep = fc
  .constantFrom(65, 1_000, 100_000)
  .chain((n) => fc.constantFrom(RAW(`${'['.repeat(n)}${']'.repeat(n)}`), RAW(`${'{"a":'.repeat(n)}1${'}'.repeat(n)}`)));
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileString, weight: 5 },
  { arbitrary: hostileNumber, weight: 2 },
  { arbitrary: fc.constantFrom(true, false, null), weight: 1 },
  { arbitrary: fc.array(hostileString, { maxLength: 3 }), weight: 1 },
  { arbitrary: fc.dictionary(hostileString, hostileString, { maxKeys: 3 }), weight: 1 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 1 },
  { arbitrary: deep, weight: 1 },
);
const rawBody = fc.constantFrom(
  '',
  '{',
  '{"a":',
  'null',
  '[]',
  '"x"',
  '0',
  '{"a":1,"a":2}',
  '\ufeff{}',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '{} trailing',
  '\u0000',
  'x'.repeat(1024 * 1024 + 10),
);

/** Path segments and query values: percent-encoded text (lone surrogates as their invalid UTF-8), or raw bytes. */
function encode(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      out += [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else out += encodeURIComponent(ch);
  }
  return out;
}
const hostileSegment: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: hostileString.map(encode), weight: 4 },
  { arbitrary: fc.constantFrom('%', '%zz', '%2', '..', '.', '%C0%AF', '%FF', '%2F', '%5C', 'a'.repeat(6000)), weight: 1 },
);

// ── Headers ────────────────────────────────────────────────────────────────────────────────────────────────────────

const contentType = fc.constantFrom(
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=zz',
  'application/json; charset=utf-16le',
  'application/octet-stream',
  'application/jsonx',
  '',
  'application/json, text/plain',
  'APPLICATION/JSON',
  undefined,
);
const idempotencyKey = fc.option(
  fc.oneof(fc.constantFrom('', ' ', 'k'.repeat(64), 'k'.repeat(65), 'k'.repeat(4000), '\xff\xfe', 'fuzz-reused'), fc.string({ minLength: 1, maxLength: 70 })),
  { freq: 3 },
);
function authorization(ctx: Ctx): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(`Bearer ${ctx.admin}`, `Bearer ${ctx.user}`), weight: 6 },
    {
      arbitrary: fc.constantFrom(
        undefined,
        '',
        'Bearer',
        'Bearer ',
        `Bearer ${ctx.admin} `,
        `bearer ${ctx.admin}`,
        ctx.admin,
        `Bearer ${ctx.admin}x`,
        'Basic Zm9vOmJhcg==',
        `Bearer svc_test_${'x'.repeat(32)}`,
        `Bearer svc_live_${'A'.repeat(32)}`,
        `Bearer ${'x'.repeat(8000)}`,
        'Bearer \xff\xfe',
      ),
      weight: 2,
    },
  );
}
const oddHeaders = fc.dictionary(
  fc.constantFrom('x-request-id', 'accept', 'content-encoding', 'accept-encoding', 'x-forwarded-for', 'origin'),
  fc.constantFrom('', 'gzip', 'br', '*/*', 'text/html', '1.2.3.4, ::1', 'x'.repeat(3000), '\xff'),
  { maxKeys: 2 },
);

function headerSet(parts: {
  ct: string | undefined;
  auth: string | undefined;
  idem: string | null;
  odd: Record<string, string>;
  withBody: boolean;
}): Record<string, string> {
  const h: Record<string, string> = { ...parts.odd };
  if (parts.withBody && parts.ct !== undefined) h['content-type'] = parts.ct;
  if (parts.auth !== undefined) h.authorization = parts.auth;
  if (parts.idem !== null) h['idempotency-key'] = parts.idem;
  return h;
}

// ── Values of the right shape, from a JSON schema, to mutate ──────────────────────────────────────────────────────

type Schema = {
  type?: string;
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  minLength?: number;
  minimum?: number;
  default?: unknown;
};

function exampleOf(s: Schema | undefined): unknown {
  if (!s) return 'x';
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.default !== undefined) return s.default;
  if (s.anyOf) return exampleOf(s.anyOf[0]);
  switch (s.type) {
    case 'object':
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, exampleOf(v)]));
    case 'array':
      return [exampleOf(s.items)];
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return true;
    default:
      return 'x'.repeat(Math.max(1, s.minLength ?? 1));
  }
}

/** Every path into a JSON value, the root included. */
function pathsOf(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out = [prefix];
  if (Array.isArray(value)) for (const [i, v] of value.entries()) out.push(...pathsOf(v, [...prefix, i]));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...prefix, k]));
  return out;
}

function setAt(value: unknown, path: (string | number)[], replacement: unknown, remove = false): unknown {
  if (path.length === 0) return replacement;
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (remove) delete node[last];
  else node[last] = replacement;
  return copy;
}

/** A body: valid-shaped, one part replaced or removed, an unknown field added, or something else entirely. */
function bodyFor(baseline: unknown): fc.Arbitrary<string> {
  const paths = pathsOf(baseline);
  // a body with no field (e.g. `{}`) has nothing to remove
  const removable = paths.filter((p) => p.length > 0);
  return fc.oneof(
    { arbitrary: fc.constant(toJson(baseline)), weight: 1 },
    { arbitrary: fc.tuple(fc.constantFrom(...paths), hostileValue).map(([p, v]) => toJson(setAt(baseline, p, v))), weight: 6 },
    ...(removable.length ? [{ arbitrary: fc.constantFrom(...removable).map((p) => toJson(setAt(baseline, p, undefined, true))), weight: 1 }] : []),
    { arbitrary: fc.tuple(hostileString, hostileValue).map(([k, v]) => toJson({ ...(baseline as object), [k]: v })), weight: 1 },
    { arbitrary: hostileValue.map(toJson), weight: 1 },
    { arbitrary: rawBody, weight: 1 },
  );
}

// ── REST operations from /openapi.json ────────────────────────────────────────────────────────────────────────────

interface Operation {
  method: string;
  path: string;
  parameters: { name: string; in: 'path' | 'query'; schema?: Schema }[];
  body?: Schema;
}

function operationsOf(doc: {
  paths: Record<string, Record<string, { parameters?: Operation['parameters']; requestBody?: { content?: Record<string, { schema?: Schema }> } }>>;
}): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      ops.push({ method: method.toUpperCase(), path, parameters: op.parameters ?? [], body: op.requestBody?.content?.['application/json']?.schema });
    }
  }
  return ops;
}

/** Valid requests to mutate from, where a valid one needs state (an agent, a link, an event); else the schema's shape. */
function baselines(ctx: Ctx): Record<string, { body?: unknown; bodies?: unknown[]; params?: Record<string, string>; query?: Record<string, string> }> {
  return {
    'POST /v1/payment-links': {
      bodies: [
        linkBody(ctx.owner),
        linkBody(ctx.owner, {
          method: 'POST',
          currency: 'USDC',
          accepts_currencies: ['USDC'],
          webhook_url: 'https://example.com/hook',
          metadata: { upstream_url: 'https://example.com/x' },
        }),
      ],
    },
    'PATCH /v1/payment-links/{id}': { body: { label: 'renamed' }, params: { id: ctx.linkId } },
    'GET /v1/payment-links/{id}': { params: { id: ctx.linkId } },
    'DELETE /v1/payment-links/{id}': { params: { id: ctx.linkId } },
    'GET /v1/payment-links': { query: { owner_agent: ctx.owner, limit: '5' } },
    'POST /v1/payment-links/preview': { body: { owner_agent: ctx.owner, method: 'GET', price: '$0.01' } },
    'GET /v1/events': { query: { kind: 'payment_link.*', limit: '5' } },
    'GET /v1/events/{id}': { params: { id: ctx.eventId } },
    'POST /v1/agents/record': { body: { mint: ctx.owner, owner: ctx.agentOwner } },
    'GET /v1/agents/{mint}': { params: { mint: ctx.owner } },
    'POST /v1/seller/parse-price': { body: { price: '$0.01' } },
    'POST /v1/admin/api-keys': { body: { network: 'chain-devnet', owner_wallet: ctx.owner, label: 'fuzz' } },
    'GET /v1/admin/api-keys': { query: { limit: '5' } },
    'POST /v1/admin/api-keys/{id}/disable': { params: { id: ctx.spareKeyId } },
    'GET /v1/metrics/usage': { query: { days: '7' } },
    'GET /v1/metrics/events': { query: { days: '7' } },
    'GET /v1/metrics/settlement': { query: { hours: '24' } },
    'POST /v1/dev/faucet': {
      bodies: [
        { address: ctx.owner, sol: '0.001' },
        { address: ctx.owner, token: 'USDC', amount: '1' },
      ],
    },
  };
}

function restRequest(ctx: Ctx, op: Operation): fc.Arbitrary<Req> {
  const base = baselines(ctx)[`${op.method} ${op.path}`] ?? {};
  const bodyBaselines = base.bodies ?? [base.body ?? (op.body ? exampleOf(op.body) : {})];
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const queryParams = op.parameters.filter((p) => p.in === 'query');

  const params = fc.record(
    Object.fromEntries(
      pathParams.map((p) => [
        p.name,
        fc.oneof({ arbitrary: fc.constant(encode(base.params?.[p.name] ?? String(exampleOf(p.schema)))), weight: 1 }, { arbitrary: hostileSegment, weight: 3 }),
      ]),
    ) as Record<string, fc.Arbitrary<string>>,
  );
  const queryValue = (name: string, schema: Schema | undefined) =>
    fc.oneof(
      { arbitrary: fc.constant<string[]>([]), weight: 2 },
      { arbitrary: fc.constant([base.query?.[name] ?? String(exampleOf(schema))]), weight: 2 },
      { arbitrary: hostileString.map((s) => [s]), weight: 3 },
      { arbitrary: fc.array(hostileString, { minLength: 2, maxLength: 3 }), weight: 1 },
    );
  const query = fc
    .tuple(
      fc.tuple(...queryParams.map((p) => queryValue(p.name, p.schema).map((values) => values.map((v) => `${p.name}=${encode(v)}`)))),
      fc.array(fc.tuple(fc.constantFrom('__proto__', 'input', 'x', 'limit[]', ''), hostileString), { maxLength: 1 }),
    )
    .map(([known, extra]) => [...known.flat(), ...extra.map(([k, v]) => `${encode(k)}=${encode(v)}`)].join('&'));

  const takesBody = op.body !== undefined;
  return fc
    .record({
      method: fc.oneof({ arbitrary: fc.constant(op.method), weight: 12 }, { arbitrary: fc.constantFrom('PUT', 'OPTIONS', 'DELETE', 'POST', 'GET'), weight: 1 }),
      params,
      query,
      body: takesBody
        ? fc
            .constantFrom(...bodyBaselines)
            .chain((b) => bodyFor(b))
            .map((b) => b as string | undefined)
        : fc.option(rawBody, { freq: 8 }).map((b) => b ?? undefined),
      ct: contentType,
      auth: authorization(ctx),
      idem: idempotencyKey,
      odd: oddHeaders,
    })
    .map(({ method, params: p, query: q, body, ct, auth, idem, odd }) => {
      const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => p[name] ?? 'x');
      const withBody = body !== undefined && method !== 'GET' && method !== 'HEAD';
      return {
        method,
        path: q ? `${path}?${q}` : path,
        headers: headerSet({ ct, auth, idem, odd, withBody }),
        body: withBody ? body : undefined,
      };
    });
}

// ── Setup ─────────────────────────────────────────────────────────────────────────────────────────────────────────

test.before(async (t) => {
  // Limits far away: the fuzz is about input, and a 429 would hide the operation behind it.
  const limits = JSON.stringify(Object.fromEntries(BUCKETS.map((b) => [b, 10_000_000])));
  const app = await startTestApp({ env: { SVC_RATE_LIMITS: limits } });
  const user = await issueKey(app);
  const admin = await issueKey(app, 'chain-devnet', 'admin');
  const { mint: owner, owner: agentOwner } = await recordAgent(app, admin);
  const link = await http(app, 'POST', '/v1/payment-links', { key: admin, body: linkBody(owner) });
  if (link.status !== 201) throw new Error(`link: ${JSON.stringify(link.body)}`);
  const events = await http(app, 'GET', '/v1/events?limit=1', { key: admin });
  const spare = await app.services.access.issueKey({ network: 'chain-devnet', role: 'user', owner_wallet: await randomAddress() });
  t.context = {
    app,
    user,
    admin,
    owner,
    agentOwner,
    linkId: link.body.id,
    eventId: events.body.data[0].id,
    spareKeyId: spare.id,
    agent: new Agent({ keepAlive: true, maxSockets: 8 }),
  };
  console.log(`fuzz seed ${SEED} (replay with FUZZ_SEED=${SEED}), ${RUNS} runs per operation`);
});

test.after.always(async (t) => {
  console.log(`fuzz answers by status: ${JSON.stringify(Object.fromEntries([...seen].sort()))}`);
  t.context.agent.destroy();
});

async function fuzz(arbitrary: fc.Arbitrary<Req>, numRuns: number, check: (req: Req) => Promise<string | undefined>, seed = SEED): Promise<string[]> {
  const failures: string[] = [];
  await fc.assert(
    fc.asyncProperty(arbitrary, async (req) => {
      const problem = await check(req);
      if (problem && failures.length < 20) failures.push(problem);
    }),
    { seed, numRuns },
  );
  return failures;
}

// ── The properties ────────────────────────────────────────────────────────────────────────────────────────────────

test('every /openapi.json operation answers malformed bodies, params and headers below 500 in the envelope', async (t) => {
  const ctx = t.context;
  const doc = await http(ctx.app, 'GET', '/openapi.json');
  const ops = operationsOf(doc.body);
  t.true(ops.length >= 20, `operations in /openapi.json: ${ops.length}`);
  // One property per operation, run side by side; each has its own seed derived from the run's.
  const results = await Promise.all(
    ops.map(async (op, i) => ({
      op: `${op.method} ${op.path}`,
      failures: await fuzz(restRequest(ctx, op), RUNS, (req) => probe(ctx, req, restEnvelope), SEED + i),
    })),
  );
  const failed = results.filter((r) => r.failures.length > 0);
  t.deepEqual(
    failed.map((r) => `${r.op}:\n  ${r.failures.slice(0, 5).join('\n  ')}`),
    [],
    `seed ${SEED}`,
  );
});

test('/trpc answers malformed inputs, content types and batches below 500 with data.code and the request id', async (t) => {
  const ctx = t.context;
  const procedures = [...Object.keys(appRouter._def.procedures), 'nope', 'paymentLinks', '__proto__', 'a.b.c'];
  const input = fc.oneof(hostileValue.map(toJson), rawBody, fc.constant(toJson({ price: '$1' })));
  const arbitrary: fc.Arbitrary<Req> = fc.oneof(
    // GET: ?input= (a query, or a mutation over GET)
    fc.record({ p: fc.constantFrom(...procedures), input, auth: authorization(ctx), odd: oddHeaders }).map(({ p, input: i, auth, odd }) => ({
      method: 'GET',
      path: `/trpc/${p}?input=${encode(i)}`,
      headers: headerSet({ ct: undefined, auth, idem: null, odd, withBody: false }),
    })),
    // POST: any body under any content type
    fc
      .record({ p: fc.constantFrom(...procedures), input, ct: contentType, auth: authorization(ctx), idem: idempotencyKey })
      .map(({ p, input: i, ct, auth, idem }) => ({
        method: 'POST',
        path: `/trpc/${p}`,
        headers: headerSet({ ct, auth, idem, odd: {}, withBody: true }),
        body: i,
      })),
    // batches: several procedures, inputs keyed by index (or not), malformed batch parameters
    fc
      .record({
        ps: fc.array(fc.constantFrom(...procedures), { minLength: 1, maxLength: 4 }),
        inputs: fc.array(input, { maxLength: 4 }),
        batch: fc.constantFrom('1', 'true', '0', '', 'x'),
        post: fc.boolean(),
        ct: contentType,
        auth: authorization(ctx),
      })
      .map(({ ps, inputs, batch, post, ct, auth }) => {
        const byIndex = `{${inputs.map((v, i) => `"${i}":${v || 'null'}`).join(',')}}`;
        const path = `/trpc/${ps.join(',')}?batch=${batch}`;
        return post
          ? { method: 'POST', path, headers: headerSet({ ct, auth, idem: null, odd: {}, withBody: true }), body: byIndex }
          : { method: 'GET', path: `${path}&input=${encode(byIndex)}`, headers: headerSet({ ct: undefined, auth, idem: null, odd: {}, withBody: false }) };
      }),
    fc.constantFrom<Req>(
      {
        method: 'POST',
        path: `/trpc/${'seller.parsePrice,'.repeat(300)}seller.parsePrice?batch=1`,
        headers: { authorization: `Bearer ${ctx.admin}`, 'content-type': 'application/json' },
        body: '{}',
      },
      { method: 'GET', path: '/trpc/seller.networks?batch=1&input=%5B', headers: { authorization: `Bearer ${ctx.admin}` } },
      {
        method: 'PUT',
        path: '/trpc/seller.parsePrice',
        headers: { authorization: `Bearer ${ctx.admin}`, 'content-type': 'application/json' },
        body: '{"price":"$1"}',
      },
    ),
  );
  const failures = await fuzz(arbitrary, RUNS * 5, (req) => probe(ctx, req, trpcEnvelope));
  t.deepEqual(failures, [], `seed ${SEED}`);
});

test('/graphql answers malformed documents, variables and bodies below 500 with extensions.code and the request id', async (t) => {
  const ctx = t.context;
  const documents = [
    '{__typename}',
    'query($id: ID!) { paymentLink(id: $id) { id label } }',
    'query($owner: String, $after: String, $first: Int) { paymentLinks(ownerAgent: $owner, after: $after, first: $first) { data { id } hasMore } }',
    'query($id: ID!) { event(id: $id) { id kind } }',
    'query($kinds: [String!], $agent: String, $after: String, $first: Int) { events(kinds: $kinds, agent: $agent, after: $after, first: $first) { data { id } } }',
    'mutation($input: CreatePaymentLinkInput!) { createPaymentLink(input: $input) { id } }',
    'mutation { createPaymentLink(input: { label: "\\u0000", ownerAgent: "x", method: GET, price: "1", response: { body: {} } }) { id } }',
    '{ paymentLink(id: "\\u0000") { id } }',
    '{ paymentLink(id: ',
    'subscription { events { id } }',
    '{ nope }',
  ];
  const createInput = { label: 'Weather', ownerAgent: ctx.owner, method: 'GET', price: '$0.01', response: { body: { ok: true } } };
  const variables = fc.oneof(
    fc.record({
      id: hostileValue,
      owner: hostileValue,
      after: hostileValue,
      first: hostileNumber,
      kinds: fc.array(hostileString, { maxLength: 2 }),
      agent: hostileValue,
    }),
    fc.tuple(fc.constantFrom(...pathsOf(createInput)), hostileValue).map(([p, v]) => ({ input: setAt(createInput, p, v) })),
    hostileValue,
  );
  const operation = fc.record({
    query: fc.oneof({ arbitrary: fc.constantFrom(...documents), weight: 4 }, { arbitrary: hostileString, weight: 1 }),
    variables,
    operationName: fc.option(hostileString, { freq: 4 }),
  });
  const arbitrary: fc.Arbitrary<Req> = fc.oneof(
    fc
      .record({ op: operation, rawVariables: fc.option(fc.constantFrom('{', '[1]', '"x"', 'null', '{"a":'), { freq: 3 }), auth: authorization(ctx) })
      .map(({ op, rawVariables, auth }) => {
        const q = [`query=${encode(op.query)}`, `variables=${rawVariables ?? encode(toJson(op.variables))}`];
        if (op.operationName !== null) q.push(`operationName=${encode(op.operationName)}`);
        return { method: 'GET', path: `/graphql?${q.join('&')}`, headers: headerSet({ ct: undefined, auth, idem: null, odd: {}, withBody: false }) };
      }),
    fc
      .record({
        body: fc.oneof(
          { arbitrary: operation.map(toJson), weight: 4 },
          { arbitrary: fc.array(operation, { minLength: 1, maxLength: 3 }).map(toJson), weight: 1 },
          { arbitrary: operation.map((o) => toJson({ ...o, variables: '{' })), weight: 1 },
          { arbitrary: rawBody, weight: 1 },
          { arbitrary: hostileValue.map(toJson), weight: 1 },
        ),
        ct: fc.oneof(contentType, fc.constantFrom('application/graphql', 'application/graphql-response+json')),
        auth: authorization(ctx),
        idem: idempotencyKey,
      })
      .map(({ body, ct, auth, idem }) => ({ method: 'POST', path: '/graphql', headers: headerSet({ ct, auth, idem, odd: {}, withBody: true }), body })),
  );
  const failures = await fuzz(arbitrary, RUNS * 5, (req) => probe(ctx, req, graphqlEnvelope));
  t.deepEqual(failures, [], `seed ${SEED}`);
});

test('the paywall answers hostile ids, queries and payment headers below 500 in the envelope', async (t) => {
  const ctx = t.context;
  const arbitrary: fc.Arbitrary<Req> = fc
    .record({
      id: fc.oneof(fc.constant(ctx.linkId), hostileSegment),
      network: fc.option(hostileString, { freq: 2 }),
      method: fc.constantFrom('GET', 'POST', 'DELETE', 'PATCH'),
      payment: fc.option(
        fc.tuple(
          fc.constantFrom('payment-signature', 'x-payment'),
          fc.constantFrom('', 'x', 'e30=', 'bnVsbA==', 'W10=', 'eyJ4NDAyVmVyc2lvbiI6Mn0=', '%%%', 'A'.repeat(5000)),
        ),
        { freq: 2 },
      ),
      body: fc.option(rawBody, { freq: 3 }),
      ct: contentType,
    })
    .map(({ id, network, method, payment, body, ct }) => {
      const headers: Record<string, string> = payment ? { [payment[0]]: payment[1] } : {};
      const withBody = body !== null && method !== 'GET';
      if (withBody && ct !== undefined) headers['content-type'] = ct;
      return { method, path: `/x/${id}${network === null ? '' : `?network=${encode(network)}`}`, headers, body: withBody ? body : undefined };
    });
  // 402 is the x402 offer, not an error envelope; everything else in the 4xx range is.
  const paywallEnvelope: EnvelopeCheck = (status, json, requestId) => (status === 402 ? undefined : restEnvelope(status, json, requestId));
  const failures = await fuzz(arbitrary, RUNS * 2, (req) => probe(ctx, req, paywallEnvelope));
  t.deepEqual(failures, [], `seed ${SEED}`);
});
