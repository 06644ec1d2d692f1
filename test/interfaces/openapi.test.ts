import anyTest, { type TestFn } from 'ava';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { z } from 'zod';
import { http, issueKey, startTestApp, type TestApp } from '../support/app.ts';
import { ErrorEnvelope } from '../../interfaces/errors.ts';

// hosted-api §1 and §9: an OpenAPI 3.1 document at /openapi.json describing every /v1 route.

type Operation = {
  operationId?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean }[];
  requestBody?: { content?: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
};
type Doc = {
  openapi: string;
  info: { title: string; version: string };
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, { type: string; scheme?: string }>; schemas?: Record<string, any> };
  security?: Record<string, string[]>[];
};

const test = anyTest as TestFn<{ app: TestApp; doc: Doc; contentType: string | null }>;

const FOUNDATION: [string, string, number][] = [
  ['get', '/v1/payment-links', 200],
  ['post', '/v1/payment-links', 201],
  ['get', '/v1/payment-links/{id}', 200],
  ['patch', '/v1/payment-links/{id}', 200],
  ['delete', '/v1/payment-links/{id}', 204],
  ['post', '/v1/payment-links/preview', 200],
  ['get', '/v1/events', 200],
  ['get', '/v1/events/{id}', 200],
  ['post', '/v1/agents/record', 200],
  ['get', '/v1/agents/{mint}', 200],
  ['post', '/v1/seller/parse-price', 200],
  ['get', '/v1/seller/networks', 200],
  ['get', '/v1/health', 200],
  ['get', '/v1/version', 200],
];

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function operations(doc: Doc): [string, string, Operation][] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => [method, path, op] as [string, string, Operation]),
  );
}

test.before(async (t) => {
  const app = await startTestApp();
  // The document is public: no key needed.
  const res = await http<Doc>(app, 'GET', '/openapi.json');
  if (res.status !== 200) throw new Error(`GET /openapi.json: ${res.status}`);
  t.context = { app, doc: res.body, contentType: res.headers.get('content-type') };
});

test('GET /openapi.json is OpenAPI 3.1.0 JSON', (t) => {
  const { doc, contentType } = t.context;
  t.regex(contentType ?? '', /application\/json/);
  t.is(doc.openapi, '3.1.0');
  t.is(typeof doc.info.title, 'string');
  t.is(doc.info.version, t.context.app.services.settings.version);
  t.true(
    (doc.servers ?? []).some((s) => s.url.startsWith(t.context.app.services.settings.baseUrl)),
    JSON.stringify(doc.servers),
  );
});

test('with PORT=0 the settings name the bound port from the start and are never patched after listen (frozen)', (t) => {
  const { settings } = t.context.app.services;
  const port = new URL(t.context.app.url).port;
  t.is(settings.baseUrl, `http://localhost:${port}`);
  t.is(settings.facilitatorUrl, `http://localhost:${port}/facilitator`);
  t.true(Object.isFrozen(settings) && Object.isFrozen(settings.fee));
  t.throws(() => {
    (settings as { baseUrl: string }).baseUrl = 'http://elsewhere';
  });
});

test('the document passes an independent OpenAPI 3.1 schema validator', async (t) => {
  const v = new Validator();
  const res = await v.validate(structuredClone(t.context.doc) as unknown as Record<string, unknown>);
  t.true(res.valid, JSON.stringify(res.errors));
  t.is(v.version, '3.1');
});

test('the validator is not vacuous: a broken copy of the document fails', async (t) => {
  const broken = structuredClone(t.context.doc) as Doc;
  delete (broken.paths['/v1/payment-links']!.post as Partial<Operation>).responses;
  (broken.paths['/v1/health']!.get as unknown as Record<string, unknown>).parameters = [{ name: 'x', in: 'nowhere' }];
  const res = await new Validator().validate(broken as unknown as Record<string, unknown>);
  t.false(res.valid);
});

test('every foundation /v1 route is present with the right method and success status', (t) => {
  const { doc } = t.context;
  for (const [method, path, status] of FOUNDATION) {
    const op = doc.paths[path]?.[method];
    t.truthy(op, `${method.toUpperCase()} ${path} is documented`);
    if (!op) continue;
    t.truthy(op.responses[String(status)], `${method.toUpperCase()} ${path} documents ${status}: ${Object.keys(op.responses).join(',')}`);
    t.truthy(op.responses.default ?? op.responses['400'], `${method.toUpperCase()} ${path} documents the error envelope`);
  }
});

