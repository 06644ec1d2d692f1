import { ApiKey, ApiKeyIdInput, ApiKeyList, AdminCreateApiKeyInput, CreatedApiKey, ListApiKeysInput } from '../../../domain/admin/schema.ts';
import { adminProcedure, router } from '../init.ts';

const tags = ['admin'];

export const adminRouter = router({
  createApiKey: adminProcedure
    .meta({
      status: 201,
      secretFields: ['key'],
      openapi: {
        method: 'POST',
        path: '/v1/admin/api-keys',
        tags,
        summary: 'Issue an API key (shown once)',
        description:
          'A new svc_test_/svc_live_ key for owner_wallet on this network; the full key is in this answer only, the gateway keeps its SHA-256 (DECISIONS "API keys"). Admin only.',
      },
    })
    .input(AdminCreateApiKeyInput)
    .output(CreatedApiKey)
    .mutation(({ ctx, input }) => ctx.services.admin.createKey(ctx.principal, input)),

  listApiKeys: adminProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/v1/admin/api-keys',
        tags,
        summary: 'List API keys of this network',
        description: 'The keys of this network (prefix, owner, role, state; never the key), optionally of one owner_wallet. Admin only.',
      },
    })
    .input(ListApiKeysInput)
    .output(ApiKeyList)
    .query(({ ctx, input }) => ctx.services.admin.listKeys(ctx.principal, input)),

  disableApiKey: adminProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/admin/api-keys/{id}/disable',
        tags,
        summary: 'Disable an API key',
        description: 'The key stops authenticating at once (401 invalid_api_key). Admin only.',
      },
    })
    .input(ApiKeyIdInput)
    .output(ApiKey)
    .mutation(({ ctx, input }) => ctx.services.admin.disableKey(ctx.principal, input.id)),
});
