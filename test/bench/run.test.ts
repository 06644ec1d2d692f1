import test from 'ava';
import { benchScripts, meets, parseRatio, table } from './run.ts';

// `npm run bench` (test/bench/run.ts): which scripts it runs and how it reads their RATIO| lines.

test('every bench:* script of package.json is run, in file order; BENCH_ONLY names a subset', (t) => {
  const scripts = { test: 'ava', bench: 'node run.ts', 'bench:reads': 'a', 'bench:paywall': 'b', 'bench:events': 'c', typecheck: 'tsc' };
  t.deepEqual(benchScripts(scripts, undefined), ['bench:reads', 'bench:paywall', 'bench:events']);
  t.deepEqual(benchScripts(scripts, 'events, reads'), ['bench:reads', 'bench:events']);
  t.deepEqual(benchScripts(scripts, ''), ['bench:reads', 'bench:paywall', 'bench:events']);
  t.deepEqual(benchScripts(scripts, 'nope'), []);
});

test('a RATIO| line becomes a row with its goal checked; other lines are ignored', (t) => {
  const row = parseRatio('reads', 'RATIO|GET /v1/payment-links/{id}|3,400 req/s p99 12 ms|6,500 req/s p99 9 ms|0.52×|≥ 0.5×\n');
  t.deepEqual(row, {
    bench: 'reads',
    path: 'GET /v1/payment-links/{id}',
    gateway: '3,400 req/s p99 12 ms',
    baseline: '6,500 req/s p99 9 ms',
    ratio: '0.52×',
    goal: '≥ 0.5×',
    met: true,
  });
  t.is(parseRatio('x', '  RATIO|not at the start'), undefined);
  t.is(parseRatio('x', 'round 1: plain 4443 req/s'), undefined);
  t.false(meets('0.44×', '≥ 0.5×'));
  t.true(meets('0.7×', '>= 0.7×'));
  t.true(meets('1.8×', '≤ 2×'));
  t.false(meets('2.5×', '<= 2×'));
  t.is(meets('n/a', '≥ 0.5×'), undefined);
});

test('the table has one line per row and says whether each goal is met', (t) => {
  const rows = [
    parseRatio('reads', 'RATIO|GET /v1/payment-links/{id}|900 req/s|2,000 req/s|0.45×|≥ 0.5×')!,
    parseRatio('paywall', 'RATIO|unpaid 402|7,000 req/s|9,000 req/s|0.78×|≥ 0.7×')!,
  ];
  const lines = table(rows).split('\n');
  t.is(lines.length, 4);
  t.regex(lines[0]!, /^\| path +\| gateway +\| baseline +\| ratio +\| goal +\| met\? \|$/);
  t.regex(lines[2]!, /GET \/v1\/payment-links\/\{id\}.*\| NO +\|$/);
  t.regex(lines[3]!, /unpaid 402.*\| yes +\|$/);
});
