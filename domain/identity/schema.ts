import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { Network } from '../shared/network.ts';
import { Cursor, Limit, listEnvelope } from '../shared/pagination.ts';

// DECISIONS "Identity": one schema per body and per resource, shared by REST, tRPC and GraphQL.

/**
 * Handles nobody may take (case-insensitive): names a user could mistake for the gateway or its operators. The
 * check is on the lower-cased handle, so "Admin" and "ADMIN" are refused too.
 */
export const RESERVED_HANDLES: ReadonlySet<string> = new Set([
  'admin',
  'administrator',
  'api',
  'svc',
  'support',
  'root',
  'system',
  'help',
  'security',
  'official',
  'staff',
  'gateway',
  'operator',
  'moderator',
  'null',
  'undefined',
  'me',
  'self',
  'www',
  'mail',
  'billing',
  'status',
]);

/** 3–32 characters: letters, digits, "_" and "-", starting with a letter or digit; compared case-insensitively. */
export const Handle = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{2,31}$/, 'Expected a handle: 3–32 letters, digits, "_" or "-", starting with a letter or digit')
  .refine((h) => !RESERVED_HANDLES.has(h.toLowerCase()), { message: 'This handle is reserved' });

/** A capability name, e.g. "weather.forecast". */
export const CapabilityName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'Expected a capability name: lower-case letters, digits, ".", "_" or "-" (1–64)')
  .describe('capability name: lower-case letters, digits, ., _ or - (1–64), e.g. weather.forecast');

/**
 * A domain an agent claims: a lower-case DNS name; a ":port" is allowed for development targets on the outbound
 * allow-list (SVC_OUTBOUND_ALLOW) only — a public domain is checked on 443.
 */
