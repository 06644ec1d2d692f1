import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Address } from '../shared/address.ts';

export const ApiKeyRole = z.enum(['user', 'admin']).describe('user, or admin (admin routes need it)');
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
 * principal, the owner of what it creates (docs/architecture.md "Ownership"): `wallet:<owner_wallet>` when the key has one, so keys
 * of one wallet share everything, otherwise `key:<id>`.
 */
export interface Principal {
  keyId: string;
  network: Network;
  role: ApiKeyRole;
  ownerWallet: string | null;
  owner: string;
}

export const ApiKey = z
  .object({
    id: z.string().describe('the key id (ULID)'),
    network: Network,
    prefix: z.string().describe('the key’s first 12 characters, for display'),
    owner_wallet: z.string().nullable().describe('the wallet whose agents the key may edit; null for old rows'),
    label: z.string().nullable().describe('your label; null when none'),
    role: ApiKeyRole,
    disabled: z.boolean().describe('true once disabled: it no longer authenticates'),
    disabled_at: z.string().nullable().describe('ISO 8601 time it was disabled; null while active'),
    created_at: z.string().describe('ISO 8601 creation time'),
    last_used_at: z.string().nullable().describe('ISO 8601 time of its last use; null before one'),
  })
  .describe('An API key, never the key itself (DECISIONS "API keys").');
export type ApiKey = z.infer<typeof ApiKey>;

export const CreateApiKeyInput = z.strictObject({
  network: Network,
  owner_wallet: Address.nullable().describe('the wallet whose agents the key may edit').optional(),
  label: z.string().min(1).max(100).describe('your label').optional(),
  role: ApiKeyRole.default('user'),
});
export type CreateApiKeyInput = z.input<typeof CreateApiKeyInput>;

export const CreatedApiKey = ApiKey.extend({ key: z.string().describe('the full key (svc_test_… or svc_live_…): shown only in this answer') });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;

/** POST /v1/auth/stream-token takes no fields. */
export const StreamTokenInput = z.strictObject({}).optional();
export type StreamTokenInput = z.infer<typeof StreamTokenInput>;

/** A subscription token for a browser: `?token=` on the SSE endpoint or graphql-ws `connectionParams.token`. */
export const StreamToken = z
  .object({
    token: z.string().describe('svc_stream_test_… or svc_stream_live_…: used once, within expires_in seconds'),
    network: Network,
    expires_at: z.string().describe('ISO 8601 expiry time'),
    expires_in: z.number().int().describe('seconds until it expires'),
  })
  .describe('A single-use subscription token standing in for the key.');
export type StreamToken = z.infer<typeof StreamToken>;

/**
 * What a redeemed stream token leaves a connection holding: the key it was issued to, by hash. Only the gateway makes
 * one (an object never comes from a header), and it authenticates like the key itself for as long as the key is valid,
 * so a connection's later operations and the revocation watch keep working after the token is spent.
 */
export interface StreamGrant {
  readonly kind: 'stream_grant';
  readonly keyHash: string;
  readonly network: Network;
}

/** A request's credentials: the Authorization header value, or a redeemed stream token's grant. */
export type Credentials = string | StreamGrant | undefined;
