import test from 'ava';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { expectAll, runLoad } from './load.ts';

// The benches' load generator (its own process): what it sends and counts, never how fast.

async function recorder() {
  const seen: { path: string; header: string | undefined; body: { lane?: number; i: number } }[] = [];
  const server = Fastify({ logger: false });
  server.post('/*', async (req, reply) => {
    seen.push({ path: req.url, header: req.headers['x-n'] as string | undefined, body: req.body as { lane?: number; i: number } });
    return reply.code((req.body as { i: number }).i === -1 ? 409 : 202).send({ ok: true });
  });
  await server.listen({ port: 0, host: '127.0.0.1' });
  return { seen, url: `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`, close: () => server.close() };
}

const json = { 'content-type': 'application/json' };

test('closed loop: each request is sent exactly once, with its own path, headers and body; statuses counted', async (t) => {
  const r = await recorder();
  t.teardown(r.close);
  const requests = Array.from({ length: 200 }, (_, i) => ({ path: `/p/${i}`, headers: { 'x-n': String(i) }, body: JSON.stringify({ i }) }));
  const result = await expectAll({ generator: 'closed', url: r.url, method: 'POST', headers: json, connections: 8, requests }, 202);
  t.is(result.generator, 'closed-loop');
  t.is(result.total, 200);
  t.deepEqual(result.statuses, { '202': 200 });
  t.deepEqual(
    r.seen.map((s) => s.body.i).sort((a, b) => a - b),
    requests.map((_, i) => i),
  );
  for (const s of r.seen) {
    t.is(s.path, `/p/${s.body.i}`);
    t.is(s.header, String(s.body.i));
  }
});

test('closed loop: lanes are sent in order, one worker each', async (t) => {
  const r = await recorder();
  t.teardown(r.close);
  const lanes = Array.from({ length: 5 }, (_, lane) => Array.from({ length: 20 }, (_, i) => ({ path: '/lane', body: JSON.stringify({ lane, i }) })));
  const result = await runLoad({ generator: 'closed', url: r.url, method: 'POST', headers: json, lanes });
  t.is(result.total, 100);
  for (let lane = 0; lane < 5; lane++) {
    t.deepEqual(
      r.seen.filter((s) => s.body.lane === lane).map((s) => s.body.i),
      Array.from({ length: 20 }, (_, i) => i),
    );
  }
});

test('expectAll refuses a run with another status and names the first odd answer', async (t) => {
  const r = await recorder();
  t.teardown(r.close);
  const requests = [{ body: JSON.stringify({ i: 1 }) }, { body: JSON.stringify({ i: -1 }) }];
  const error = await t.throwsAsync(expectAll({ generator: 'closed', url: `${r.url}/x`, method: 'POST', headers: json, connections: 1, requests }, 202));
  t.regex(error!.message, /not every answer was 202: \{"202":1,"409":1\}; first: 409 \{"ok":true\}/);
});

test('autocannon: a fixed request for a duration; every answer counted by status', async (t) => {
  const r = await recorder();
  t.teardown(r.close);
  const result = await runLoad({
    generator: 'cannon',
    url: `${r.url}/c`,
    method: 'POST',
    headers: json,
    body: JSON.stringify({ i: 7 }),
    connections: 2,
    duration: 1,
  });
  t.is(result.generator, 'autocannon');
  t.true(result.total > 0);
  t.deepEqual(result.statuses, { '202': result.total });
  t.true(r.seen.length >= result.total, 'the server saw at least every counted answer');
  t.true(r.seen.every((s) => s.body.i === 7 && s.path === '/c'));
});
