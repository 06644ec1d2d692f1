import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Address } from '../shared/address.ts';

export const ApiKeyRole = z.enum(['user', 'admin']);
export type ApiKeyRole = z.infer<typeof ApiKeyRole>;

/** DECISIONS "API keys": the stored row, never the key itself. */
export interface ApiKeyRecord {
  id: string;
  network: Network;
  prefix: string;
  keyHash: string;
  ownerWallet: string | null;
  label: string | null;
  role: ApiKeyRole;
  disabledAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/**
 * Who is calling: resolved once per request (and once per subscription) from the bearer key. `owner` is the key's
 * principal, the owner of what it creates (README "Ownership"): `wallet:<owner_wallet>` when the key has one, so keys
 * of one wallet share everything, otherwise `key:<id>`.
 */
export interface Principal {
  keyId: string;
  network: Network;
  role: ApiKeyRole;
  ownerWallet: string | null;
  owner: string;
}

export const ApiKey = z.object({
  id: z.string(),
  network: Network,
  prefix: z.string(),
  owner_wallet: z.string().nullable(),
  label: z.string().nullable(),
  role: ApiKeyRole,
  disabled: z.boolean(),
  disabled_at: z.string().nullable(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
});
export type ApiKey = z.infer<typeof ApiKey>;

export const CreateApiKeyInput = z.strictObject({
  network: Network,
  owner_wallet: Address.nullable().optional(),
  label: z.string().min(1).max(100).optional(),
  role: ApiKeyRole.default('user'),
});
export type CreateApiKeyInput = z.input<typeof CreateApiKeyInput>;

export const CreatedApiKey = ApiKey.extend({ key: z.string() });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;
