import { z } from 'zod';
import { PaymentLink } from '../payment-links/schema.ts';
import { Receipt, VerificationStatus } from '../receipts/schema.ts';
import type { EventPhase, NewEvent, NewEventFields } from './schema.ts';
import { PreparedSigner } from '../transactions/signers.ts';
import { listEnvelope } from '../shared/pagination.ts';

// The event catalogue: every kind the gateway appends, with its metadata schema and the phases it may be
// in. `newEvent` is typed by kind, so a service cannot append a kind or a metadata shape the catalogue does not know;
// the OpenAPI and GraphQL docs and the webhook payload docs are generated from this table. A new kind is one entry.

const Atomic = z.string().regex(/^\d+$/).describe('atomic amount, decimal string');
const Signature = z.string().describe('transaction signature (base58)');
/** receipt.verified and receipt.mismatch: one check of a receipt against the ledger, either outcome */
const ReceiptCheck = z.object({
  receipt_hash: z.string(),
  nonce: z.number().int(),
  tx_sig: Signature,
  source: z.string(),
  verification: VerificationStatus,
  reason: z.string().nullable(),
});

export interface KindSpec {
  description: string;
  phases: readonly EventPhase[];
  metadata: z.ZodType<Record<string, unknown>>;
}

/** The phases of a ledger action built by a prepare route (hosted-api §3.1). */
const LEDGER_PHASES = ['prepared', 'submitted', 'confirmed', 'failed'] as const satisfies readonly EventPhase[];

/** Every prepared event keeps its envelope's `echo`; kinds add their own fields. */
const prepared = <S extends z.ZodRawShape>(description: string, shape: S) => ({
  description,
  phases: LEDGER_PHASES,
  metadata: z.looseObject({
    echo: z.record(z.string(), z.unknown()),
    signers: z.array(PreparedSigner).describe('every key the transaction needs a signature of, in order, with its role (hosted-api §4.5.1)').optional(),
    ...shape,
  }),
});

/** The kinds of the 14 prepare routes (hosted-api §4.3, DECISIONS "Prepare / submit / events"). */
const PREPARED_KINDS = {
  'agent.create': prepared('agents/prepare: a new agent asset (Metaplex Core), with its identity when the network has the registry.', {}),
  'agent.identity.register': prepared('identity/prepare: the agent identity registered again on an existing asset.', {}),
  'agent.executive.register': prepared('executive/register/prepare: a wallet bound as the agent’s executive.', {}),
  'agent.executive.delegate': prepared('executive/delegate/prepare: the executive may sign Execute for the asset.', { executive: z.string() }),
  'agent.executive.revoke': prepared('executive/revoke/prepare: the executive’s Execute delegation revoked.', { executive: z.string() }),
  'agent.delegation.set': prepared('delegation/prepare: the executive approved as token delegate of the treasury up to an allowance.', {
    stable_symbol: z.string(),
    allowance_atomic: Atomic,
    delegate: z.string(),
  }),
  'agent.delegation.revoke': prepared('delegation/revoke/prepare: the treasury token account’s delegate revoked.', { stable_symbol: z.string() }),
  'agent.token.set': prepared('token/set/prepare: the agent_token field of the identity set.', {}),
  'agent.treasury.provision': prepared('treasury/provision/prepare: the treasury’s stable token accounts created.', {}),
  'agent.treasury.withdraw': prepared('treasury/withdraw(-all)/prepare: the owner moves a token amount out of the treasury.', {
    mint: z.string(),
    amount_atomic: Atomic,
    destination: z.string(),
  }),
  'agent.treasury.withdraw_sol': prepared('treasury/withdraw-sol(-all)/prepare: the owner moves lamports out of the treasury.', {
    lamports: Atomic,
    destination: z.string(),
  }),
  'buyer.payment': prepared('buyer/payment/prepare: a settlement-layout payment from an agent’s treasury signed by its executive as delegate.', {
    pay_to: z.string(),
    amount_atomic: Atomic,
    currency: z.string(),
  }),
} as const satisfies Record<string, KindSpec>;

