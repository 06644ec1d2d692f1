import { DisclosureField, Intent, VerifyInput } from '../../../domain/identity/schema.ts';
import {
  CapabilityCard,
  Check,
  Claim,
  CreateCardInput,
  CreateClaimInput,
  type CreateDisclosureInput,
  Disclosure,
  DisclosureLink,
  DomainChallenge,
  Identity,
  RegistrationStatus,
  Reputation,
  UpdateCardInput,
  UpdateProfileInput,
  VerifiedDomain,
  VerifyResult,
} from '../../../domain/identity/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { graphqlEnum, IdentityVerdictEnum, NetworkEnum } from '../enums.ts';
import { AgentRef } from './agents.ts';
import { EventPageRef } from './events.ts';
import { given, toDomainInput, type Assert, type SameKeys } from './common.ts';

// DECISIONS "Identity": the same procedures as REST (ctx.api.identity.*). An agent's identity is the nested
// field `agent { identity { … } }`; any agent of the network is read through `resolveIdentity`.

const ProfileRef = builder.objectRef<Identity['profile']>('IdentityProfile').implement({
  extensions: fromZod(Identity.shape.profile),
  fields: (t) => ({
    handle: t.exposeString('handle', { nullable: true }),
    displayName: t.exposeString('display_name', { nullable: true }),
    description: t.exposeString('description', { nullable: true }),
    image: t.exposeString('image', { nullable: true }),
    capabilities: t.exposeStringList('capabilities'),
    updatedAt: t.exposeString('updated_at', { nullable: true }),
  }),
});

const VerifiedDomainRef = builder.objectRef<VerifiedDomain>('VerifiedDomain').implement({
  extensions: fromZod(VerifiedDomain),
  fields: (t) => ({ domain: t.exposeString('domain'), verifiedAt: t.exposeString('verified_at') }),
});

const VolumeRef = builder.objectRef<Reputation['volume'][number]>('ReputationVolume').implement({
  extensions: fromZod(Reputation.shape.volume.element),
  description: 'Settled paid calls in one currency; amounts are atomic decimal strings.',
  fields: (t) => ({
    currency: t.exposeString('currency'),
    asset: t.exposeString('asset'),
    amountAtomic: t.exposeString('amount_atomic'),
    calls: t.exposeInt('calls'),
  }),
});

const ReputationRef = builder.objectRef<Reputation>('Reputation').implement({
  extensions: fromZod(Reputation),
  description: 'From the agent’s earn receipts of settled paid calls.',
  fields: (t) => ({
    settledCalls: t.exposeInt('settled_calls'),
    rating: t.exposeFloat('rating', { nullable: true, description: '0–5: 5 × the share of settled calls answered 2xx' }),
    volume: t.expose('volume', { type: [VolumeRef] }),
    lastSettledAt: t.exposeString('last_settled_at', { nullable: true }),
  }),
});

const ClaimRef = builder.objectRef<Claim>('IdentityClaim').implement({
  extensions: fromZod(Claim),
  fields: (t) => ({
    id: t.exposeString('id'),
    mint: t.exposeString('mint'),
    type: t.exposeString('type'),
    statement: t.exposeString('statement'),
    evidenceUrl: t.exposeString('evidence_url', { nullable: true }),
    public: t.exposeBoolean('public'),
    createdAt: t.exposeString('created_at'),
    revokedAt: t.exposeString('revoked_at', { nullable: true }),
  }),
});

const CapabilityCardRef = builder.objectRef<CapabilityCard>('CapabilityCard').implement({
  extensions: fromZod(CapabilityCard),
  description: 'What an agent says it can do; one card per capability name.',
  fields: (t) => ({
    id: t.exposeString('id'),
    mint: t.exposeString('mint'),
    capability: t.exposeString('capability'),
    title: t.exposeString('title', { nullable: true }),
    description: t.exposeString('description', { nullable: true }),
    endpoint: t.exposeString('endpoint', { nullable: true }),
    tags: t.exposeStringList('tags'),
    public: t.exposeBoolean('public'),
    createdAt: t.exposeString('created_at'),
    updatedAt: t.exposeString('updated_at'),
  }),
});

const RegistrationStatusRef = builder.objectRef<RegistrationStatus>('RegistrationStatus').implement({
  extensions: fromZod(RegistrationStatus),
  description: 'The agent’s registration document read back from its uri (resolve and verify).',
  fields: (t) => ({
    uri: t.exposeString('uri', { nullable: true }),
    hosted: t.exposeBoolean('hosted'),
    ok: t.exposeBoolean('ok'),
    detail: t.exposeString('detail'),
  }),
});

