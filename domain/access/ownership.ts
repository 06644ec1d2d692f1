import type { ApiKeyRecord, Principal } from './schema.ts';

// docs/architecture.md "Ownership": a key's principal is its owner_wallet when set, otherwise the key itself. What a
// principal creates is stored with its principal string; another principal gets 404 (existence is not disclosed),
// lists hold only the caller's, and an admin key sees its whole network. Written once, here.

/** The caller as the services need it: its network, its principal and whether it is an admin. */
export type Caller = Pick<Principal, 'network' | 'role' | 'owner' | 'ownerWallet'>;

/** "wallet:7Yk…" or "key:01J…" */
export function principalOf(key: Pick<ApiKeyRecord, 'id' | 'ownerWallet'>): string {
  return key.ownerWallet ? `wallet:${key.ownerWallet}` : `key:${key.id}`;
}

/** The owner filter of the caller's reads: undefined (the whole network) for an admin, else its principal. */
export function ownerFilter(caller: Caller): string | undefined {
  return caller.role === 'admin' ? undefined : caller.owner;
}

/** A row owned by `owner` (null: recorded before ownership existed, admin-only) is visible to the caller. */
export function canAccess(caller: Caller, owner: string | null): boolean {
  return caller.role === 'admin' || (owner !== null && owner === caller.owner);
}