/**
 * What the indexer sees on the ledger (hosted-api §6). Provision, withdraw and withdraw_sol are also prepare
 * kinds: an event the indexer made is `confirmed` with `source: "indexer"` (no echo), one a prepare route made keeps
 * its prepared shape; a transaction submitted through /v1/submit is not reported again by the indexer.
 */
const indexed = <S extends z.ZodRawShape>(shape: S) => z.object({ source: z.literal('indexer'), ...shape });
const TokenMove = {
  token_account: z.string().describe('the treasury token account'),
  mint: z.string(),
  currency: z.string().nullable().describe('the curated stable symbol, null for another mint'),
  amount_atomic: Atomic,
};
const INDEXED_SHAPES = {
  'agent.treasury.provision': indexed({ token_account: z.string(), mint: z.string(), currency: z.string().nullable() }),
  'agent.treasury.withdraw': indexed({ ...TokenMove, destination: z.string().nullable().describe('the token account credited, when one was') }),
  'agent.treasury.withdraw_sol': indexed({ treasury: z.string(), lamports: Atomic, destination: z.string().nullable() }),
};
const alsoIndexed = <K extends keyof typeof INDEXED_SHAPES>(kind: K, seen: string) => ({
  description: `${PREPARED_KINDS[kind].description} Or ${seen} (source "indexer", phase confirmed).`,
  phases: LEDGER_PHASES,
  metadata: z.union([PREPARED_KINDS[kind].metadata, INDEXED_SHAPES[kind]]),
});

const INDEXER_KINDS = {
  'agent.treasury.fund': {
    description: 'Indexer only: a treasury token account received tokens (hosted-api §6); the account must be on the watchlist.',
    phases: ['confirmed'],
    metadata: indexed({ ...TokenMove, from: z.string().nullable().describe('the owner of the token account debited, when one was') }),
  },
  'agent.treasury.fund_sol': {
    description: 'Indexer only: the treasury received lamports (at least 5000; smaller changes are ignored as noise).',
    phases: ['confirmed'],
    metadata: indexed({ treasury: z.string(), lamports: Atomic, from: z.string().nullable() }),
  },
  'agent.treasury.provision': alsoIndexed('agent.treasury.provision', 'the indexer saw a treasury token account created'),
  'agent.treasury.withdraw': alsoIndexed('agent.treasury.withdraw', 'the indexer saw a treasury token account as the source of a token transfer'),
  'agent.treasury.withdraw_sol': alsoIndexed('agent.treasury.withdraw_sol', 'the indexer saw the treasury’s lamports fall through a Core Execute instruction'),
} as const satisfies Record<string, KindSpec>;

/** The kinds a prepare route creates. */
export type PreparedKind = keyof typeof PREPARED_KINDS;
export const PREPARED_KIND_NAMES = Object.keys(PREPARED_KINDS) as PreparedKind[];

