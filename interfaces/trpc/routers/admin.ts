import { ApiKey, ApiKeyIdInput, ApiKeyList, AdminCreateApiKeyInput, CreatedApiKey, ListApiKeysInput } from '../../../domain/admin/schema.ts';
import { adminProcedure, router } from '../init.ts';

const tags = ['admin'];

export const adminRouter = router({
  createApiKey: adminProcedure
    .meta({ status: 201, secretFields: ['key'], openapi: { method: 'POST', path: '/v1/admin/api-keys', tags, summary: 'Issue an API key (shown once)' } })
    .input(AdminCreateApiKeyInput)
    .output(CreatedApiKey)
    .mutation(({ ctx, input }) => ctx.services.admin.createKey(ctx.principal, input)),

  listApiKeys: adminProcedure
    .meta({ openapi: { method: 'GET', path: '/v1/admin/api-keys', tags, summary: 'List API keys of this network' } })
    .input(ListApiKeysInput)
    .output(ApiKeyList)
    .query(({ ctx, input }) => ctx.services.admin.listKeys(ctx.principal, input)),

  disableApiKey: adminProcedure
    .meta({ openapi: { method: 'POST', path: '/v1/admin/api-keys/{id}/disable', tags, summary: 'Disable an API key' } })
    .input(ApiKeyIdInput)
    .output(ApiKey)
    .mutation(({ ctx, input }) => ctx.services.admin.disableKey(ctx.principal, input.id)),
});
