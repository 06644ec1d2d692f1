import { createTRPCClient, httpBatchLink, TRPCClientError } from '@trpc/client';
import type { AppRouter } from '../trpc/router.ts';

export type { AppRouter };
export {
  createPayingFetch,
  decodePaymentResponse,
  PaymentError,
  PAYING_FETCH_ERRORS,
  type KitTransactionSigner,
  type PayingFetchErrorCode,
  type PayingFetchOptions,
  type PaymentSigner,
  type TransactionSigner,
} from './paying-fetch.ts';

export interface ClientOptions {
  /** gateway base URL, e.g. "http://localhost:8080" (the client talks to `${url}/trpc`) */
  url: string;
  /** svc_test_… or svc_live_… */
  apiKey: string;
  fetch?: typeof fetch;
}

/**
 * Typed tRPC client for TypeScript frontends:
 * `const svc = createClient({ url, apiKey }); await svc.paymentLinks.create.mutate({...})`.
 * Errors are TRPCClientError; branch on `errorCode(err)` (the snake_case code of the API).
 */
export function createClient(options: ClientOptions) {
  return createTRPCClient<AppRouter>({
    links: [
      httpBatchLink({
        url: `${options.url.replace(/\/+$/, '')}/trpc`,
        headers: () => ({ authorization: `Bearer ${options.apiKey}` }),
        ...(options.fetch ? { fetch: options.fetch } : {}),
      }),
    ],
  });
}

export type Client = ReturnType<typeof createClient>;

/** The API's snake_case error code of a failed call, e.g. "payment_link_not_found"; undefined otherwise. */
export function errorCode(err: unknown): string | undefined {
  if (err instanceof TRPCClientError) {
    const data = err.data as { code?: unknown } | undefined;
    return typeof data?.code === 'string' ? data.code : undefined;
  }
  return undefined;
}