export const DomainName = z
  .string()
  .max(260)
  .transform((d) => d.toLowerCase())
  .pipe(
    z
      .string()
      .regex(
        /^(?=.{1,253}(:|$))([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(:\d{1,5})?$/,
        'Expected a domain name such as agent.example.com (optionally :port for an allow-listed development target)',
      ),
  );

const Text = (max: number) => z.string().min(1).max(max);
/** the agent an identity route is about */
const Mint = Address.describe('the agent’s mint');

/** PUT /v1/identity/{mint}/profile: the whole profile (a field left out is cleared). */
export const UpdateProfileInput = z
  .strictObject({
    mint: Mint,
    handle: Handle.describe('unique handle on the network: 3–32 letters, digits, _ or -'),
    display_name: Text(100).nullable().describe('display name; null clears it').optional(),
    description: Text(2000).nullable().describe('free text; null clears it').optional(),
    image: z
      .url({ protocol: /^https$/ })
      .max(2048)
      .nullable()
      .describe('https image URL; null clears it')
      .optional(),
    /** what the agent says it can do; the stand-in for capability cards, read by the `capability_declared` check */
    capabilities: z.array(CapabilityName).max(64).describe('capability names the agent offers').optional(),
  })
  .describe('The public profile of an agent you own (DECISIONS "Identity").');
export type UpdateProfileInput = z.input<typeof UpdateProfileInput>;

export const IdentityMintInput = z.object({ mint: Mint });

/** A page of one agent's list (its history, its claims): DECISIONS "Wire conventions" cursor and limit. */
export const MintPageInput = z.object({ mint: Mint, cursor: Cursor.optional(), limit: Limit });
export type MintPageInput = z.input<typeof MintPageInput>;

/** GET /v1/identity/{mint}/history: the agent's identity.* events, newest first */
export const HistoryInput = MintPageInput;
export type HistoryInput = MintPageInput;

/** GET /v1/identity/resolve: exactly one of mint, handle, domain. */
export const ResolveInput = z
  .object({
    mint: Address.describe('the agent’s mint').optional(),
    handle: z.string().min(1).max(64).describe('the agent’s handle').optional(),
    domain: z.string().min(1).max(260).describe('a domain the agent verified').optional(),
  })
  .refine((q) => [q.mint, q.handle, q.domain].filter((v) => v !== undefined).length === 1, {
    message: 'Give exactly one of mint, handle or domain',
  });
export type ResolveInput = z.input<typeof ResolveInput>;

export const Profile = z
  .object({
    handle: z.string().nullable().describe('unique handle; null when none'),
    display_name: z.string().nullable().describe('display name; null when none'),
    description: z.string().nullable().describe('free text; null when none'),
    image: z.string().nullable().describe('image URL; null when none'),
    capabilities: z.array(z.string()).describe('capability names the agent offers'),
    updated_at: z.string().nullable().describe('ISO 8601 time of the last change; null before a profile exists'),
  })
  .describe('An agent’s public profile.');
export type Profile = z.infer<typeof Profile>;

export const VerifiedDomain = z
  .object({ domain: z.string().describe('the domain'), verified_at: z.string().describe('ISO 8601 time of verification') })
  .describe('A domain proven through its /.well-known/svc-agent.json.');
export type VerifiedDomain = z.infer<typeof VerifiedDomain>;

/** Settled paid calls of the agent, read from its earn receipts (decision allow). Amounts are atomic decimal strings. */
export const Reputation = z
  .object({
    settled_calls: z.number().int().describe('settled paid calls'),
    /** share of settled calls answered with a 2xx, 0–5 with one decimal; null before the first call */
    rating: z.number().nullable().describe('rating in [0, 1]; null before any settled call'),
    volume: z
      .array(
        z.object({
          currency: z.string().describe('stable symbol'),
          asset: z.string().describe('token mint'),
          amount_atomic: z.string().describe('settled volume in atomic units, decimal string'),
          calls: z.number().int().describe('settled calls in this currency'),
        }),
      )
      .describe('settled volume per currency'),
    last_settled_at: z.string().nullable().describe('ISO 8601 time of the last settled call; null before one'),
  })
  .describe('Reputation from settled calls (fee-facilitator-mpp-tools §4.3 svc_reputation).');
export type Reputation = z.infer<typeof Reputation>;

/** A statement the owner makes about its agent, e.g. { type: "organization", statement: "Operated by Example Ltd" }. */
export const Claim = z
  .object({
    id: z.string().describe('the claim id'),
    mint: z.string().describe('the agent’s mint'),
    type: z.string().describe('claim type, e.g. license'),
    statement: z.string().describe('the claim in words'),
    evidence_url: z.string().nullable().describe('https URL of evidence; null when none'),
    public: z.boolean().describe('shown to everyone (else only through a disclosure link)'),
    created_at: z.string().describe('ISO 8601 creation time'),
    revoked_at: z.string().nullable().describe('ISO 8601 revocation time; null while valid'),
  })
  .describe('A revocable statement the owner makes about the agent.');
export type Claim = z.infer<typeof Claim>;

/** POST /v1/identity/{mint}/claims */
export const CreateClaimInput = z
  .strictObject({
    mint: Mint,
    type: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'Expected a claim type: lower-case letters, digits, ".", "_" or "-" (1–64)')
      .describe('claim type: lower-case letters, digits, ., _ or - (1–64)'),
    statement: z.string().min(1).max(2000).describe('the claim in words'),
    evidence_url: z
      .url({ protocol: /^https$/ })
      .max(2048)
      .describe('https URL of evidence')
      .optional(),
    /** shown in GET /v1/identity/{mint} (default true); a private claim is listed to its owner only */
    public: z.boolean().describe('shown to everyone; default false').optional(),
  })
  .describe('A new claim about an agent you own.');
export type CreateClaimInput = z.input<typeof CreateClaimInput>;

export const ClaimIdInput = z.object({ mint: Mint, id: z.string().min(1).max(64).describe('the claim id') });
export type ClaimIdInput = z.input<typeof ClaimIdInput>;

export const ClaimList = listEnvelope(Claim);
export type ClaimList = z.infer<typeof ClaimList>;

/** What a disclosure link may reveal: the public parts, and `private_claims` (the owner's private claims, not revoked). */
export const DisclosureField = z
  .enum(['profile', 'domains', 'claims', 'private_claims', 'reputation'])
  .describe('a part of the identity a disclosure link reveals');
export type DisclosureField = z.infer<typeof DisclosureField>;

/** POST /v1/identity/{mint}/disclosures; expires_in in seconds, 1 minute to 30 days */
export const CreateDisclosureInput = z
  .strictObject({
    mint: Mint,
    fields: z.array(DisclosureField).min(1).max(5).describe('the parts the link reveals'),
    expires_in: z
      .number()
      .int()
      .min(60)
      .max(30 * 86_400)
      .describe('seconds until the link expires: 60 to 30 days'),
  })
  .describe('A new selective disclosure link.');
export type CreateDisclosureInput = z.input<typeof CreateDisclosureInput>;

/** The link, shown once. */
export const DisclosureLink = z
  .object({
    token: z.string().describe('svc_dl_…: the disclosure token, shown once'),
    url: z.string().describe('the public URL that reveals the fields: GET /v1/identity/disclosures/{token}'),
    mint: z.string().describe('the agent’s mint'),
    fields: z.array(DisclosureField).describe('the parts it reveals'),
    expires_at: z.string().describe('ISO 8601 expiry time'),
  })
  .describe('A selective disclosure link (DECISIONS "Identity").');
export type DisclosureLink = z.infer<typeof DisclosureLink>;

export const DisclosureTokenInput = z.object({
  token: z
    .string()
    .regex(/^svc_dl_[A-Za-z0-9_-]{20,64}$/, 'Expected a disclosure token (svc_dl_…)')
    .describe('the disclosure token (svc_dl_…)'),
});
export type DisclosureTokenInput = z.input<typeof DisclosureTokenInput>;

/** GET /v1/identity/disclosures/{token}: the fields the link names, nothing else. */
export const Disclosure = z
  .object({
    mint: z.string().describe('the agent’s mint'),
    network: Network,
    fields: z.array(DisclosureField).describe('the parts revealed'),
    expires_at: z.string().describe('ISO 8601 expiry time'),
    profile: Profile.describe('the profile, when revealed').optional(),
    domains: z.array(VerifiedDomain).describe('verified domains, when revealed').optional(),
    claims: z.array(Claim).describe('public claims, when revealed').optional(),
    private_claims: z.array(Claim).describe('non-public claims, when revealed').optional(),
    reputation: Reputation.describe('reputation, when revealed').optional(),
  })
  .describe('What a disclosure link reveals.');
export type Disclosure = z.infer<typeof Disclosure>;

// ── capability cards ────────────────────────────────────────────────────────────────────────────────────────────────

/** What an agent says it can do, one card per capability name; public cards are part of its identity. */
export const CapabilityCard = z
  .object({
    id: z.string().describe('the card id'),
    mint: z.string().describe('the agent’s mint'),
    capability: z.string().describe('capability name'),
    title: z.string().nullable().describe('title; null when none'),
    description: z.string().nullable().describe('free text; null when none'),
    /** where the capability is served (https), e.g. one of the agent's payment links */
    endpoint: z.string().nullable().describe('https endpoint offering it; null when none'),
    tags: z.array(z.string()).describe('search tags'),
    public: z.boolean().describe('shown to everyone'),
    created_at: z.string().describe('ISO 8601 creation time'),
    updated_at: z.string().describe('ISO 8601 time of the last change'),
  })
  .describe('A capability the agent offers.');
export type CapabilityCard = z.infer<typeof CapabilityCard>;

const CardTag = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,31}$/, 'Expected a tag: lower-case letters, digits, ".", "_" or "-" (1–32)');
const cardFields = {
  title: Text(100).nullable().describe('title; null clears it').optional(),
  description: Text(2000).nullable().describe('free text; null clears it').optional(),
  endpoint: z
    .url({ protocol: /^https$/ })
    .max(2048)
    .nullable()
    .describe('https endpoint offering it; null clears it')
    .optional(),
  tags: z.array(CardTag).max(16).describe('search tags: lower-case, up to 16').optional(),
  /** default true: shown in GET /v1/identity/{mint}, the registration document and verify */
  public: z.boolean().describe('shown to everyone').optional(),
};

