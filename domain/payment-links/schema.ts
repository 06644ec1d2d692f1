import { z } from 'zod';
import { Network, StableSymbol } from '../shared/network.ts';
import { Address } from '../shared/address.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';

export const HttpMethod = z
  .enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'])
  .describe('the HTTP method buyers must use on the paywall URL; another answers 405 (hosted-api §4.2)');
export type HttpMethod = z.infer<typeof HttpMethod>;
export const Protocol = z.enum(['x402', 'mpp']).describe('the paywall rail: x402 (PAYMENT-REQUIRED header) or mpp (problem+json challenge); default x402');
export const SettlePolicy = z
  .enum(['before_forward', 'on_success'])
  .describe(
    'before_forward (default): settle, then forward; on_success: settle only when the upstream answered 2xx, else the buyer pays nothing (DECISIONS "Payment links")',
  );

/** "30s", "15m", "1h", "7d": how long a payment grants its wallet access (item "returning payers", sign-in-with-x). */
export const ACCESS_WINDOW_MIN_SECONDS = 60;
export const ACCESS_WINDOW_MAX_SECONDS = 30 * 86_400;
const WINDOW_UNITS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/** seconds of an access window written "<n><s|m|h|d>"; undefined when it is not that form */
export function accessWindowSeconds(text: string): number | undefined {
  const m = /^([1-9]\d{0,6})([smhd])$/.exec(text);
  return m ? Number(m[1]) * WINDOW_UNITS[m[2] as keyof typeof WINDOW_UNITS] : undefined;
}

/** the shortest "<n><unit>" spelling of a window in seconds (the form reads echo) */
export function formatAccessWindow(seconds: number): string {
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
  ] as const)
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  return `${seconds}s`;
}

export const AccessWindow = z
  .string()
  .max(16)
  .refine((t) => {
    const seconds = accessWindowSeconds(t);
    return seconds !== undefined && seconds >= ACCESS_WINDOW_MIN_SECONDS && seconds <= ACCESS_WINDOW_MAX_SECONDS;
  }, 'an access window is <n><s|m|h|d> between 1m and 30d, e.g. "1h"')
  .describe(
    'after a paid call, the paying wallet may sign in with x (sign-in-with-x header) instead of paying again for this long: "<n><s|m|h|d>", 1m–30d (e.g. "1h"); null or absent: every call pays',
  );

export const RequestBinding = z
  .enum(['optional', 'required'])
  .describe(
    'optional (default): payments bound to another request are refused, unbound ones (stock x402 clients) accepted; required: only a payment whose memo binds it to this very request (method, path, query, body digest) is accepted',
  );

export const Slug = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, 'A slug holds letters, digits, - and _, and starts with a letter or digit')
  .describe('the link’s id: a caller-chosen URL-safe slug (1–64 letters, digits, - and _) or the ULID the API minted');

const HttpUrl = z.url({ protocol: /^https?$/ }).max(2048);

/** Symbols are accepted in any case and stored upper case. */
const AnyCaseSymbol = z
  .string()
  .transform((s) => s.toUpperCase())
  .pipe(StableSymbol);

export const LinkResponse = z
  .strictObject({
    status: z.number().int().min(200).max(299).default(200).describe('HTTP status of a settled call, 200–299; default 200'),
    mimeType: z.string().min(1).max(255).default('application/json').describe('Content-Type of a settled call; default application/json'),
    body: z
      .union([z.string().max(65_536), z.record(z.string(), z.unknown()), z.array(z.unknown())])
      .describe('returned verbatim on settlement (a string, an object or an array); without metadata.upstream_url this is the paid content'),
  })
  .describe('what a settled call answers when the link has no upstream_url (hosted-api §2.1)');
export type LinkResponse = z.infer<typeof LinkResponse>;

