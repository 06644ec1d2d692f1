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

  /**
   * Every account `programId` owns, read from the state (LiteSVM scans its accounts), the addresses named once;
   * `keep` sees the raw data first, so a filtered scan copies only what it keeps.
   */
  programAccounts(programId: string, keep: (data: Uint8Array) => boolean = () => true): LedgerAccount[] {
    const key = decodeAddress(programId);
    if (!key) return [];
    const out: LedgerAccount[] = [];
    for (const item of this.svm.getProgramAccounts(key)) {
      const a = item.account();
      const data = a.data();
      if (!keep(data)) continue;
      out.push({ address: this.accounts.nameOf(item.address), lamports: a.lamports(), owner: programId, data, executable: a.executable() });
    }
    return out;
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
