import { z } from 'zod';
import { RegistrationInput, RegistrationV1 } from '../../../domain/identity/registration.ts';
import {
  AddDomainInput,
  CapabilityCard,
  CardIdInput,
  CardList,
  CreateCardInput,
  UpdateCardInput,
  Claim,
  ClaimIdInput,
  ClaimList,
  CreateClaimInput,
  CreateDisclosureInput,
  Disclosure,
  DisclosureLink,
  DisclosureTokenInput,
  HistoryInput,
  MintPageInput,
  DomainChallenge,
  DomainInput,
  Identity,
  IdentityMintInput,
  ResolveInput,
  UpdateProfileInput,
  VerifyInput,
  VerifyResult,
} from '../../../domain/identity/schema.ts';
import { EventList } from '../../../domain/events/schema.ts';
import { anonymousProcedure, keyedProcedure, router } from '../init.ts';

// DECISIONS "Identity": reads are open to any key of the network; owner routes need the agent's principal;
// the disclosure link and the registration document are public (no key, counted per client IP).

const tags = ['identity'];

export const identityRouter = router({
  resolve: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/identity/resolve',
        tags,
        summary: 'Resolve an agent by mint, handle or verified domain',
        description: 'The public identity of one agent: profile, verified domains, public capability cards and claims, reputation (DECISIONS "Identity").',
      },
    })
    .input(ResolveInput)
    .output(Identity)
    .query(({ ctx, input }) => ctx.services.identity.resolve(ctx.principal, input)),

  get: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/identity/{mint}',
        tags,
        summary: 'An agent’s public identity',
        description: 'Profile, verified domains, public claims and capability cards, and a reputation summary of its settled paid calls.',
      },
    })
    .input(IdentityMintInput)
    .output(Identity)
    .query(({ ctx, input }) => ctx.services.identity.get(ctx.principal, input.mint)),

  verify: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'POST',
        path: '/v1/identity/verify',
        tags,
        summary: 'Judge an agent before dealing with it',
        description:
          'Named checks (agent_recorded, asset_on_ledger, not_disabled, handle_set, domain_verified, capability_declared, registration, intent, rating, settled_calls) and a verdict: allow, warn or deny.',
      },
    })
    .input(VerifyInput)
    .output(VerifyResult)
    .mutation(({ ctx, input }) => ctx.services.identity.verify(ctx.principal, input)),

  putProfile: keyedProcedure
    .meta({
      openapi: {
        method: 'PUT',
        path: '/v1/identity/{mint}/profile',
        tags,
        summary: 'Set an agent’s public profile (owner)',
        description: 'Sets handle, display name, description, image and capabilities of an agent your key\'s owner_wallet owns (DECISIONS "Identity").',
      },
    })
    .input(UpdateProfileInput)
    .output(Identity)
    .mutation(({ ctx, input }) => ctx.services.identity.putProfile(ctx.principal, input)),

  addDomain: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/identity/{mint}/domains',
        tags,
        summary: 'Claim a domain (owner): answers the token to publish',
        description: 'Serve `document` as JSON at `url` (https://{domain}/.well-known/svc-agent.json), then call …/verify.',
      },
    })
    .input(AddDomainInput)
    .output(DomainChallenge)
    .mutation(({ ctx, input }) => ctx.services.identity.addDomain(ctx.principal, input)),

  verifyDomain: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/identity/{mint}/domains/{domain}/verify',
        tags,
        summary: 'Verify a claimed domain (owner) by fetching its well-known document',
        description: "Fetches https://{domain}/.well-known/svc-agent.json; the domain is verified when it names this agent's mint, network and token.",
      },
    })
    .input(DomainInput)
    .output(DomainChallenge)
    .mutation(({ ctx, input }) => ctx.services.identity.verifyDomain(ctx.principal, input)),

  createClaim: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/identity/{mint}/claims',
        tags,
        summary: 'State a claim about an agent (owner)',
        description: 'A revocable statement about an agent you own; public claims show in its identity, others only through disclosure links.',
      },
    })
    .input(CreateClaimInput)
    .output(Claim)
    .mutation(({ ctx, input }) => ctx.services.identity.createClaim(ctx.principal, input)),

  listClaims: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/identity/{mint}/claims',
        tags,
        summary: 'Every claim of an agent, private and revoked ones too (owner)',
        description: 'Oldest first, in pages of the list envelope: pass `next_cursor` as `cursor` while `has_more` is true.',
      },
    })
    .input(MintPageInput)
    .output(ClaimList)
    .query(({ ctx, input }) => ctx.services.identity.listClaims(ctx.principal, input)),

  revokeClaim: keyedProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/v1/identity/{mint}/claims/{id}/revoke',
        tags,
        summary: 'Revoke a claim (owner); it is kept with revoked_at',
        description: 'The claim stays readable with revoked_at set; it no longer counts.',
      },
    })
    .input(ClaimIdInput)
    .output(Claim)
    .mutation(({ ctx, input }) => ctx.services.identity.revokeClaim(ctx.principal, input)),

  createDisclosure: keyedProcedure
    .meta({
      secretFields: ['token', 'url'],
      openapi: {
        method: 'POST',
        path: '/v1/identity/{mint}/disclosures',
        tags,
        summary: 'A link revealing chosen fields until it expires (owner); the token is shown once',
        description: 'A link that shows the chosen parts of the agent\'s identity to whoever holds it, until expires_in runs out (DECISIONS "Identity").',
      },
    })
    .input(CreateDisclosureInput)
    .output(DisclosureLink)
    .mutation(({ ctx, input }) => ctx.services.identity.createDisclosure(ctx.principal, input)),

  disclosure: anonymousProcedure
    .meta({
      bucket: 'public',
      errors: ['disclosure_expired'],
      openapi: {
        method: 'GET',
        path: '/v1/identity/disclosures/{token}',
        tags,
        protect: false,
        summary: 'Read a disclosure link (public: the link is the credential; no key); expired: 410',
        description: 'The parts of an identity a disclosure link reveals; needs no key. An expired link answers 410.',
      },
    })
    .input(DisclosureTokenInput)
    .output(Disclosure)
    .query(({ ctx, input }) => ctx.services.identity.readDisclosure(input)),

  registration: anonymousProcedure
    .meta({
      bucket: 'public',
      openapi: {
        method: 'GET',
        path: '/v1/agents/{mint}/registration.json',
        tags,
        protect: false,
        summary: 'The agent’s registration-v1 document (public; ?network=chain-devnet for a devnet agent)',
        description:
          'fee-facilitator-mpp-tools §2.7: its paid endpoints as x402 services, verified domains, the receipts service and its Metaplex Agent Registry registration.',
      },
    })
    .input(RegistrationInput)
    .output(RegistrationV1)
    .query(({ ctx, input }) => ctx.services.identity.registration(input)),

  createCard: keyedProcedure
    .meta({
      status: 201,
      openapi: {
        method: 'POST',
        path: '/v1/identity/{mint}/capability-cards',
        tags,
        summary: 'Declare a capability card (owner); one per capability',
        description: 'Describes a capability the agent offers (title, endpoint, tags); public cards show in its identity and in discovery.',
      },
    })
    .input(CreateCardInput)
    .output(CapabilityCard)
    .mutation(({ ctx, input }) => ctx.services.identity.createCard(ctx.principal, input)),

  listCards: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/identity/{mint}/capability-cards',
        tags,
        summary: 'Every capability card of an agent, private ones too (owner)',
        description: 'At most 64 cards per agent, so always one complete page of the list envelope (`has_more: false`, `next_cursor: null`).',
      },
    })
    .input(IdentityMintInput)
    .output(CardList)
    .query(({ ctx, input }) => ctx.services.identity.listCards(ctx.principal, input.mint)),

  getCard: keyedProcedure
    .meta({
      bucket: 'agents.read',
      openapi: {
        method: 'GET',
        path: '/v1/identity/{mint}/capability-cards/{id}',
        tags,
        summary: 'One capability card (owner)',
        description: 'One card of an agent you own, public or not.',
      },
    })
    .input(CardIdInput)
    .output(CapabilityCard)
    .query(({ ctx, input }) => ctx.services.identity.getCard(ctx.principal, input)),

  updateCard: keyedProcedure
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/v1/identity/{mint}/capability-cards/{id}',
        tags,
        summary: 'Change a capability card (owner); null clears a field',
        description: 'The fields given change; null clears title, description or endpoint.',
      },
    })
    .input(UpdateCardInput)
    .output(CapabilityCard)
    .mutation(({ ctx, input }) => ctx.services.identity.updateCard(ctx.principal, input)),

  deleteCard: keyedProcedure
    .meta({
      status: 204,
      openapi: {
        method: 'DELETE',
        path: '/v1/identity/{mint}/capability-cards/{id}',
        tags,
        summary: 'Delete a capability card (owner)',
        description: 'Answers 204.',
      },
    })
    .input(CardIdInput)
    .output(z.void())
    .mutation(({ ctx, input }) => ctx.services.identity.deleteCard(ctx.principal, input)),

  history: keyedProcedure
    .meta({
      bucket: 'events.read',
      openapi: {
        method: 'GET',
        path: '/v1/identity/{mint}/history',
        tags,
        summary: 'The agent’s identity events, newest first (owner)',
        description: 'The events of an agent you own that make up its operator history, newest first (DECISIONS "Identity").',
      },
    })
    .input(HistoryInput)
    .output(EventList)
    .query(({ ctx, input }) => ctx.services.identity.history(ctx.principal, input)),
});
