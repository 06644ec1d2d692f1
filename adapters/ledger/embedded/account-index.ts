import type { LiteSvm } from 'litesvm/dist/internal.js';
import { decodeBase58, encodeBase58 } from '../../../domain/shared/base58.ts';
import { TOKEN_LAMPORTS_STABLE, UNSTABLE } from './ledger-messages.ts';
import { SYSTEM_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from './token.ts';
import { isTokenAccountData, isTokenProgram, readTokenAmount } from '../../../domain/shared/token-account.ts';

// The embedded ledger's view of accounts for the hot path: the base58 name of every 32-byte key (computed once),
// what a transaction needs to know of each account before it runs (lamports, owner, token mint/owner/amount), kept
// in step with LiteSVM by the ledger after every transaction, and the token accounts of each owner.

export interface TokenInfo {
  /** the account's first 64 data bytes: mint and owner */
  raw: Buffer;
  mint: string;
  owner: string;
  amount: bigint;
  program: string;
}

/** What the hot path needs to know of an account before a transaction: kept in step with LiteSVM by send. */
export interface Known {
  lamports: bigint;
  /** null: the account does not exist */
  owner: string | null;
  executable: boolean;
  token: TokenInfo | null;
}

function sameFirst64(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < 64; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Buffer's own latin1 slice (what toString('latin1') calls after checking its arguments) */
export type LatinBuffer = Buffer & { latin1Slice(start: number, end: number): string };

const NOT_FOUND: Known = { lamports: 0n, owner: null, executable: false, token: null };

export class AccountIndex {
  /** latin1 of 32 key bytes → its base58 name and a copy of the bytes (for LiteSVM calls, without a view per use) */
  private readonly names = new Map<string, { name: string; key: Buffer }>();
  private readonly known = new Map<string, Known>();
  private readonly tokenAccountsByOwner = new Map<string, Set<string>>();

  constructor(private readonly svm: LiteSvm) {}

  nameAt(bytes: Buffer, offset: number): string {
    return this.keyEntry(bytes, offset).name;
  }

  keyEntry(bytes: Buffer, offset: number): { name: string; key: Buffer } {
    const raw = (bytes as LatinBuffer).latin1Slice(offset, offset + 32);
    let entry = this.names.get(raw);
    if (entry === undefined) {
      const key = Buffer.from(bytes.subarray(offset, offset + 32));
      entry = { name: encodeBase58(key), key };
      this.names.set(raw, entry);
    }
    return entry;
  }

  nameOf(bytes: Uint8Array): string {
    const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return this.nameAt(b, 0);
  }

  readKnown(key: Uint8Array): Known {
    const a = this.svm.getAccount(key);
    if (a === null) return NOT_FOUND;
    const lamports = a.lamports();
    if (a.executable()) return { lamports, owner: null, executable: true, token: null };
    const owner = this.nameOf(a.owner());
    let token: TokenInfo | null = null;
    if (isTokenProgram(owner)) {
      const data = a.data();
      if (isTokenAccountData(owner, data)) {
        const b = Buffer.from(data.buffer, data.byteOffset, 64);
        token = { raw: b, mint: this.nameAt(b, 0), owner: this.nameAt(b, 32), amount: readTokenAmount(data), program: owner };
      }
    }
    return { lamports, owner, executable: false, token };
  }

  /**
   * State after a transaction, read cheaply where the transaction cannot have changed an account's kind: a token
   * account keeps its owner program (only its data and lamports are read), and a signing wallet keeps its owner
   * when no instruction could reassign it (only its balance is read).
   */
  readPost(key: Uint8Array, before: Known, signer: boolean, stable: number): Known {
    if (stable !== UNSTABLE && before.token) {
      const a = this.svm.getAccount(key);
      if (a === null) return NOT_FOUND;
      const data = a.data();
      if (data.length >= 72 && sameFirst64(before.token.raw, data)) {
        const lamports = stable === TOKEN_LAMPORTS_STABLE ? before.lamports : a.lamports();
        return {
          lamports,
          owner: before.owner,
          executable: false,
          token: { raw: before.token.raw, mint: before.token.mint, owner: before.token.owner, amount: readTokenAmount(data), program: before.token.program },
        };
      }
    } else if (stable !== UNSTABLE && signer && before.owner === SYSTEM_PROGRAM_ID) {
      const lamports = this.svm.getBalance(key);
      return lamports === null ? NOT_FOUND : { lamports, owner: SYSTEM_PROGRAM_ID, executable: false, token: null };
    }
    return this.readKnown(key);
  }

  knownOf(name: string, key: Uint8Array): Known {
    let k = this.known.get(name);
    if (k === undefined) {
      k = this.readKnown(key);
      this.remember(name, k);
    }
    return k;
  }

  remember(name: string, k: Known): void {
    const before = this.known.get(name);
    if (before?.token && (!k.token || k.token.owner !== before.token.owner)) this.tokenAccountsByOwner.get(before.token.owner)?.delete(name);
    if (k.token && (!before?.token || before.token.owner !== k.token.owner)) {
      let set = this.tokenAccountsByOwner.get(k.token.owner);
      if (!set) {
        set = new Set();
        this.tokenAccountsByOwner.set(k.token.owner, set);
      }
      set.add(name);
    }
    this.known.set(name, k);
  }

  /** Token accounts already in the state (after a restart) for getTokenBalances. */
  indexTokenAccounts(): void {
    for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]) {
      for (const item of this.svm.getProgramAccounts(decodeBase58(program)!)) {
        const name = this.nameOf(item.address);
        if (!this.known.has(name)) this.remember(name, this.readKnown(item.address));
      }
    }
  }

  /** what is known of an account, if anything yet (the hot path's first look) */
  cached(name: string): Known | undefined {
    return this.known.get(name);
  }

  /** an account changed outside a transaction (genesis, restore): read it again when next needed */
  forget(name: string): void {
    this.known.delete(name);
  }

  /** the state was replaced: forget every account (names stay valid) */
  clear(): void {
    this.known.clear();
    this.tokenAccountsByOwner.clear();
  }

  /** addresses of the token accounts `owner` has held (read each to check it still is one) */
  tokenAccountsOwnedBy(owner: string): Iterable<string> {
    return this.tokenAccountsByOwner.get(owner) ?? [];
  }
}