/** POST /v1/identity/{mint}/capability-cards: one card per capability of an agent (another with the same name: 409). */
export const CreateCardInput = z
  .strictObject({ mint: Mint, capability: CapabilityName, ...cardFields })
  .describe('A new capability card of an agent you own; one per capability.');
export type CreateCardInput = z.input<typeof CreateCardInput>;

export const CardIdInput = z.object({ mint: Mint, id: z.string().min(1).max(64).describe('the capability card id') });
export type CardIdInput = z.input<typeof CardIdInput>;

/** PATCH /v1/identity/{mint}/capability-cards/{id}: the fields given change (null clears); the capability name stays. */
export const UpdateCardInput = z.strictObject({ mint: Mint, id: z.string().min(1).max(64).describe('the capability card id'), ...cardFields });
export type UpdateCardInput = z.input<typeof UpdateCardInput>;

/** at most MAX_CARDS per agent: always one complete page */
export const CardList = listEnvelope(CapabilityCard);
export type CardList = z.infer<typeof CardList>;

/**
 * The agent's registration document read back from its uri (resolve and verify): the gateway's own is built and
 * checked in place, any other is fetched through the guarded outbound port and validated against registration-v1.
 */
export const RegistrationStatus = z
  .object({
    uri: z.string().nullable().describe('the asset’s registration document URI; null when none'),
    /** the uri is the gateway's own registration.json of this agent */
    hosted: z.boolean().describe('the gateway hosts the document'),
    ok: z.boolean().describe('the document is valid registration-v1'),
    detail: z.string().describe('the finding in words'),
  })
  .describe('The state of the agent’s registration document.');