export const IdentityRef = builder.objectRef<Identity>('Identity').implement({
  extensions: fromZod(Identity),
  description: 'GET /v1/identity/{mint}: an agent’s public identity.',
  fields: (t) => ({
    mint: t.exposeString('mint'),
    network: t.expose('network', { type: NetworkEnum }),
    owner: t.exposeString('owner'),
    name: t.exposeString('name', { nullable: true }),
    profile: t.expose('profile', { type: ProfileRef }),
    domains: t.expose('domains', { type: [VerifiedDomainRef] }),
    claims: t.expose('claims', { type: [ClaimRef], description: 'public claims not revoked' }),
    capabilityCards: t.expose('capability_cards', { type: [CapabilityCardRef], description: 'public capability cards' }),
    reputation: t.expose('reputation', { type: ReputationRef }),
    registration: t.expose('registration', {
      type: RegistrationStatusRef,
      nullable: true,
      description: 'read back by resolveIdentity and verifyIdentity; null elsewhere',
    }),
  }),
});

const CheckRef = builder.objectRef<Check>('IdentityCheck').implement({
  extensions: fromZod(Check),
  fields: (t) => ({ name: t.exposeString('name'), ok: t.exposeBoolean('ok'), detail: t.exposeString('detail') }),
});

const VerdictEnum = IdentityVerdictEnum;

const VerifyResultRef = builder.objectRef<VerifyResult>('IdentityVerifyResult').implement({
  extensions: fromZod(VerifyResult),
  fields: (t) => ({
    verdict: t.expose('verdict', { type: VerdictEnum }),
    score: t.exposeInt('score'),
    checks: t.expose('checks', { type: [CheckRef] }),
    profile: t.expose('profile', { type: IdentityRef, nullable: true }),
  }),
});

const DomainDocumentRef = builder.objectRef<DomainChallenge['document']>('DomainDocument').implement({
  extensions: fromZod(DomainChallenge.shape.document),
  fields: (t) => ({ mint: t.exposeString('mint'), network: t.expose('network', { type: NetworkEnum }), token: t.exposeString('token') }),
});

const DomainChallengeRef = builder.objectRef<DomainChallenge>('DomainChallenge').implement({
  extensions: fromZod(DomainChallenge),
  description: 'Serve `document` as JSON at `url`, then verifyIdentityDomain.',
  fields: (t) => ({
    domain: t.exposeString('domain'),
    token: t.exposeString('token'),
    url: t.exposeString('url'),
    document: t.expose('document', { type: DomainDocumentRef }),
    verifiedAt: t.exposeString('verified_at', { nullable: true }),
  }),
});

const DisclosureFieldEnum = graphqlEnum('DisclosureField', DisclosureField);

const DisclosureLinkRef = builder.objectRef<DisclosureLink>('DisclosureLink').implement({
  extensions: fromZod(DisclosureLink),
  description: 'Shown once: the store keeps the token’s SHA-256 only.',
  fields: (t) => ({
    token: t.exposeString('token'),
    url: t.exposeString('url'),
    mint: t.exposeString('mint'),
    fields: t.expose('fields', { type: [DisclosureFieldEnum] }),
    expiresAt: t.exposeString('expires_at'),
  }),
});

const DisclosureRef = builder.objectRef<Disclosure>('Disclosure').implement({
  extensions: fromZod(Disclosure),
  description: 'GET /v1/identity/disclosures/{token}: the fields the link names, nothing else.',
  fields: (t) => ({
    mint: t.exposeString('mint'),
    network: t.expose('network', { type: NetworkEnum }),
    fields: t.expose('fields', { type: [DisclosureFieldEnum] }),
    expiresAt: t.exposeString('expires_at'),
    profile: t.expose('profile', { type: ProfileRef, nullable: true }),
    domains: t.expose('domains', { type: [VerifiedDomainRef], nullable: true }),
    claims: t.expose('claims', { type: [ClaimRef], nullable: true }),
    privateClaims: t.expose('private_claims', { type: [ClaimRef], nullable: true }),
    reputation: t.expose('reputation', { type: ReputationRef, nullable: true }),
  }),
});

builder.objectField(IdentityRef, 'history', (t) =>
  t.field({
    type: EventPageRef,
    nullable: true,
    description: 'GET /v1/identity/{mint}/history (owner): the agent’s identity.* events, newest first',
    args: { first: t.arg.int(), after: t.arg.string() },
    resolve: (identity, args, ctx) => ctx.api.identity.history({ mint: identity.mint, limit: given(args.first), cursor: given(args.after) }),
  }),
);

builder.objectField(IdentityRef, 'allCapabilityCards', (t) =>
  t.field({
    type: [CapabilityCardRef],
    nullable: true,
    description: 'GET /v1/identity/{mint}/capability-cards (owner): private cards too',
    resolve: async (identity, _args, ctx) => (await ctx.api.identity.listCards({ mint: identity.mint })).data,
  }),
);

