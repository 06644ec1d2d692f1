import type { z } from 'zod';
import { DomainError } from '../../domain/shared/errors.ts';
import type { Facilitator } from '../../domain/ports/facilitator.ts';
import {
  CosignResponse,
  FacilitatorHealth,
  SettleResponse,
  SupportedResponse,
  VerifyResponse,
  type FacilitatorRequest,
} from '../../domain/facilitator/wire.ts';
import { MppSettleResponse, type MppSettleRequest } from '../../domain/facilitator/mpp.ts';
import { PrepareAccountsResponse, type PrepareAccountsRequest } from '../../domain/treasury/accounts.ts';

// The Facilitator port over the x402 facilitator HTTP API (any x402 v2 facilitator: ours at {gateway}/facilitator or
// `npm run facilitator`, or another one). Every answer is held to the wire schemas. The throw rules are the port's:
// a facilitator that cannot be asked → facilitator_unavailable; a settle whose outcome is unknown (the body may have
// reached the facilitator) → payment_pending with { signature: null }, because the payment may still land.

export interface HttpFacilitatorOptions {
  /** base URL, e.g. "http://localhost:8080/facilitator"; the routes are {url}/verify, /settle, /supported, /health */
  url: string;
  /** verify, supported, health; default 10 000 */
  timeoutMs?: number;
  /** settle waits for confirmation on the facilitator's side; default 60 000 */
  settleTimeoutMs?: number;
  /** injected for fault tests; default the global fetch */
  fetch?: typeof fetch;
  /** SVC_FACILITATOR_ACCOUNTS_SECRET: the bearer POST /accounts requires (it spends the facilitator's rent) */
  token?: string | undefined;
}

/** Failures where nothing reached the facilitator: connection refused, name not resolved, no route, TLS refused. */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_NONAME',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_INVALID_URL',
]);

const MAX_MESSAGE = 300;

export class HttpFacilitator implements Facilitator {
  readonly #base: string;
  readonly #timeoutMs: number;
  readonly #settleTimeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #token: string | undefined;

  constructor(options: HttpFacilitatorOptions) {
    this.#token = options.token;
    this.#base = options.url.replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#settleTimeoutMs = options.settleTimeoutMs ?? 60_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  supported(): Promise<SupportedResponse> {
    return this.#ask({ method: 'GET', path: '/supported' }, SupportedResponse);
  }

  health(): Promise<FacilitatorHealth> {
    return this.#ask({ method: 'GET', path: '/health' }, FacilitatorHealth);
  }

  verify(request: FacilitatorRequest): Promise<VerifyResponse> {
    return this.#ask({ method: 'POST', path: '/verify', body: request }, VerifyResponse);
  }

  /** Co-signing sends nothing: a lost answer is asked again, so every failure is facilitator_unavailable. */
  cosign(request: FacilitatorRequest): Promise<CosignResponse> {
    return this.#ask({ method: 'POST', path: '/cosign', body: request }, CosignResponse);
  }

  /** Creating an account is idempotent on the ledger: a lost answer is asked again, so every failure is facilitator_unavailable. */
  prepareAccounts(request: PrepareAccountsRequest): Promise<PrepareAccountsResponse> {
    return this.#ask({ method: 'POST', path: '/accounts', body: request, timeoutMs: this.#settleTimeoutMs }, PrepareAccountsResponse);
  }

  /**
   * Refused before sending (connection refused, DNS) or refused by the facilitator with a 4xx: nothing was settled →
   * facilitator_unavailable. Timed out, connection lost after sending, a 5xx or an answer that is not a settle
   * response: the facilitator may have broadcast the transaction → payment_pending (settle again to learn the outcome).
   */
  settle(request: FacilitatorRequest): Promise<SettleResponse> {
    return this.#settleAt('/settle', request, SettleResponse);
  }

  /** POST /mpp/settle under the same rules as settle (an unknown outcome is payment_pending). */
  mppSettle(request: MppSettleRequest): Promise<MppSettleResponse> {
    return this.#settleAt('/mpp/settle', request, MppSettleResponse);
  }

