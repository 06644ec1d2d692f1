import { z } from 'zod';
import { Network } from '../shared/network.ts';
import { Address } from '../shared/address.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';
import { ApiKey, ApiKeyRole, CreatedApiKey } from '../access/schema.ts';

/** hosted-api §4.8: POST /v1/admin/api-keys requires owner_wallet. */
export const AdminCreateApiKeyInput = z.strictObject({
  network: Network.optional().describe('the key’s network; default the admin key’s own (its prefix fixes it, hosted-api §5.2)'),
  owner_wallet: Address,
  label: z.string().min(1).max(100).optional(),
  role: ApiKeyRole.optional(),
});
export type AdminCreateApiKeyInput = z.input<typeof AdminCreateApiKeyInput>;

export const ListApiKeysInput = z.object({
  owner_wallet: Address.optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type ListApiKeysInput = z.input<typeof ListApiKeysInput>;

export const ApiKeyIdInput = z.object({ id: z.string().min(1).max(64) });

export const ApiKeyList = listEnvelope(ApiKey);
export { ApiKey, CreatedApiKey };