builder.objectField(AgentRef, 'registration', (t) =>
  t.field({
    type: 'JSON',
    nullable: true,
    description: 'GET /v1/agents/{mint}/registration.json: the registration-v1 document',
    resolve: (agent, _args, ctx) => ctx.api.identity.registration({ mint: agent.mint, network: agent.network }),
  }),
);

builder.objectField(AgentRef, 'identity', (t) =>
  t.field({
    type: IdentityRef,
    nullable: true,
    description: 'GET /v1/identity/{mint}',
    resolve: (agent, _args, ctx) => ctx.api.identity.get({ mint: agent.mint }),
  }),
);

const ProfileInputRef = builder.inputType('IdentityProfileInput', {
  extensions: fromZod(UpdateProfileInput),
  fields: (t) => ({
    mint: t.string({ required: true }),
    handle: t.string({ required: true }),
    displayName: t.string(),
    description: t.string(),
    image: t.string(),
    capabilities: t.stringList(),
  }),
});
export type ProfileInputInSync = Assert<SameKeys<typeof ProfileInputRef.$inferInput, UpdateProfileInput>>;

const ClaimInputRef = builder.inputType('IdentityClaimInput', {
  extensions: fromZod(CreateClaimInput),
  fields: (t) => ({
    mint: t.string({ required: true }),
    type: t.string({ required: true }),
    statement: t.string({ required: true }),
    evidenceUrl: t.string(),
    public: t.boolean(),
  }),
});
export type ClaimInputInSync = Assert<SameKeys<typeof ClaimInputRef.$inferInput, CreateClaimInput>>;

const CardInputRef = builder.inputType('CapabilityCardInput', {
  extensions: fromZod(CreateCardInput),
  fields: (t) => ({
    mint: t.string({ required: true }),
    capability: t.string({ required: true }),
    title: t.string(),
    description: t.string(),
    endpoint: t.string(),
    tags: t.stringList(),
    public: t.boolean(),
  }),
});
export type CardInputInSync = Assert<SameKeys<typeof CardInputRef.$inferInput, CreateCardInput>>;

const CardUpdateRef = builder.inputType('CapabilityCardUpdate', {
  extensions: fromZod(UpdateCardInput),
  description: 'The fields given change; null clears title, description or endpoint.',
  fields: (t) => ({
    mint: t.string({ required: true }),
    id: t.string({ required: true }),
    title: t.string(),
    description: t.string(),
    endpoint: t.string(),
    tags: t.stringList(),
    public: t.boolean(),
  }),
});
export type CardUpdateInSync = Assert<SameKeys<typeof CardUpdateRef.$inferInput, UpdateCardInput>>;

const IntentEnum = graphqlEnum('IdentityIntent', Intent);

const ThresholdsInputRef = builder.inputType('IdentityThresholdsInput', {
  extensions: fromZod(VerifyInput.shape.thresholds),
  fields: (t) => ({ minRating: t.float(), requireVerifiedDomain: t.boolean(), minSettledCalls: t.int() }),
});