export const EVENT_KINDS = {
  'payment_link.created': {
    description: 'A payment link was created (hosted-api §3.1).',
    phases: ['confirmed'],
    metadata: z.object({ payment_link_id: z.string(), payment_link: PaymentLink }),
  },
  'payment_link.updated': {
    description: 'A payment link was changed; `changed` names the fields given.',
    phases: ['confirmed'],
    metadata: z.object({ payment_link_id: z.string(), payment_link: PaymentLink, changed: z.array(z.string()) }),
  },
  'api_key.disabled': {
    description: 'An API key was disabled (admin only): every gateway process stops accepting it within a few seconds.',
    phases: ['confirmed'],
    metadata: z.object({ api_key_id: z.string() }),
  },
  'payment_link.deleted': {
    description: 'A payment link was deleted; its id may be reused.',
    phases: ['confirmed'],
    metadata: z.object({ payment_link_id: z.string() }),
  },
  'payment_link.settled': {
    description: 'A paid call to a payment link settled on the ledger (hosted-api §4.2 rule 9).',
    phases: ['confirmed'],
    metadata: z.object({
      payment_link_id: z.string(),
      agent: z.string(),
      tx_sig: Signature,
      payer: z.string().nullable(),
      currency: z.string(),
      asset: z.string(),
      amount_atomic: Atomic,
      fee_atomic: Atomic,
      gross_atomic: Atomic,
    }),
  },
  'payment_link.served': {
    description: 'The paid response of a settled call was produced (template or upstream).',
    phases: ['confirmed'],
    metadata: z.object({ payment_link_id: z.string(), status: z.number().int(), tx_sig: Signature, method: z.string() }),
  },
  'receipt.published': {
    description: 'A receipt joined its agent’s hash chain.',
    phases: ['confirmed'],
    metadata: z.object({
      payment_link_id: z.string().optional(),
      source: z.string(),
      receipt_hash: z.string(),
      nonce: z.number().int(),
      receipt: Receipt,
    }),
  },
  'receipt.pulled': {
    description: 'The pull worker accepted an item of a pull target: it joined its agent’s hash chain (hosted-api §4.7).',
    phases: ['confirmed'],
    metadata: z.object({
      pull_target_id: z.string(),
      source: z.literal('pull'),
      receipt_hash: z.string(),
      nonce: z.number().int(),
      receipt: Receipt,
    }),
  },
  'receipt.verified': {
    description: 'A receipt’s transaction was found on the ledger, succeeded, and moved what the price block says.',
    phases: ['confirmed'],
    metadata: ReceiptCheck,
  },
  'receipt.mismatch': {
    description: 'A receipt’s transaction is missing, failed, or moved other amounts than its price block says; `reason` says which.',
    phases: ['confirmed'],
    metadata: ReceiptCheck,
  },
  'protocol.fee.collected': {
    description:
      'The protocol fee of a receipt (fee-facilitator-mpp-tools §6, path 1), or a transfer into a fee authority’s token account seen by the indexer (path 2, source "on_chain").',
    phases: ['confirmed'],
    metadata: z.union([
      z.object({
        source: z.literal('receipt'),
        receipt_hash: z.string(),
        tx_sig: Signature,
        mint: z.string(),
        currency: z.string(),
        fee_atomic: Atomic,
        fee_authority: z.string().nullable(),
        payment_link_id: z.string().optional(),
      }),
      z.object({
        source: z.literal('on_chain'),
        tx_sig: Signature,
        mint: z.string(),
        currency: z.string().describe('the curated stable symbol, or the mint for another one'),
        fee_atomic: Atomic,
        fee_authority: z.string(),
        token_account: z.string().describe('the fee authority’s token account credited'),
      }),
    ]),
  },
  'identity.profile.updated': {
    description: 'An agent’s public profile was set (PUT /v1/identity/{mint}/profile).',
    phases: ['confirmed'],
    metadata: z.object({
      mint: z.string(),
      handle: z.string().nullable(),
      previous_handle: z.string().nullable(),
      display_name: z.string().nullable(),
      capabilities: z.array(z.string()),
    }),
  },
  'identity.domain.verified': {
    description: 'An agent proved a domain: https://{domain}/.well-known/svc-agent.json named its mint, network and token.',
    phases: ['confirmed'],
    metadata: z.object({ mint: z.string(), domain: z.string(), url: z.string() }),
  },
  'identity.claim.created': {
    description: 'The owner stated a claim about its agent (POST /v1/identity/{mint}/claims).',
    phases: ['confirmed'],
    metadata: z.object({ mint: z.string(), claim_id: z.string(), type: z.string(), public: z.boolean() }),
  },
  'identity.claim.revoked': {
    description: 'The owner revoked a claim; the claim is kept with its revoked_at.',
    phases: ['confirmed'],
    metadata: z.object({ mint: z.string(), claim_id: z.string(), type: z.string() }),
  },
  'identity.capability_card.created': {
    description: 'The owner declared a capability card of its agent (POST /v1/identity/{mint}/capability-cards).',
    phases: ['confirmed'],
    metadata: z.object({ mint: z.string(), card_id: z.string(), capability: z.string(), public: z.boolean() }),
  },
  'identity.capability_card.updated': {
    description: 'The owner changed a capability card (PATCH /v1/identity/{mint}/capability-cards/{id}).',
    phases: ['confirmed'],
    metadata: z.object({ mint: z.string(), card_id: z.string(), capability: z.string(), public: z.boolean() }),
  },
  'identity.capability_card.deleted': {
    description: 'The owner deleted a capability card (DELETE /v1/identity/{mint}/capability-cards/{id}).',
    phases: ['confirmed'],
    metadata: z.object({ mint: z.string(), card_id: z.string(), capability: z.string() }),
  },
  ...PREPARED_KINDS,
  ...INDEXER_KINDS,
} as const satisfies Record<string, KindSpec>;

