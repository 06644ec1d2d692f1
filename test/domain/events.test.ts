import test from 'ava';
import { matchesKind, parseKinds } from '../../domain/events/service.ts';
import { DomainError } from '../../domain/shared/errors.ts';

test('parseKinds splits, trims and keeps the patterns', (t) => {
  t.is(parseKinds(undefined), undefined);
  t.deepEqual(parseKinds('payment_link.*'), ['payment_link.*']);
  t.deepEqual(parseKinds('payment_link.created'), ['payment_link.created']);
  t.deepEqual(parseKinds(' payment_link.* , receipt.published '), ['payment_link.*', 'receipt.published']);
  t.deepEqual(parseKinds(['agent.treasury.*', 'receipt.pulled']), ['agent.treasury.*', 'receipt.pulled']);
  t.deepEqual(parseKinds('a,,b'), ['a', 'b']);
});

test('parseKinds: no pattern or * means every kind', (t) => {
  t.is(parseKinds(''), undefined);
  t.is(parseKinds(' , ,'), undefined);
  t.is(parseKinds([]), undefined);
  t.is(parseKinds('*'), undefined);
  t.is(parseKinds('payment_link.*,*'), undefined);
});

test('parseKinds refuses malformed patterns with invalid_request issues', (t) => {
  for (const bad of ['Payment_Link.created', 'payment link', '*.created', 'payment_link.*.*', 'payment_link.', '.created', 'a.*b', '%', 'payment_link.%']) {
    const error = t.throws(() => parseKinds(bad), { instanceOf: DomainError }, bad);
    t.is(error?.code, 'invalid_request');
    const issues = (error!.details as { issues: { path: string; message: string; code: string }[] }).issues;
    t.is(issues[0]?.path, 'kind');
  }
  const fromArray = t.throws(() => parseKinds(['ok.kind', 'NOT OK'], 'events'), { instanceOf: DomainError });
  t.is((fromArray!.details as { issues: { path: string }[] }).issues[0]?.path, 'events.1');
  const custom = t.throws(() => parseKinds('BAD', 'filter.kind'), { instanceOf: DomainError });
  t.is((custom!.details as { issues: { path: string }[] }).issues[0]?.path, 'filter.kind');
});

test('matchesKind: exact kinds and dotted prefixes', (t) => {
  t.true(matchesKind('payment_link.created', undefined));
  t.true(matchesKind('payment_link.created', ['payment_link.created']));
  t.false(matchesKind('payment_link.updated', ['payment_link.created']));
  t.true(matchesKind('payment_link.created', ['payment_link.*']));
  t.true(matchesKind('payment_link.deleted', ['receipt.published', 'payment_link.*']));
  t.true(matchesKind('agent.treasury.withdraw_sol', ['agent.*']));
  t.true(matchesKind('agent.treasury.withdraw_sol', ['agent.treasury.*']));
  t.false(matchesKind('agent.treasury.withdraw_sol', ['agent.treasury.withdraw']));
  // The wildcard stops at a dot: no partial-segment matches.
  t.false(matchesKind('payment_link', ['payment_link.*']));
  t.false(matchesKind('payment_links.created', ['payment_link.*']));
  t.false(matchesKind('receipt.published', ['payment_link.*']));
  t.false(matchesKind('payment_link.created', []));
});

test('parseKinds output drives matchesKind', (t) => {
  const patterns = parseKinds('payment_link.*, receipt.published');
  t.true(matchesKind('payment_link.settled', patterns));
  t.true(matchesKind('receipt.published', patterns));
  t.false(matchesKind('receipt.pulled', patterns));
  t.true(matchesKind('anything.at.all', parseKinds('*')));
});