  async #settleAt<S extends z.ZodType>(path: string, request: unknown, schema: S): Promise<z.output<S>> {
    let res: Response;
    let text: string;
    try {
      res = await this.#send('POST', path, request, this.#settleTimeoutMs);
      text = await res.text();
    } catch (e) {
      if (notSent(e)) throw this.#unavailable(path, describe(e));
      throw pending(`the facilitator did not answer the settle (${describe(e)})`);
    }
    if (res.status >= 400 && res.status < 500) throw this.#unavailable(path, `answered ${res.status}: ${refusal(text)}`);
    if (!res.ok) throw pending(`the facilitator answered the settle with ${res.status}: ${refusal(text)}`);
    const parsed = schema.safeParse(parseJson(text));
    if (!parsed.success) throw pending('the facilitator answered the settle with something that is not a settle response');
    return parsed.data;
  }

  async #ask<S extends z.ZodType>(request: { method: 'GET' | 'POST'; path: string; body?: unknown; timeoutMs?: number }, schema: S): Promise<z.output<S>> {
    const { method, path, body, timeoutMs = this.#timeoutMs } = request;
    let res: Response;
    let text: string;
    try {
      res = await this.#send(method, path, body, timeoutMs);
      text = await res.text();
    } catch (e) {
      throw this.#unavailable(path, describe(e));
    }
    if (!res.ok) throw this.#unavailable(path, `answered ${res.status}: ${refusal(text)}`);
    const parsed = schema.safeParse(parseJson(text));
    if (!parsed.success) throw this.#unavailable(path, `answered something that is not a ${path.slice(1)} response`);
    return parsed.data;
  }

  #send(method: 'GET' | 'POST', path: string, body: unknown, timeoutMs: number): Promise<Response> {
    const headers: Record<string, string> =
      body === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json' };
    if ((path === '/accounts' || path === '/cosign') && this.#token) headers.authorization = `Bearer ${this.#token}`;
    return this.#fetch(`${this.#base}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  }

  #unavailable(path: string, why: string): DomainError {
    return new DomainError('facilitator_unavailable', `The facilitator at ${this.#base} could not be asked (${path}): ${why}`);
  }
}

function pending(why: string): DomainError {
  return new DomainError('payment_pending', `The payment may still land: ${why}. Send the same payment again to learn its outcome.`, { signature: null });
}

/** fetch's own failures carry the socket error as `cause` ("fetch failed" alone says nothing). */
function codeOf(e: unknown): string | undefined {
  const cause = (e as { cause?: { code?: unknown } } | null)?.cause;
  return typeof cause?.code === 'string' ? cause.code : undefined;
}

function notSent(e: unknown): boolean {
  const code = codeOf(e);
  if (code) return NOT_SENT.has(code) || /^(ERR_TLS_|CERT_|DEPTH_ZERO|UNABLE_TO_VERIFY|SELF_SIGNED)/.test(code);
  // undici refuses some URLs (a blocked port) before connecting, with a bare cause and no code.
  return e instanceof TypeError && (e as { cause?: { message?: unknown } }).cause?.message === 'bad port';
}

function describe(e: unknown): string {
  const name = (e as { name?: unknown } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return 'no answer in time';
  const cause = (e as { cause?: { message?: unknown } } | null)?.cause;
  if (typeof cause?.message === 'string') return cause.message;
  return e instanceof Error ? e.message : String(e);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The facilitator's own words: our REST envelope `{ error, message }`, an x402 `{ error }` or `{ errorMessage }`, else the text. */
function refusal(text: string): string {
  const body = parseJson(text) as { error?: unknown; message?: unknown; errorMessage?: unknown; invalidMessage?: unknown } | undefined;
  const parts = [body?.error, body?.message ?? body?.errorMessage ?? body?.invalidMessage].filter((p): p is string => typeof p === 'string' && p !== '');
  const message = parts.length ? parts.join(': ') : text.trim() || '(empty body)';
  return message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
}
