import test from 'ava';
import { ledgerContract } from './ledger-contract.ts';
import { ledgerDir, openTestLedger, removeDir } from '../support/ledger.ts';

ledgerContract(test, 'embedded', async () => {
  const dir = await ledgerDir();
  const ledger = await openTestLedger({ dir });
  return {
    ledger,
    airdrop: async (to, lamports) => void ledger.airdrop(to, lamports),
    mintUsdc: async (owner, amount) => void ledger.mintTo(owner, '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU', amount),
    advance: async (slots) => ledger.advance(slots),
    close: async () => {
      await ledger.close();
      await removeDir(dir);
    },
  };
});