test('create documents 201 with the link schema and delete documents 204 with no body', (t) => {
  const { doc } = t.context;
  const create = doc.paths['/v1/payment-links']!.post!;
  t.deepEqual(
    Object.keys(create.responses).filter((s) => /^\d+$/.test(s) && s.startsWith('2')),
    ['201'],
  );
  const schema = create.responses['201']!.content?.['application/json']?.schema as { properties?: Record<string, unknown>; $ref?: string };
  t.truthy(schema, 'the 201 response has a JSON schema');
  const props = schema.properties ?? doc.components?.schemas?.[schema.$ref?.split('/').pop() ?? '']?.properties;
  for (const field of [
    'id',
    'network',
    'label',
    'owner_agent',
    'pay_to',
    'method',
    'path',
    'price',
    'currency',
    'accepts_currencies',
    'facilitator',
    'share_url',
    'accepts',
    'counters',
    'created_at',
    'metadata',
  ]) {
    t.truthy(props?.[field], `201 schema has ${field}`);
  }
  t.truthy(create.requestBody?.content?.['application/json'], 'create takes a JSON body');

  const del = doc.paths['/v1/payment-links/{id}']!.delete!;
  t.deepEqual(
    Object.keys(del.responses).filter((s) => /^\d+$/.test(s) && s.startsWith('2')),
    ['204'],
  );
  t.falsy(del.responses['204']!.content, '204 has no body');
  t.true((del.parameters ?? []).some((p) => p.name === 'id' && p.in === 'path' && p.required === true));
});

test('path and query parameters are declared', (t) => {
  const { doc } = t.context;
  const param = (method: string, path: string, name: string, where: string) =>
    (doc.paths[path]?.[method]?.parameters ?? []).some((p) => p.name === name && p.in === where);
  t.true(param('get', '/v1/payment-links/{id}', 'id', 'path'));
  t.true(param('patch', '/v1/payment-links/{id}', 'id', 'path'));
  t.true(param('get', '/v1/agents/{mint}', 'mint', 'path'));
  t.true(param('get', '/v1/events/{id}', 'id', 'path'));
  for (const name of ['owner_agent', 'cursor', 'limit']) t.true(param('get', '/v1/payment-links', name, 'query'), name);
  for (const name of ['kind', 'agent', 'id', 'cursor', 'limit']) t.true(param('get', '/v1/events', name, 'query'), name);
});

test('every operation declares bearer security', (t) => {
  const { doc } = t.context;
  const schemes = doc.components?.securitySchemes ?? {};
  const bearer = Object.entries(schemes)
    .filter(([, s]) => s.type === 'http' && s.scheme?.toLowerCase() === 'bearer')
    .map(([name]) => name);
  t.true(bearer.length > 0, JSON.stringify(schemes));
  // hosted-api §5.1: every route under /v1 needs the bearer key — except the public ones DECISIONS "Identity" names
  // (a disclosure link is its own credential; a registration document is what an agent's on-chain uri points at) and
  // the discovery search fee-facilitator-mpp-tools §4.3 calls public.
  const PUBLIC = new Set(['GET /v1/identity/disclosures/{token}', 'GET /v1/agents/{mint}/registration.json', 'GET /v1/discover/public']);
  const ops = operations(doc).filter(([, path]) => path.startsWith('/v1/'));
  t.true(ops.length >= FOUNDATION.length);
  for (const [method, path, op] of ops) {
    const security = op.security ?? doc.security ?? [];
    if (PUBLIC.has(`${method.toUpperCase()} ${path}`)) {
      t.deepEqual(security, [], `${method.toUpperCase()} ${path} is public`);
      continue;
    }
    t.true(
      security.some((req) => Object.keys(req).some((name) => bearer.includes(name))),
      `${method.toUpperCase()} ${path} security: ${JSON.stringify(security)}`,
    );
  }
});

test('the error envelope is documented with details.issues', (t) => {
  const { doc } = t.context;
  const schemas = doc.components?.schemas ?? {};
  const op = doc.paths['/v1/payment-links']!.post!;
  const ref = (op.responses.default?.content?.['application/json']?.schema as { $ref?: string } | undefined)?.$ref;
  t.truthy(ref);
  const envelope = schemas[ref!.split('/').pop()!];
  t.deepEqual([...envelope.required].sort(), ['error', 'message', 'request_id']);
  t.truthy(envelope.properties.details);
  t.deepEqual([...envelope.properties.details.properties.issues.items.required].sort(), ['code', 'message', 'path']);
});