export type RegistrationStatus = z.infer<typeof RegistrationStatus>;

/** GET /v1/identity/{mint}: what anyone with a key on the network may know of an agent. */
export const Identity = z
  .object({
    mint: z.string().describe('the agent’s mint'),
    network: Network,
    owner: z.string().describe('the asset’s owner wallet'),
    name: z.string().nullable().describe('the asset’s name; null when unknown'),
    profile: Profile,
    domains: z.array(VerifiedDomain).describe('verified domains'),
    /** public claims not revoked, oldest first */
    claims: z.array(Claim).describe('claims visible to you'),
    /** public capability cards, by capability name */
    capability_cards: z.array(CapabilityCard).describe('capability cards visible to you'),
    reputation: Reputation,
    /** read back by resolve and verify; null on the other reads (it may cost an outbound fetch) */
    registration: RegistrationStatus.nullable().describe('the registration document state; null when not checked'),
  })
  .describe('An agent’s public identity (hosted-api §1, DECISIONS "Identity").');
export type Identity = z.infer<typeof Identity>;

/**
 * POST /v1/identity/verify `intent`: what the caller means to do with the agent —
 * `pay` (buy its paid calls), `hire` (have it do work: a capability), `delegate` (give it authority over funds).
 */
export const Intent = z.enum(['pay', 'hire', 'delegate']).describe('what the caller means to do with the agent: pay, hire or delegate');
export type Intent = z.infer<typeof Intent>;

export const VerifyInput = z
  .strictObject({
    mint: Address.describe('the agent’s mint').optional(),
    handle: z.string().min(1).max(64).describe('the agent’s handle').optional(),
    domain: z.string().min(1).max(260).describe('a domain the agent verified').optional(),
    /** what the caller means to do with the agent: judged by the `intent` check (domain/identity/checks.ts) */
    intent: Intent.describe('what you mean to do with the agent; changes the checks').optional(),
    capability: CapabilityName.describe('a capability the agent must offer').optional(),
    thresholds: z
      .strictObject({
        min_rating: z.number().min(0).max(5).describe('deny below this reputation rating').optional(),
        require_verified_domain: z.boolean().describe('deny without a verified domain').optional(),
        min_settled_calls: z.number().int().min(0).max(1_000_000_000).describe('deny below this many settled calls').optional(),
      })
      .describe('limits that turn the verdict to deny')
      .optional(),
  })
  .refine((q) => [q.mint, q.handle, q.domain].filter((v) => v !== undefined).length === 1, {
    message: 'Give exactly one of mint, handle or domain',
  })
  .describe('Who to verify (exactly one of mint, handle or domain) and for what (DECISIONS "Identity").');