/** hosted-api §2.1 known metadata keys are checked; other keys are free-form. */
export const LinkMetadata = z
  .looseObject({
    upstream_url: HttpUrl.describe('when set, a settled call is forwarded here and the buyer receives the upstream answer (https, public address)').optional(),
    provider_url: HttpUrl.describe('informational: the provider’s site').optional(),
    pricing_type: z.literal('fixed').describe("informational; only 'fixed' exists").optional(),
    expected_request_body: z.record(z.string(), z.unknown()).describe('descriptive only: the body shape buyers should send to a POST link').optional(),
  })
  .describe('free-form JSON (at most 16 KiB) returned on every read; the known keys are checked (hosted-api §2.1)')
  .refine((m) => JSON.stringify(m).length <= 16_384, { message: 'metadata must serialise to at most 16 KiB' });

const createFields = {
  label: z.string().trim().min(1).max(200).describe('short human name shown in the explorer and dashboards'),
  owner_agent: Address.describe('mint of the agent that receives the funds (its treasury is pay_to); recorded on your network'),
  method: HttpMethod,
  price: z.string().min(1).max(64).describe('display price: $0.01, 0.01, 0.01 USDC or 1.5 usdt; at most 6 decimals, above zero (DECISIONS "Payment links")'),
  currency: AnyCaseSymbol.describe('the primary stable (USDC, USDT or USDG, any case); default USDC, or the symbol written in price').optional(),
  accepts_currencies: z.array(AnyCaseSymbol).max(3).describe('up to 3 extra stables the offer also accepts (one accepts[] entry each)').optional(),
  protocol: Protocol.optional(),
  response: LinkResponse,
  webhook_url: HttpUrl.nullable().describe('per-link webhook POSTed on payment_link.settled, signed with webhook_secret; null clears it').optional(),
  wrap_receipt: z.boolean().describe('true: a settled body is { data: <body>, receipt: <earn receipt> }; default false').optional(),
  settle_policy: SettlePolicy.optional(),
  access_window: AccessWindow.nullable().describe(AccessWindow.description!).optional(),
  request_binding: RequestBinding.optional(),
  metadata: LinkMetadata.optional(),
};

/** hosted-api §2.1 */
export const CreatePaymentLinkInput = z
  .strictObject({ ...createFields, id: Slug.describe('caller-chosen slug (1–64 letters, digits, - and _); a ULID when omitted').optional() })
  .describe('A new payment link (hosted-api §2.1).');
export type CreatePaymentLinkInput = z.input<typeof CreatePaymentLinkInput>;

/** hosted-api §2.1 "PATCH accepts any subset of the create-time fields plus disabled". */
export const UpdatePaymentLinkInput = z
  .strictObject({
    id: Slug,
    label: createFields.label.optional(),
    owner_agent: createFields.owner_agent.optional(),
    method: createFields.method.optional(),
    price: createFields.price.optional(),
    currency: createFields.currency,
    accepts_currencies: createFields.accepts_currencies,
    protocol: createFields.protocol,
    response: LinkResponse.optional(),
    webhook_url: createFields.webhook_url,
    wrap_receipt: createFields.wrap_receipt,
    settle_policy: createFields.settle_policy,
    access_window: createFields.access_window,
    request_binding: createFields.request_binding,
    metadata: createFields.metadata,
    disabled: z.boolean().describe('true: the paywall answers 410 payment_link_disabled; false re-enables it (hosted-api §3.2)').optional(),
  })
  .describe('Any subset of the create-time fields plus disabled (hosted-api §2.1).');
export type UpdatePaymentLinkInput = z.input<typeof UpdatePaymentLinkInput>;

export const PaymentLinkIdInput = z.object({ id: Slug });