test('hosted-api §4.7: POST /v1/agents/{mint}/pull-target is documented, and the plural collection path beside it', (t) => {
  const { doc } = t.context;
  for (const path of ['/v1/agents/{mint}/pull-target', '/v1/agents/{mint}/pull-targets']) {
    const op = doc.paths[path]?.post;
    t.truthy(op?.responses['201'], `POST ${path} answers 201`);
    t.true(
      (op?.parameters ?? []).some((p) => p.name === 'mint' && p.in === 'path'),
      path,
    );
  }
  t.truthy(doc.paths['/v1/agents/{mint}/pull-targets']?.get, 'GET stays on the plural path (DECISIONS)');
  t.falsy(doc.paths['/v1/agents/{mint}/pull-target']?.get);
});

test('operation ids are unique', (t) => {
  const ids = operations(t.context.doc)
    .map(([, , op]) => op.operationId)
    .filter(Boolean);
  t.is(new Set(ids).size, ids.length);
});

// The errors each operation can answer, with the real envelope, and a linter's recommended rules clean.

const ENVELOPE_REF = '#/components/schemas/Error';
const refOf = (response: { content?: Record<string, { schema?: unknown }> } | undefined) =>
  (response?.content?.['application/json']?.schema as { $ref?: string } | undefined)?.$ref;

test('every operation declares the 4xx/5xx its policies can answer, each with the one error envelope', (t) => {
  const { doc } = t.context;
  for (const [method, path, op] of operations(doc)) {
    const name = `${method.toUpperCase()} ${path}`;
    const statuses = Object.keys(op.responses);
    const errors = statuses.filter((s) => /^[45]\d\d$/.test(s));
    t.true(
      errors.some((s) => s.startsWith('4')),
      `${name}: a 4xx (${statuses.join(',')})`,
    );
    for (const s of [...errors, 'default']) t.is(refOf(op.responses[s]), ENVELOPE_REF, `${name} ${s}`);
    for (const s of ['429', '500']) t.true(statuses.includes(s), `${name}: ${s}`);
    const keyed = (op.security ?? []).length > 0;
    if (keyed) for (const s of ['401', '504']) t.true(statuses.includes(s), `${name}: ${s}`);
    else t.false(statuses.includes('401'), `${name}: anonymous, no 401`);
    if (op.requestBody) for (const s of ['400', '413']) t.true(statuses.includes(s), `${name}: ${s}`);
    if (keyed && ['post', 'put', 'patch', 'delete'].includes(method)) t.true(statuses.includes('409'), `${name}: Idempotency-Key 409`);
    if (path.includes('{')) t.true(statuses.includes('404'), `${name}: 404`);
    if (path.startsWith('/v1/admin/')) t.true(statuses.includes('403'), `${name}: admin 403`);
  }
  // a procedure's meta adds what its service refuses: POST /v1/submit's ledger answers, POST /v1/payment-links' owner
  const submit = t.context.doc.paths['/v1/submit']!.post!.responses as Record<string, { description?: string }>;
  t.is(submit['422']!.description, 'transaction_invalid, transaction_rejected');
  t.is(submit['504']!.description, 'timeout, submit_timeout');
  t.is(submit['409']!.description, 'idempotency_body_mismatch, idempotency_in_progress, event_already_submitted, event_failed, transaction_expired');
  const create = t.context.doc.paths['/v1/payment-links']!.post!.responses as Record<string, { description?: string }>;
  t.is(create['403']!.description, 'forbidden');
  // the codes of a status are named in its description
  t.is((t.context.doc.paths['/v1/payment-links']!.post!.responses['401'] as { description?: string }).description, 'missing_api_key, invalid_api_key');
});

test('the envelope is registered once, from the zod schema REST answers with; tRPC’s error.* schemas are gone', async (t) => {
  const { doc, app } = t.context;
  const schemas = doc.components?.schemas ?? {};
  t.deepEqual(
    Object.keys(schemas).filter((n) => /error/i.test(n)),
    ['Error'],
  );
  const { $schema: _, ...fromZod } = z.toJSONSchema(ErrorEnvelope, { target: 'draft-2020-12', io: 'output' });
  t.deepEqual(schemas.Error, JSON.parse(JSON.stringify(fromZod)));
  // Real answers of the REST door fit it exactly (no field the schema does not name).
  const exact = z.strictObject(ErrorEnvelope.shape);
  const key = await issueKey(app);
  const answers = [
    await http(app, 'GET', '/v1/payment-links'), // 401
    await http(app, 'GET', '/v1/payment-links/no-such-link', { key }), // 404
    await http(app, 'POST', '/v1/payment-links', { key, body: { label: 1 } }), // 400 with details.issues
    await http(app, 'GET', '/v1/admin/api-keys', { key }), // 403
  ];
  t.deepEqual(
    answers.map((a) => a.status),
    [401, 404, 400, 403],
  );
  for (const a of answers) {
    const parsed = exact.safeParse(a.body);
    t.true(parsed.success, JSON.stringify(a.body));
  }
  // each answer's status is one its operation declares, with that code in the description
  const declared = (path: string, method: string, status: number) =>
    (doc.paths[path]![method]!.responses[String(status)] as { description?: string } | undefined)?.description ?? '';
  t.true(declared('/v1/payment-links', 'get', 401).includes(answers[0]!.body.error));
  t.is(answers[1]!.body.error, 'payment_link_not_found');
  t.true(declared('/v1/payment-links/{id}', 'get', 404).split(', ').includes(answers[1]!.body.error));
  t.true(declared('/v1/payment-links', 'post', 400).includes(answers[2]!.body.error));
  t.true(declared('/v1/admin/api-keys', 'get', 403).includes(answers[3]!.body.error));
  t.true(Array.isArray(answers[2]!.body.details?.issues));
});