export type VerifyInput = z.input<typeof VerifyInput>;

export const Check = z
  .object({ name: z.string().describe('what was checked'), ok: z.boolean().describe('whether it passed'), detail: z.string().describe('the finding in words') })
  .describe('One check of an identity verification.');
export type Check = z.infer<typeof Check>;

export const Verdict = z.enum(['allow', 'warn', 'deny']).describe('allow, warn or deny');
export type Verdict = z.infer<typeof Verdict>;

export const VerifyResult = z
  .object({
    verdict: Verdict,
    /** 0–100: the weighted share of checks passed */
    score: z.number().int().min(0).max(100).describe('0–100'),
    checks: z.array(Check).describe('each check and its outcome'),
    /** null when no agent matched */
    profile: Identity.nullable().describe('the identity; null when nothing resolved'),
  })
  .describe('An allow, warn or deny verdict with its checks.');
export type VerifyResult = z.infer<typeof VerifyResult>;

export const AddDomainInput = z.strictObject({ mint: Mint, domain: DomainName.describe('the domain to prove, e.g. agent.example.com') });
export type AddDomainInput = z.input<typeof AddDomainInput>;

export const DomainInput = z.object({ mint: Mint, domain: DomainName.describe('the domain') });
export type DomainInput = z.input<typeof DomainInput>;

/** POST /v1/identity/{mint}/domains: where to publish what, to prove the domain. */
export const DomainChallenge = z
  .object({
    domain: z.string().describe('the domain'),
    token: z.string().describe('the challenge token'),
    /** https://{domain}/.well-known/svc-agent.json */
    url: z.string().describe('where to serve document: https://{domain}/.well-known/svc-agent.json'),
    /** the JSON to serve at url */
    document: z
      .object({ mint: z.string().describe('the agent’s mint'), network: Network, token: z.string().describe('the challenge token') })
      .describe('the JSON to serve at url'),
    verified_at: z.string().nullable().describe('ISO 8601 verification time; null until verified'),
  })
  .describe('How to prove a domain.');
export type DomainChallenge = z.infer<typeof DomainChallenge>;

/** The document https://{domain}/.well-known/svc-agent.json must serve (extra fields are allowed). */
export const WellKnownDocument = z.looseObject({ mint: z.string(), network: z.string(), token: z.string() });

// ── records (the store's shape) ─────────────────────────────────────────────────────────────────────────────────────

export interface ProfileRecord {
  network: Network;
  mint: string;
  handle: string | null;
  displayName: string | null;
  description: string | null;
  image: string | null;
  capabilities: string[];
  ownerPrincipal: string;
  updatedAt: Date;
}

export interface DomainRecord {
  network: Network;
  mint: string;
  domain: string;
  token: string;
  ownerPrincipal: string;
  createdAt: Date;
  verifiedAt: Date | null;
}

/** One currency's settled earn receipts of an agent. */
export interface ReputationRow {
  currency: string;
  asset: string;
  calls: number;
  okCalls: number;
  amountAtomic: bigint;
  lastAt: Date | null;
}

export interface ClaimRecord {
  network: Network;
  id: string;
  mint: string;
  type: string;
  statement: string;
  evidenceUrl: string | null;
  public: boolean;
  ownerPrincipal: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface CardRecord {
  network: Network;
  id: string;
  mint: string;
  capability: string;
  title: string | null;
  description: string | null;
  endpoint: string | null;
  tags: string[];
  public: boolean;
  ownerPrincipal: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface DisclosureRecord {
  network: Network;
  tokenHash: string;
  mint: string;
  fields: DisclosureField[];
  ownerPrincipal: string;
  createdAt: Date;
  expiresAt: Date;
}