builder.queryFields((t) => ({
  agentRegistration: t.field({
    extensions: procedure('identity.registration'),
    type: 'JSON',
    nullable: true,
    description: 'GET /v1/agents/{mint}/registration.json (public): the registration-v1 document',
    args: { mint: t.arg.string({ required: true }), network: t.arg({ type: NetworkEnum }) },
    resolve: (_root, args, ctx) => ctx.api.identity.registration({ mint: args.mint, network: given(args.network) }),
  }),
  capabilityCard: t.field({
    extensions: procedure('identity.getCard'),
    type: CapabilityCardRef,
    nullable: true,
    description: 'GET /v1/identity/{mint}/capability-cards/{id} (owner)',
    args: { mint: t.arg.string({ required: true }), id: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.identity.getCard({ mint: args.mint, id: args.id }),
  }),
  identityDisclosure: t.field({
    extensions: procedure('identity.disclosure'),
    type: DisclosureRef,
    nullable: true,
    description: 'GET /v1/identity/disclosures/{token}',
    args: { token: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.identity.disclosure({ token: args.token }),
  }),
  resolveIdentity: t.field({
    extensions: procedure('identity.resolve'),
    type: IdentityRef,
    nullable: true,
    description: 'GET /v1/identity/resolve: exactly one of mint, handle, domain',
    args: { mint: t.arg.string(), handle: t.arg.string(), domain: t.arg.string() },
    resolve: (_root, args, ctx) => ctx.api.identity.resolve({ mint: given(args.mint), handle: given(args.handle), domain: given(args.domain) }),
  }),
  verifyIdentity: t.field({
    extensions: procedure('identity.verify'),
    type: VerifyResultRef,
    nullable: true,
    description: 'POST /v1/identity/verify',
    args: {
      mint: t.arg.string(),
      handle: t.arg.string(),
      domain: t.arg.string(),
      intent: t.arg({ type: IntentEnum }),
      capability: t.arg.string(),
      thresholds: t.arg({ type: ThresholdsInputRef }),
    },
    resolve: (_root, args, ctx) =>
      ctx.api.identity.verify({
        mint: given(args.mint),
        handle: given(args.handle),
        domain: given(args.domain),
        intent: given(args.intent),
        capability: given(args.capability),
        thresholds: args.thresholds
          ? {
              min_rating: given(args.thresholds.minRating),
              require_verified_domain: given(args.thresholds.requireVerifiedDomain),
              min_settled_calls: given(args.thresholds.minSettledCalls),
            }
          : undefined,
      }),
  }),
}));

builder.mutationFields((t) => ({
  createCapabilityCard: t.field({
    extensions: procedure('identity.createCard'),
    type: CapabilityCardRef,
    nullable: true,
    description: 'POST /v1/identity/{mint}/capability-cards',
    args: { input: t.arg({ type: CardInputRef, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.api.identity.createCard(toDomainInput(input) as CreateCardInput),
  }),
  updateCapabilityCard: t.field({
    extensions: procedure('identity.updateCard'),
    type: CapabilityCardRef,
    nullable: true,
    description: 'PATCH /v1/identity/{mint}/capability-cards/{id}',
    args: { input: t.arg({ type: CardUpdateRef, required: true }) },
    resolve: (_root, { input }, ctx) =>
      ctx.api.identity.updateCard(toDomainInput(input, { keepNull: ['title', 'description', 'endpoint'] }) as UpdateCardInput),
  }),
  deleteCapabilityCard: t.boolean({
    extensions: procedure('identity.deleteCard'),
    description: 'DELETE /v1/identity/{mint}/capability-cards/{id}',
    args: { mint: t.arg.string({ required: true }), id: t.arg.string({ required: true }) },
    resolve: async (_root, args, ctx) => {
      await ctx.api.identity.deleteCard({ mint: args.mint, id: args.id });
      return true;
    },
  }),
  setIdentityProfile: t.field({
    extensions: procedure('identity.putProfile'),
    type: IdentityRef,
    nullable: true,
    description: 'PUT /v1/identity/{mint}/profile',
    args: { input: t.arg({ type: ProfileInputRef, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.api.identity.putProfile(toDomainInput(input) as UpdateProfileInput),
  }),
  addIdentityDomain: t.field({
    extensions: procedure('identity.addDomain'),
    type: DomainChallengeRef,
    nullable: true,
    description: 'POST /v1/identity/{mint}/domains',
    args: { mint: t.arg.string({ required: true }), domain: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.identity.addDomain({ mint: args.mint, domain: args.domain }),
  }),
  verifyIdentityDomain: t.field({
    extensions: procedure('identity.verifyDomain'),
    type: DomainChallengeRef,
    nullable: true,
    description: 'POST /v1/identity/{mint}/domains/{domain}/verify',
    args: { mint: t.arg.string({ required: true }), domain: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.identity.verifyDomain({ mint: args.mint, domain: args.domain }),
  }),
  createIdentityClaim: t.field({
    extensions: procedure('identity.createClaim'),
    type: ClaimRef,
    nullable: true,
    description: 'POST /v1/identity/{mint}/claims',
    args: { input: t.arg({ type: ClaimInputRef, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.api.identity.createClaim(toDomainInput(input) as CreateClaimInput),
  }),
  revokeIdentityClaim: t.field({
    extensions: procedure('identity.revokeClaim'),
    type: ClaimRef,
    nullable: true,
    description: 'POST /v1/identity/{mint}/claims/{id}/revoke',
    args: { mint: t.arg.string({ required: true }), id: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => ctx.api.identity.revokeClaim({ mint: args.mint, id: args.id }),
  }),
  createIdentityDisclosure: t.field({
    extensions: procedure('identity.createDisclosure'),
    type: DisclosureLinkRef,
    nullable: true,
    description: 'POST /v1/identity/{mint}/disclosures',
    args: {
      mint: t.arg.string({ required: true }),
      fields: t.arg({ type: [DisclosureFieldEnum], required: true }),
      expiresIn: t.arg.int({ required: true }),
    },
    resolve: (_root, args, ctx) =>
      ctx.api.identity.createDisclosure({ mint: args.mint, fields: args.fields, expires_in: args.expiresIn } satisfies CreateDisclosureInput),
  }),
}));