export const ListPaymentLinksInput = z.object({
  owner_agent: Address.describe('only the links of this agent mint').optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type ListPaymentLinksInput = z.input<typeof ListPaymentLinksInput>;

export const PreviewPaymentLinkInput = z.strictObject({
  owner_agent: Address.describe('mint of the agent that would receive the funds'),
  method: HttpMethod,
  price: createFields.price,
  currency: createFields.currency,
  accepts_currencies: createFields.accepts_currencies,
});
export type PreviewPaymentLinkInput = z.input<typeof PreviewPaymentLinkInput>;

/** hosted-api §2.3 */
export const AcceptEntry = z
  .object({
    scheme: z.literal('exact').describe("the x402 scheme: always 'exact'"),
    network: z.string().describe('the ledger network in CAIP-2 form (solana:<genesis hash>), as the x402 offer carries it'),
    /** the x402 offer's payTo, in the other spelling: the owner agent's treasury (hosted-api §2.3) */
    pay_to: z.string().describe('the x402 payTo: the owner agent’s treasury address'),
    /** the account the seller leg credits: ATA(pay_to, asset, token program) */
    pay_to_token_account: z.string().describe('the token account the seller leg credits: the associated token account of pay_to for asset'),
    /**
     * Whether pay_to_token_account exists, so stock x402 clients that simulate a plain transfer into it can pay: true or
     * false in the answer of the call that prepared it (create, or an update changing owner_agent or currencies);
     * null where this answer did not check (reads, preview). False: the facilitator refused to create it (its rent
     * budget is spent, or it already paid once for this owner and mint) or could not be asked. Always false while the
     * owner agent is not proven on the ledger (DECISIONS "Agents, submissions and events": the link takes no payments).
     */
    pay_to_ready: z
      .boolean()
      .nullable()
      .describe(
        'whether pay_to_token_account exists (stock x402 clients need it): true or false in the answer of the call that prepared it, null on reads and previews',
      ),
    asset: z.string().describe('token mint address of the stable'),
    amount: z.string().describe('the price in atomic units of the stable, decimal string (without the protocol fee)'),
    currency: StableSymbol,
  })
  .describe('One payment option of the offer (hosted-api §2.3).');
export type AcceptEntry = z.infer<typeof AcceptEntry>;

/** hosted-api §2.4 */
export const Counters = z
  .object({
    call_count: z.number().int().describe('paywall calls received, paid or not'),
    settled_count: z.number().int().describe('calls that settled a payment'),
    last_called_at: z.string().nullable().describe('ISO 8601 time of the last call; null before the first'),
    last_settled_at: z.string().nullable().describe('ISO 8601 time of the last settlement; null before the first'),
    last_tx_sig: z.string().nullable().describe('transaction signature of the last settlement; null before the first'),
  })
  .describe('Live usage counters of a link (hosted-api §2.4).');

/** hosted-api §2.2 plus the stored fields DECISIONS asks to echo. */
export const PaymentLink = z
  .object({
    id: z.string().describe('the slug or ULID naming the link; the paywall serves it at /x/{id}'),
    network: Network,
    label: z.string().describe('short human name'),
    owner_agent: z.string().describe('mint of the agent that receives the funds'),
    /** hosted-api §2.2–2.3: one meaning everywhere — the x402 payTo, the owner agent's treasury (asset-signer PDA) */
    pay_to: z.string().describe('the x402 payTo: the owner agent’s treasury address, as in accepts'),
    /** the account the primary currency's seller leg credits: ATA(pay_to, asset, token program) */
    pay_to_token_account: z.string().describe('the token account the primary currency’s seller leg credits: ATA(pay_to, asset)'),
    method: HttpMethod,
    path: z.string().describe("the paywall path, '/x/{id}'"),
    price: z.string().describe('the display price as given'),
    currency: StableSymbol,
    accepts_currencies: z.array(StableSymbol).describe('extra stables accepted besides currency'),
    protocol: Protocol,
    response: z
      .object({
        status: z.number().int().describe('HTTP status of a settled call'),
        mimeType: z.string().describe('Content-Type of a settled call'),
        body: z.unknown().describe('the body a settled call answers'),
      })
      .describe('what a settled call answers when the link has no upstream_url'),
    webhook_url: z.string().nullable().describe('per-link webhook URL; null when none'),
    /** a webhook signing secret exists; the secret itself is shown once (create, rotate), never on reads */
    webhook_secret_set: z.boolean().describe('a webhook signing secret exists; the secret itself is shown once, when made'),
    wrap_receipt: z.boolean().describe('a settled body is { data, receipt } when true'),
    settle_policy: SettlePolicy,
    access_window: z.string().nullable().describe('how long a paid call grants its wallet access through sign-in-with-x, e.g. "1h"; null: every call pays'),
    request_binding: RequestBinding,
    disabled: z.boolean().describe('true: the paywall answers 410 payment_link_disabled'),
    facilitator: z.string().describe('URL of the settlement service the link uses'),
    share_url: z.string().describe('the public paywall URL, {base_url}/x/{id}'),
    accepts: z.array(AcceptEntry).describe('one payment option for currency and one per accepts_currencies entry'),
    counters: Counters,
    metadata: z.record(z.string(), z.unknown()).describe('the free-form metadata as stored'),
    created_at: z.string().describe('ISO 8601 UTC time with milliseconds'),
    updated_at: z.string().describe('ISO 8601 UTC time of the last change'),
  })
  .describe('A paid HTTP endpoint answering 402 until paid (hosted-api §2.2).');
export type PaymentLink = z.infer<typeof PaymentLink>;

export const PaymentLinkList = listEnvelope(PaymentLink);

/**
 * The answer of a call that may make a webhook secret: create, PATCH and POST …/webhook-secret/rotate. The secret is
 * shown only here, once: present only when this call made one, and absent from an Idempotency-Key replay (never
 * stored), so an answer without a new secret reads exactly like GET.
 */
export const PaymentLinkWithSecret = PaymentLink.extend({
  webhook_secret: z
    .string()
    .describe('whsec_…: verifies the X-Svc-Signature of this link’s webhook POSTs. Only in the answer of the call that made it.')
    .optional(),
});
export type PaymentLinkWithSecret = z.infer<typeof PaymentLinkWithSecret>;

export const PaymentLinkPreview = z
  .object({
    network: Network,
    owner_agent: z.string().describe('mint of the agent that would receive the funds'),
    treasury: z.string().describe('the owner agent’s treasury address'),
    /** the x402 payTo: the treasury, as on a link and its accepts (hosted-api §2.2–2.3) */
    pay_to: z.string().describe('the x402 payTo: the treasury, as on a link and its accepts'),
    /** the account the primary currency's seller leg credits: ATA(pay_to, asset, token program) */
    pay_to_token_account: z.string().describe('the token account the primary currency’s seller leg would credit'),
    facilitator: z.string().describe('URL of the settlement service'),
    price: z.string().describe('the display price as given'),
    currency: StableSymbol,
    amount_atomic: z.string().describe('the price in atomic units of currency, decimal string'),
    accepts: z.array(AcceptEntry).describe('the payment options a link with these fields would offer'),
  })
  .describe('What a link with these fields would offer; nothing is stored.');

/** The stored row (money as bigint). */
export interface PaymentLinkRecord {
  pk: string;
  id: string;
  network: Network;
  label: string;
  ownerAgent: string;
  method: HttpMethod;
  price: string;
  currency: z.infer<typeof StableSymbol>;
  amountAtomic: bigint;
  acceptsCurrencies: z.infer<typeof StableSymbol>[];
  protocol: z.infer<typeof Protocol>;
  response: { status: number; mimeType: string; body: unknown };
  webhookUrl: string | null;
  /** signs the per-link webhook POST (DECISIONS "Webhooks" scheme); set while a webhook_url is */
  webhookSecret: string | null;
  wrapReceipt: boolean;
  settlePolicy: z.infer<typeof SettlePolicy>;
  /** seconds a paid call grants its wallet access (sign-in-with-x); null: none */
  accessWindowSeconds: number | null;
  requestBinding: z.infer<typeof RequestBinding>;
  metadata: Record<string, unknown>;
  disabled: boolean;
  callCount: number;
  settledCount: number;
  lastCalledAt: Date | null;
  lastSettledAt: Date | null;
  lastTxSig: string | null;
  /** the API key that created it */
  createdBy: string;
  /** the principal owning it ("wallet:…" or "key:…", docs/architecture.md "Ownership"): the only one (with admins) that sees it */
  ownerPrincipal: string;
  createdAt: Date;
  updatedAt: Date;
  /**
   * Whether the owner agent was proven on the ledger when the row was read (read with the link, not stored on it):
   * the paywall takes payments only for a proven one (DECISIONS "Agents, submissions and events").
   */
  ownerAgentProven: boolean;
}