export type EventKindName = keyof typeof EVENT_KINDS;
export const EVENT_KIND_NAMES = Object.keys(EVENT_KINDS) as EventKindName[];
export type EventMetadata<K extends EventKindName> = z.input<(typeof EVENT_KINDS)[K]['metadata']>;

/**
 * An event to append, typed by its kind. The metadata shape is checked by the compiler, not at run time: an event is
 * appended in the transaction that records money that already moved, which a stray field must never roll back
 * (test/domain/event-kinds.test.ts checks the events of real flows against the catalogue instead).
 */
export function newEvent<K extends EventKindName>(kind: K, fields: NewEventFields, metadata: EventMetadata<K>): NewEvent {
  return { ...fields, kind, metadata } as NewEvent;
}

/** Whether a stored event matches the catalogue: its kind is known, its phase allowed and its metadata valid. */
export function checkEvent(event: { kind: string; phase: EventPhase; metadata: unknown }): string | null {
  if (!(event.kind in EVENT_KINDS)) return `unknown kind ${event.kind}`;
  const spec: KindSpec = EVENT_KINDS[event.kind as EventKindName];
  if (!spec.phases.includes(event.phase)) return `${event.kind} has no phase ${event.phase}`;
  const checked = spec.metadata.safeParse(event.metadata);
  return checked.success ? null : `${event.kind} metadata: ${checked.error.message}`;
}

export const EventKindDoc = z
  .object({
    kind: z.string().describe('the event kind'),
    description: z.string().describe('what the event means'),
    phases: z.array(z.enum(['prepared', 'submitted', 'confirmed', 'failed'])).describe('the phases events of this kind move through'),
    metadata_schema: z.record(z.string(), z.unknown()).describe('JSON Schema (2020-12) of the metadata of events of this kind'),
  })
  .describe('One kind of the event catalogue.');
export type EventKindDoc = z.infer<typeof EventKindDoc>;
/** the fixed catalogue: a bounded list, one complete page of the list envelope */
export const EventCatalogue = listEnvelope(EventKindDoc);

let docs: EventKindDoc[] | undefined;

/** The catalogue as documentation: JSON Schema of each kind's metadata (GET /v1/event-kinds, GraphQL eventKinds, webhook payload docs). */
export function eventCatalogue(): EventKindDoc[] {
  docs ??= EVENT_KIND_NAMES.map((kind) => {
    const spec: KindSpec = EVENT_KINDS[kind];
    return {
      kind,
      description: spec.description,
      phases: [...spec.phases],
      metadata_schema: z.toJSONSchema(spec.metadata, { unrepresentable: 'any', io: 'input' }) as Record<string, unknown>,
    };
  });
  return docs;
}