/**
 * Redocly's recommended ruleset, three rules off:
 * - info-license: the project publishes no license (package.json is private); the field cannot be filled truthfully.
 * - no-server-example.com: `servers` is the deployment's own SVC_BASE_URL; a local gateway (and this test's) is localhost.
 * - no-ambiguous-paths: /v1/receipts/by-hash/{hash} beside /v1/receipts/{agent}/daily and the like are resolved by
 *   OpenAPI's own rule (a concrete segment is matched before a template) and so does the REST router (find-my-way).
 */
const LINT_RULES_OFF = { 'info-license': 'off', 'no-server-example.com': 'off', 'no-ambiguous-paths': 'off' } as const;

async function lint(doc: unknown) {
  const config = await createConfig({ extends: ['recommended'], rules: LINT_RULES_OFF });
  return lintFromString({ source: JSON.stringify(doc), absoluteRef: 'openapi.json', config });
}

test('@redocly/openapi-core lint (recommended ruleset) reports nothing, errors or warnings', async (t) => {
  const problems = await lint(t.context.doc);
  t.deepEqual(
    problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} ${p.location[0]?.pointer ?? ''}`),
    [],
  );
});

/**
 * Descriptions are written once (zod `.describe()`, procedure meta) and the document shows them: every operation has a
 * description (Redocly's operation-description), every parameter too (parameter-description), and every property of
 * every request and response schema (a Redocly configurable rule on Schema objects under SchemaProperties).
 */
const DESCRIPTION_RULES = {
  'operation-description': 'error',
  'parameter-description': 'error',
  'rule/property-description': {
    subject: { type: 'Schema', property: 'description' },
    where: [{ subject: { type: 'SchemaProperties' }, assertions: { defined: true } }],
    assertions: { defined: true },
    message: 'Every request and response field has a description',
    severity: 'error',
  },
} as const;

async function lintDescriptions(doc: unknown) {
  const config = await createConfig({ rules: DESCRIPTION_RULES } as unknown as Parameters<typeof createConfig>[0]);
  return lintFromString({ source: JSON.stringify(doc), absoluteRef: 'openapi.json', config });
}

test('every operation, parameter and request/response field has a description (Redocly rules, zero problems)', async (t) => {
  const problems = await lintDescriptions(t.context.doc);
  t.deepEqual(
    problems.map((p) => `${p.ruleId}: ${p.location[0]?.pointer ?? ''}`),
    [],
  );
});

test('the description rules are not vacuous: a field, a parameter and an operation without one are reported', async (t) => {
  const broken = structuredClone(t.context.doc) as Doc;
  const op = broken.paths['/v1/payment-links']!.get! as Operation & { description?: string };
  delete op.description;
  delete (op.parameters![0] as { description?: string }).description;
  const item = (
    op.responses['200']!.content!['application/json']!.schema as { properties: { data: { items: { properties: Record<string, { description?: string }> } } } }
  ).properties.data.items.properties;
  delete item.label!.description;
  const rules = (await lintDescriptions(broken)).map((p) => p.ruleId);
  for (const rule of ['operation-description', 'parameter-description', 'rule/property-description']) t.true(rules.includes(rule), rule);
});

test('the lint is not vacuous: an operation without 4xx, an unused schema and identical paths are reported', async (t) => {
  const broken = structuredClone(t.context.doc) as Doc;
  const op = broken.paths['/v1/payment-links']!.get!;
  op.responses = { '200': op.responses['200']! };
  broken.components!.schemas!['error.BAD_REQUEST'] = { type: 'object' };
  broken.paths['/v1/receipts/{agent_mint}'] = { delete: structuredClone(broken.paths['/v1/receipts/{agent}']!.get!) };
  const rules = new Set((await lint(broken)).map((p) => p.ruleId));
  for (const rule of ['operation-4xx-response', 'no-unused-components', 'no-identical-paths']) t.true(rules.has(rule), rule);
});
