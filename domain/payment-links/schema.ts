import { z } from 'zod';
import { Network, StableSymbol } from '../shared/network.ts';
import { Address } from '../shared/address.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';

export const HttpMethod = z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
export type HttpMethod = z.infer<typeof HttpMethod>;
export const Protocol = z.enum(['x402', 'mpp']);
export const SettlePolicy = z.enum(['before_forward', 'on_success']);

export const Slug = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, 'A slug holds letters, digits, - and _, and starts with a letter or digit');

const HttpUrl = z.url({ protocol: /^https?$/ }).max(2048);

/** Symbols are accepted in any case and stored upper case. */
const AnyCaseSymbol = z
  .string()
  .transform((s) => s.toUpperCase())
  .pipe(StableSymbol);

export const LinkResponse = z.strictObject({
  status: z.number().int().min(200).max(299).default(200),
  mimeType: z.string().min(1).max(255).default('application/json'),
  body: z.union([z.string().max(65_536), z.record(z.string(), z.unknown()), z.array(z.unknown())]),
});
export type LinkResponse = z.infer<typeof LinkResponse>;

/** hosted-api §2.1 known metadata keys are checked; other keys are free-form. */
export const LinkMetadata = z
  .looseObject({
    upstream_url: HttpUrl.optional(),
    provider_url: HttpUrl.optional(),
    pricing_type: z.literal('fixed').optional(),
    expected_request_body: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((m) => JSON.stringify(m).length <= 16_384, { message: 'metadata must serialise to at most 16 KiB' });

const createFields = {
  label: z.string().trim().min(1).max(200),
  owner_agent: Address,
  method: HttpMethod,
  price: z.string().min(1).max(64),
  currency: AnyCaseSymbol.optional(),
  accepts_currencies: z.array(AnyCaseSymbol).max(3).optional(),
  protocol: Protocol.optional(),
  response: LinkResponse,
  webhook_url: HttpUrl.nullable().optional(),
  wrap_receipt: z.boolean().optional(),
  settle_policy: SettlePolicy.optional(),
  metadata: LinkMetadata.optional(),
};

/** hosted-api §2.1 */
export const CreatePaymentLinkInput = z.strictObject({ ...createFields, id: Slug.optional() });
export type CreatePaymentLinkInput = z.input<typeof CreatePaymentLinkInput>;

/** hosted-api §2.1 "PATCH accepts any subset of the create-time fields plus disabled". */
export const UpdatePaymentLinkInput = z.strictObject({
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
  metadata: createFields.metadata,
  disabled: z.boolean().optional(),
});
export type UpdatePaymentLinkInput = z.input<typeof UpdatePaymentLinkInput>;

export const PaymentLinkIdInput = z.object({ id: Slug });

export const ListPaymentLinksInput = z.object({
  owner_agent: Address.optional(),
  cursor: Cursor.optional(),
  limit: Limit,
});
export type ListPaymentLinksInput = z.input<typeof ListPaymentLinksInput>;

export const PreviewPaymentLinkInput = z.strictObject({
  owner_agent: Address,
  method: HttpMethod,
  price: createFields.price,
  currency: createFields.currency,
  accepts_currencies: createFields.accepts_currencies,
});
export type PreviewPaymentLinkInput = z.input<typeof PreviewPaymentLinkInput>;

/** hosted-api §2.3 */
export const AcceptEntry = z.object({
  scheme: z.literal('exact'),
  network: z.string(),
  /** the x402 offer's payTo, in the other spelling: the owner agent's treasury (hosted-api §2.3) */
  pay_to: z.string(),
  /** the account the seller leg credits: ATA(pay_to, asset, token program) */
  pay_to_token_account: z.string(),
  /**
   * Whether pay_to_token_account exists, so stock x402 clients that simulate a plain transfer into it can pay: true or
   * false in the answer of the call that prepared it (create, or an update changing owner_agent or currencies);
   * null where this answer did not check (reads, preview). False: the facilitator refused to create it (its rent
   * budget is spent, or it already paid once for this owner and mint) or could not be asked. Always false while the
   * owner agent is not proven on the ledger (DECISIONS "Agents, submissions and events": the link takes no payments).
   */
  pay_to_ready: z.boolean().nullable(),
  asset: z.string(),
  amount: z.string(),
  currency: StableSymbol,
});
export type AcceptEntry = z.infer<typeof AcceptEntry>;

/** hosted-api §2.4 */
export const Counters = z.object({
  call_count: z.number().int(),
  settled_count: z.number().int(),
  last_called_at: z.string().nullable(),
  last_settled_at: z.string().nullable(),
  last_tx_sig: z.string().nullable(),
});

/** hosted-api §2.2 plus the stored fields DECISIONS asks to echo. */
export const PaymentLink = z.object({
  id: z.string(),
  network: Network,
  label: z.string(),
  owner_agent: z.string(),
  /** hosted-api §2.2–2.3: one meaning everywhere — the x402 payTo, the owner agent's treasury (asset-signer PDA) */
  pay_to: z.string(),
  /** the account the primary currency's seller leg credits: ATA(pay_to, asset, token program) */
  pay_to_token_account: z.string(),
  method: HttpMethod,
  path: z.string(),
  price: z.string(),
  currency: StableSymbol,
  accepts_currencies: z.array(StableSymbol),
  protocol: Protocol,
  response: z.object({ status: z.number().int(), mimeType: z.string(), body: z.unknown() }),
  webhook_url: z.string().nullable(),
  /** a webhook signing secret exists; the secret itself is shown once (create, rotate), never on reads */
  webhook_secret_set: z.boolean(),
  wrap_receipt: z.boolean(),
  settle_policy: SettlePolicy,
  disabled: z.boolean(),
  facilitator: z.string(),
  share_url: z.string(),
  accepts: z.array(AcceptEntry),
  counters: Counters,
  metadata: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});
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
    .optional()
    .describe('whsec_…: verifies the X-Svc-Signature of this link’s webhook POSTs. Only in the answer of the call that made it.'),
});
export type PaymentLinkWithSecret = z.infer<typeof PaymentLinkWithSecret>;

export const PaymentLinkPreview = z.object({
  network: Network,
  owner_agent: z.string(),
  treasury: z.string(),
  /** the x402 payTo: the treasury, as on a link and its accepts (hosted-api §2.2–2.3) */
  pay_to: z.string(),
  /** the account the primary currency's seller leg credits: ATA(pay_to, asset, token program) */
  pay_to_token_account: z.string(),
  facilitator: z.string(),
  price: z.string(),
  currency: StableSymbol,
  amount_atomic: z.string(),
  accepts: z.array(AcceptEntry),
});

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
