import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Address } from '../shared/address.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';
import { ApiKey, ApiKeyRole, CreatedApiKey } from '../access/schema.ts';

/** hosted-api §4.8: POST /v1/admin/api-keys requires owner_wallet. */
export const AdminCreateApiKeyInput = z
  .strictObject({
    network: Network.describe('the key’s network; default the admin key’s own (its prefix fixes it, hosted-api §5.2)').optional(),
    owner_wallet: Address.describe('the wallet whose agents the key may edit (DECISIONS "API keys")'),
    label: z.string().min(1).max(100).describe('your label').optional(),
    role: ApiKeyRole.optional(),
  })
  .describe('A new API key.');
export type AdminCreateApiKeyInput = z.input<typeof AdminCreateApiKeyInput>;

export const ListApiKeysInput = z.object({
  owner_wallet: Address.describe('only keys of this wallet').optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type ListApiKeysInput = z.input<typeof ListApiKeysInput>;

export const ApiKeyIdInput = z.object({ id: z.string().min(1).max(64).describe('the key id') });

export const ApiKeyList = listEnvelope(ApiKey);
export { ApiKey, CreatedApiKey };
