import { createTRPCClient, httpBatchLink, TRPCClientError, type TRPCClient } from '@trpc/client';
import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import type { AppRouter } from '../trpc/router.ts';

// svc-gateway/client: the typed tRPC client, safe in a browser (no node:* module, no web3.js in its import graph;
// test/interfaces/client-package.test.ts bundles it for the browser). The buyer kit is svc-gateway/client/pay
// (paying-fetch.ts), webhook verification for receivers svc-gateway/client/webhooks (webhooks.ts).

export type { AppRouter };
/** Every procedure's input, e.g. `RouterInputs['paymentLinks']['create']`. */
export type RouterInputs = inferRouterInputs<AppRouter>;
/** Every procedure's output, e.g. `RouterOutputs['paymentLinks']['get']`. */
export type RouterOutputs = inferRouterOutputs<AppRouter>;

export interface ClientOptions {
  /** gateway base URL, e.g. "http://localhost:8080" (the client talks to `${url}/trpc`) */
  url: string;
  /** svc_test_… or svc_live_…; without one, only the public procedures answer (the others: 401 missing_api_key) */
  apiKey?: string | undefined;
  fetch?: typeof fetch;
}

/**
 * Typed tRPC client for TypeScript frontends:
 * `const svc = createClient({ url, apiKey }); await svc.paymentLinks.create.mutate({...})`.
 * Errors are TRPCClientError; branch on `errorCode(err)` (the snake_case code of the API).
 */
export function createClient(options: ClientOptions): TRPCClient<AppRouter> {
  return createTRPCClient<AppRouter>({
    links: [
      httpBatchLink({
        url: `${options.url.replace(/\/+$/, '')}/trpc`,
        headers: (): Record<string, string> => (options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      }),
    ],
  });
}

export type Client = TRPCClient<AppRouter>;

/** The API's snake_case error code of a failed call, e.g. "payment_link_not_found"; undefined otherwise. */
export function errorCode(err: unknown): string | undefined {
  if (err instanceof TRPCClientError) {
    const data = err.data as { code?: unknown } | undefined;
    return typeof data?.code === 'string' ? data.code : undefined;
  }
  return undefined;
}
