import type { LiteSvm } from 'litesvm/dist/internal.js';
import type { LedgerAccount } from '../../../domain/ports/ledger.ts';
import { decodeAddress, encodeBase58 } from '../../../domain/shared/base58.ts';
import { isMintData, isTokenAccountData, readMintDecimals } from '../../../domain/shared/token-account.ts';
import type { AccountIndex } from './account-index.ts';

// Reads of the current state: accounts, balances, a mint's decimals (cached: a mint's decimals never change) and
// the token accounts of an owner (through the account index).

export class LedgerReads {
  private readonly decimals = new Map<string, number>();

  constructor(
    private readonly svm: LiteSvm,
    private readonly accounts: AccountIndex,
  ) {}

  minimumBalanceForRentExemption(dataLength: number): bigint {
    return this.svm.minimumBalanceForRentExemption(BigInt(dataLength));
  }

  readAccount(address: string): LedgerAccount | null {
    const key = decodeAddress(address);
    if (!key) return null;
    const a = this.svm.getAccount(key);
    if (a === null) return null;
    return { address, lamports: a.lamports(), owner: this.accounts.nameOf(a.owner()), data: a.data(), executable: a.executable() };
  }

  balance(address: string): bigint {
    const key = decodeAddress(address);
    return (key && this.svm.getBalance(key)) ?? 0n;
  }

  decimalsOf(mint: string): number | undefined {
    let d = this.decimals.get(mint);
    if (d === undefined) {
      const account = this.readAccount(mint);
      if (!account || !isMintData(account.owner, account.data)) return undefined;
      d = readMintDecimals(account.data);
      this.decimals.set(mint, d);
    }
    return d;
  }

  /** Token accounts of `owner`, optionally of one mint or one token program, read from the state. */
  tokenAccountsOf(owner: string, filter: { mint?: string | undefined; programId?: string | undefined } = {}): LedgerAccount[] {
    const out: LedgerAccount[] = [];
    for (const address of this.accounts.tokenAccountsOwnedBy(owner) ?? []) {
      const account = this.readAccount(address);
      if (!account || !isTokenAccountData(account.owner, account.data)) continue;
      if (filter.programId && account.owner !== filter.programId) continue;
      if (filter.mint && encodeBase58(account.data.subarray(0, 32)) !== filter.mint) continue;
      out.push(account);
    }
    return out.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  }
}
