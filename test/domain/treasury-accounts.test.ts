import test from 'ava';
import { Keypair } from '@solana/web3.js';
import { TreasuryAccounts } from '../../domain/treasury/accounts.ts';
import type { Facilitator } from '../../domain/ports/facilitator.ts';
import { DomainError } from '../../domain/shared/errors.ts';

// TreasuryAccounts runs after the agent or link is committed: whatever the facilitator does, it answers "not ready"
// with a reason and a warning, never an error that would turn a stored link into a 500. Fault-injecting facilitators
// only (the real adapters are held to the port by test/adapters/facilitator-contract.ts).

const never = () => Promise.reject(new Error('not used'));
function facilitatorWith(prepareAccounts: Facilitator['prepareAccounts']): Facilitator {
  return { supported: never, health: never, verify: never, settle: never, prepareAccounts, mppSettle: never, cosign: never };
}

for (const [title, error] of [
  [
    'unreachable (facilitator_unavailable)',
    new DomainError('facilitator_unavailable', 'The facilitator at http://f could not be asked (/accounts): answered 404'),
  ],
  ['a fault that is not a DomainError', new TypeError('boom')],
] as const) {
  test(`a facilitator that throws — ${title} — gives ready: false, facilitator_unavailable, and a warning`, async (t) => {
    const warnings: Record<string, unknown>[] = [];
    const accounts = new TreasuryAccounts({ facilitator: facilitatorWith(() => Promise.reject(error)), onWarning: (_m, c) => warnings.push(c) });
    const ready = await accounts.ensure('chain-mainnet', Keypair.generate().publicKey.toBase58());
    t.deepEqual([...ready.keys()], ['USDC', 'USDT', 'USDG'], 'every curated stable of the network by default');
    for (const r of ready.values()) t.like(r, { ready: false, reason: 'facilitator_unavailable' });
    t.is(warnings.length, 1);
  });
}

test('an answer missing an asset is not ready; a refused one keeps the facilitator’s reason', async (t) => {
  const usdc = 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v';
  const accounts = new TreasuryAccounts({
    facilitator: facilitatorWith(async (request) => ({
      network: request.network,
      owner: request.owner,
      accounts: [{ asset: usdc, account: null, ready: false, reason: 'ata_creation_not_sponsored', message: 'budget spent' }],
    })),
  });
  const ready = await accounts.ensure('chain-mainnet', Keypair.generate().publicKey.toBase58(), ['USDC', 'USDT']);
  t.deepEqual(ready.get('USDC'), { ready: false, reason: 'ata_creation_not_sponsored', message: 'budget spent' });
  t.like(ready.get('USDT'), { ready: false, reason: 'facilitator_unavailable' });
});
