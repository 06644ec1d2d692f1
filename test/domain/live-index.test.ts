import test from 'ava';
import { LiveIndex, type LiveFilter } from '../../domain/events/live.ts';
import type { EventRecord } from '../../domain/events/schema.ts';

// The live index: an event reaches exactly the watchers whose scope and filters match it, each once,
// found by (network, owner) and exact kind; only wildcard watchers of the event's scope are tested.

function event(fields: Partial<EventRecord>): EventRecord {
  return { kind: 'payment_link.created', network: 'chain-devnet', owner: 'key:A', agentAsset: null, ...fields } as EventRecord;
}

function watchers(index: LiveIndex, filters: Record<string, LiveFilter>) {
  const got: Record<string, number> = {};
  const remove: Record<string, () => void> = {};
  for (const [name, filter] of Object.entries(filters)) {
    got[name] = 0;
    remove[name] = index.add(filter, () => got[name]!++);
  }
  return { got, remove };
}

test('an event reaches exactly the watchers of its scope, kind and agent, once each', (t) => {
  const index = new LiveIndex();
  const { got } = watchers(index, {
    aAll: { network: 'chain-devnet', owner: 'key:A' },
    aCreated: { network: 'chain-devnet', owner: 'key:A', kinds: ['payment_link.created'] },
    aTwoKinds: { network: 'chain-devnet', owner: 'key:A', kinds: ['payment_link.created', 'payment_link.deleted', 'payment_link.created'] },
    aWildcard: { network: 'chain-devnet', owner: 'key:A', kinds: ['payment_link.*'] },
    aMixed: { network: 'chain-devnet', owner: 'key:A', kinds: ['receipt.*', 'payment_link.created'] },
    aOtherKind: { network: 'chain-devnet', owner: 'key:A', kinds: ['receipt.published'] },
    aAgent: { network: 'chain-devnet', owner: 'key:A', agent: 'M1' },
    aOtherAgent: { network: 'chain-devnet', owner: 'key:A', kinds: ['payment_link.created'], agent: 'M2' },
    b: { network: 'chain-devnet', owner: 'key:B' },
    admin: { network: 'chain-devnet', owner: undefined },
    adminKind: { network: 'chain-devnet', owner: undefined, kinds: ['payment_link.created'] },
    mainnet: { network: 'chain-mainnet', owner: 'key:A' },
    mainnetAdmin: { network: 'chain-mainnet', owner: undefined },
  });
  index.dispatch(event({ agentAsset: 'M1' }));
  t.deepEqual(got, {
    aAll: 1,
    aCreated: 1,
    aTwoKinds: 1,
    aWildcard: 1,
    aMixed: 1,
    aOtherKind: 0,
    aAgent: 1,
    aOtherAgent: 0,
    b: 0,
    admin: 1,
    adminKind: 1,
    mainnet: 0,
    mainnetAdmin: 0,
  });
});

test('an event without an owner reaches only the admin watchers of its network', (t) => {
  const index = new LiveIndex();
  const { got } = watchers(index, {
    a: { network: 'chain-devnet', owner: 'key:A' },
    admin: { network: 'chain-devnet', owner: undefined },
  });
  index.dispatch(event({ owner: null }));
  t.deepEqual(got, { a: 0, admin: 1 });
});

test('a removed watcher gets nothing more; removing twice is harmless; the index empties', (t) => {
  const index = new LiveIndex();
  const { got, remove } = watchers(index, {
    exact: { network: 'chain-devnet', owner: 'key:A', kinds: ['payment_link.created', 'payment_link.deleted'] },
    wildcard: { network: 'chain-devnet', owner: 'key:A', kinds: ['payment_link.*'] },
    admin: { network: 'chain-devnet', owner: undefined },
  });
  t.is(index.size, 3);
  index.dispatch(event({}));
  remove.exact!();
  remove.exact!();
  remove.wildcard!();
  index.dispatch(event({ kind: 'payment_link.deleted' }));
  t.deepEqual(got, { exact: 1, wildcard: 1, admin: 2 });
  remove.admin!();
  t.is(index.size, 0);
  index.dispatch(event({}));
  t.deepEqual(got, { exact: 1, wildcard: 1, admin: 2 });
});

test('a watcher removed while an event is dispatched does not get it twice or break the others', (t) => {
  const index = new LiveIndex();
  const seen: string[] = [];
  let removeFirst = () => {};
  removeFirst = index.add({ network: 'chain-devnet', owner: 'key:A' }, () => {
    seen.push('first');
    removeFirst();
  });
  index.add({ network: 'chain-devnet', owner: 'key:A' }, () => seen.push('second'));
  index.dispatch(event({}));
  index.dispatch(event({}));
  t.deepEqual(seen, ['first', 'second', 'second']);
});
