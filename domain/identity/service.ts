import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { shareUrl } from '../payment-links/service.ts';
import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import type { Network } from '../shared/network.ts';
import { iso } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Caller } from '../access/ownership.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { AgentService } from '../agents/service.ts';
import { decodeCoreAsset, type CoreAsset } from '../agents/asset.ts';
import { newEvent } from '../events/kinds.ts';
import type { EventService } from '../events/service.ts';
import type { Event } from '../events/schema.ts';
import { bounded, decodeCursor, encodeCursor, toPage, type Page } from '../shared/pagination.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Store } from '../ports/store.ts';
import { readLedger } from '../treasury/balances.ts';
import { judge, type VerifyFacts } from './checks.ts';
import { buildRegistration, isOwnRegistrationUrl, RegistrationInput, registrationUrl, RegistrationV1, type RegistrationFacts } from './registration.ts';
import {
  AddDomainInput,
  CardIdInput,
  ClaimIdInput,
  CreateCardInput,
  UpdateCardInput,
  CreateClaimInput,
  CreateDisclosureInput,
  DisclosureTokenInput,
  HistoryInput,
  MintPageInput,
  DomainInput,
  DomainName,
  Handle,
  ResolveInput,
  UpdateProfileInput,
  VerifyInput,
  WellKnownDocument,
  type CapabilityCard,
  type CardList,
  type CardRecord,
  type Claim,
  type Disclosure,
  type RegistrationStatus,
  type DisclosureLink,
  type ClaimList,
  type ClaimRecord,
  type DomainChallenge,
  type DomainRecord,
  type Identity,
  type ProfileRecord,
  type Reputation,
  type ReputationRow,
  type VerifyResult,
} from './schema.ts';

// DECISIONS "Identity". Owner routes (profile, domains) need the caller's principal to own the agent
// (another principal: 404 agent_not_found, as every owned resource). Reads (get, resolve, verify) are public on the
// network: any valid key of the network sees any agent's identity, which is what identity is for.

/** The domain check's fetch: small document, short wait (the outbound adapter enforces both). */
const WELL_KNOWN_TIMEOUT_MS = 5_000;
const WELL_KNOWN_MAX_BYTES = 16 * 1024;
export const WELL_KNOWN_PATH = '/.well-known/svc-agent.json';
/** a claims page's cursor: the last claim returned, in the list's order (created_at, id) */
const ClaimCursor = z.object({ at: z.string().datetime(), id: z.string() });
/** Capability cards an agent may have (its lists answer them all). */
export const MAX_CARDS = 64;
/** Reading a registration document back (resolve, verify). */
const REGISTRATION_TIMEOUT_MS = 5_000;
const REGISTRATION_MAX_BYTES = 64 * 1024;

export interface IdentityServiceDeps {
  store: Store;
  clock: Clock;
  agents: AgentService;
  ledgers: Partial<Record<Network, Ledger>>;
  outbound: OutboundHttp;
  /** the gateway's public base URL (disclosure links), e.g. "https://gw.example" */
  baseUrl: string;
  /** the event reads (history) */
  events: EventService;
}

export class IdentityService {
  constructor(private readonly deps: IdentityServiceDeps) {}

  /**
   * PUT /v1/identity/{mint}/profile: sets the whole profile. Handles are unique per network whatever their case
   * (409 conflict naming the handle), reserved words are refused (400 invalid_request); event identity.profile.updated.
   */
  async putProfile(caller: Caller, input: UpdateProfileInput): Promise<Identity> {
    const parsed = parseInput(UpdateProfileInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    const owner = agent.ownerPrincipal ?? caller.owner;
    await this.deps.store.transaction(async (tx) => {
      const previous = await tx.identity.getProfile(agent.network, agent.mint);
      const taken = await tx.identity.findByHandle(agent.network, parsed.handle);
      if (taken && taken.mint !== agent.mint) {
        throw new DomainError('conflict', `The handle "${parsed.handle}" is taken on ${agent.network} (handles are compared case-insensitively).`, {
          path: 'handle',
          handle: parsed.handle,
        });
      }
      const record: ProfileRecord = {
        network: agent.network,
        mint: agent.mint,
        handle: parsed.handle,
        displayName: parsed.display_name ?? null,
        description: parsed.description ?? null,
        image: parsed.image ?? null,
        capabilities: [...new Set(parsed.capabilities ?? [])],
        ownerPrincipal: owner,
        updatedAt: now,
      };
      await tx.identity.putProfile(record);
      await tx.events.append(
        newEvent(
          'identity.profile.updated',
          {
            id: newId(now.getTime()),
            phase: 'confirmed',
            network: agent.network,
            agentAsset: agent.mint,
            owner: agent.ownerPrincipal,
            createdAt: now,
            confirmedAt: now,
          },
          {
            mint: agent.mint,
            handle: record.handle,
            previous_handle: previous?.handle ?? null,
            display_name: record.displayName,
            capabilities: record.capabilities,
          },
        ),
      );
    });
    return this.identityOf(agent);
  }

  /** GET /v1/identity/{mint}: any agent of the caller's network (404 agent_not_found when none). */
  async get(caller: Caller, mint: string): Promise<Identity> {
    return this.identityOf(await this.deps.agents.require(caller.network, mint));
  }

  /** GET /v1/identity/resolve?mint=|handle=|domain=: exactly one key; 404 agent_not_found when nothing matches. */
  async resolve(caller: Caller, query: ResolveInput): Promise<Identity> {
    const q = parseInput(ResolveInput, query);
    const agent = await this.find(caller.network, q);
    if (!agent) throw new DomainError('agent_not_found', `No agent on ${caller.network} matches ${describeQuery(q)}.`, { network: caller.network, ...q });
    // The live asset's uri is read back; a ledger that does not answer leaves the recorded uri (resolve still answers).
    const account = await readLedger(this.deps.ledgers, agent.network, (ledger) => ledger.getAccount(agent.mint)).catch((e: unknown) => {
      if (e instanceof DomainError && e.code === 'rpc_unavailable') return null;
      throw e;
    });
    return this.identityOf(agent, { readBack: account ? decodeCoreAsset(account) : null });
  }

  /** POST /v1/identity/verify: the named checks of domain/identity/checks.ts and their verdict; nothing matched → deny. */
  async verify(caller: Caller, input: VerifyInput): Promise<VerifyResult> {
    const q = parseInput(VerifyInput, input);
    const agent = await this.find(caller.network, q);
    const facts: VerifyFacts = { identity: null, asset: 'absent', paidEndpoints: 0 };
    if (agent) {
      const account = await readLedger(this.deps.ledgers, agent.network, (ledger) => ledger.getAccount(agent.mint));
      const core = account ? decodeCoreAsset(account) : null;
      facts.asset = account === null ? 'absent' : core ? 'live' : 'not_core';
      facts.identity = await this.identityOf(agent, { readBack: core });
      facts.paidEndpoints = (await this.paidEndpoints(agent)).length;
    }
    return { ...judge(facts, q), profile: facts.identity };
  }

  /**
   * POST /v1/identity/{mint}/domains: a claim and its token. The agent proves the domain by serving
   * `{ mint, network, token }` at https://{domain}/.well-known/svc-agent.json. The token is part of the proof (decided
   * here): a document left behind by an earlier claim, or copied from another gateway, does not verify a new claim.
   * Claiming the same domain again answers the same token.
   */
  async addDomain(caller: Caller, input: AddDomainInput): Promise<DomainChallenge> {
    const parsed = parseInput(AddDomainInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const record = await this.deps.store.identity.addDomain({
      network: agent.network,
      mint: agent.mint,
      domain: parsed.domain,
      token: `svc_dv_${randomBytes(18).toString('base64url')}`,
      ownerPrincipal: agent.ownerPrincipal ?? caller.owner,
      createdAt: this.deps.clock.now(),
      verifiedAt: null,
    });
    return challenge(record);
  }

  /**
   * POST /v1/identity/{mint}/domains/{domain}/verify: fetches the well-known document through the guarded outbound
   * port (https, public addresses unless allow-listed, 5 s and 16 KiB caps, no redirects) and checks mint, network and
   * token. A failure says why (400 invalid_request with details.reason); success records verified_at and appends
   * identity.domain.verified once.
   */
  async verifyDomain(caller: Caller, input: DomainInput): Promise<DomainChallenge> {
    const parsed = parseInput(DomainInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const claim = await this.deps.store.identity.getDomain(agent.network, agent.mint, parsed.domain);
    if (!claim)
      throw new DomainError('not_found', `Agent ${agent.mint} has not claimed ${parsed.domain}; POST /v1/identity/${agent.mint}/domains first.`, {
        domain: parsed.domain,
      });
    if (claim.verifiedAt) return challenge(claim);
    const url = wellKnownUrl(claim.domain);
    const refused = (reason: string, message: string) =>
      new DomainError('invalid_request', `Domain ${claim.domain} is not verified: ${message}`, { domain: claim.domain, url, reason });
    const answer = await this.deps.outbound.request({
      url,
      method: 'GET',
      headers: { accept: 'application/json' },
      timeoutMs: WELL_KNOWN_TIMEOUT_MS,
      maxResponseBytes: WELL_KNOWN_MAX_BYTES,
    });
    if (!answer.ok) throw refused(answer.reason, answer.message);
    if (answer.status !== 200) throw refused('status', `${url} answered HTTP ${answer.status}`);
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(answer.body));
    } catch {
      throw refused('not_json', `${url} did not answer JSON`);
    }
    const doc = WellKnownDocument.safeParse(json);
    if (!doc.success) throw refused('document_invalid', `${url} must answer { "mint", "network", "token" } as strings`);
    if (doc.data.mint !== agent.mint) throw refused('mint_mismatch', `the document names mint ${doc.data.mint}, not ${agent.mint}`);
    if (doc.data.network !== agent.network) throw refused('network_mismatch', `the document names network ${doc.data.network}, not ${agent.network}`);
    if (doc.data.token !== claim.token) throw refused('token_mismatch', 'the document’s token is not this claim’s token');
    const now = this.deps.clock.now();
    await this.deps.store.transaction(async (tx) => {
      const current = await tx.identity.getDomain(agent.network, agent.mint, claim.domain);
      if (current?.verifiedAt) return;
      if (!(await tx.identity.markDomainVerified(agent.network, agent.mint, claim.domain, now))) {
        throw new DomainError('conflict', `The domain ${claim.domain} is verified by another agent on ${agent.network}.`, {
          path: 'domain',
          domain: claim.domain,
        });
      }
      await tx.events.append(
        newEvent(
          'identity.domain.verified',
          {
            id: newId(now.getTime()),
            phase: 'confirmed',
            network: agent.network,
            agentAsset: agent.mint,
            owner: agent.ownerPrincipal,
            createdAt: now,
            confirmedAt: now,
          },
          { mint: agent.mint, domain: claim.domain, url },
        ),
      );
    });
    return challenge((await this.deps.store.identity.getDomain(agent.network, agent.mint, claim.domain))!);
  }

  /** POST /v1/identity/{mint}/claims (owner): event identity.claim.created. */
  async createClaim(caller: Caller, input: CreateClaimInput): Promise<Claim> {
    const parsed = parseInput(CreateClaimInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    const record: ClaimRecord = {
      network: agent.network,
      id: `clm_${newId(now.getTime())}`,
      mint: agent.mint,
      type: parsed.type,
      statement: parsed.statement,
      evidenceUrl: parsed.evidence_url ?? null,
      public: parsed.public ?? true,
      ownerPrincipal: agent.ownerPrincipal ?? caller.owner,
      createdAt: now,
      revokedAt: null,
    };
    await this.deps.store.transaction(async (tx) => {
      await tx.identity.insertClaim(record);
      await tx.events.append(
        newEvent(
          'identity.claim.created',
          {
            id: newId(now.getTime()),
            phase: 'confirmed',
            network: agent.network,
            agentAsset: agent.mint,
            owner: agent.ownerPrincipal,
            createdAt: now,
            confirmedAt: now,
          },
          { mint: agent.mint, claim_id: record.id, type: record.type, public: record.public },
        ),
      );
    });
    return toClaim(record);
  }

  /** POST /v1/identity/{mint}/claims/{id}/revoke (owner): kept with revoked_at; revoking again answers it unchanged. */
  async revokeClaim(caller: Caller, input: ClaimIdInput): Promise<Claim> {
    const parsed = parseInput(ClaimIdInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    const claim = await this.deps.store.transaction(async (tx) => {
      const current = await tx.identity.getClaim(agent.network, agent.mint, parsed.id);
      if (!current) throw new DomainError('not_found', `Agent ${agent.mint} has no claim ${parsed.id}.`, { id: parsed.id });
      if (current.revokedAt) return current;
      await tx.identity.revokeClaim(agent.network, agent.mint, parsed.id, now);
      await tx.events.append(
        newEvent(
          'identity.claim.revoked',
          {
            id: newId(now.getTime()),
            phase: 'confirmed',
            network: agent.network,
            agentAsset: agent.mint,
            owner: agent.ownerPrincipal,
            createdAt: now,
            confirmedAt: now,
          },
          { mint: agent.mint, claim_id: current.id, type: current.type },
        ),
      );
      return { ...current, revokedAt: now };
    });
    return toClaim(claim);
  }

  /**
   * GET /v1/identity/{mint}/claims (owner): every claim, private and revoked ones too, oldest first, in pages of the
   * list envelope (DECISIONS "Wire conventions": claims have no cap).
   */
  async listClaims(caller: Caller, input: MintPageInput): Promise<ClaimList> {
    const parsed = parseInput(MintPageInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const after = parsed.cursor ? decodeCursor(ClaimCursor, parsed.cursor) : undefined;
    const rows = await this.deps.store.identity.listClaims(agent.network, agent.mint, {
      publicOnly: false,
      limit: parsed.limit + 1,
      ...(after ? { after: { createdAt: new Date(after.at), id: after.id } } : {}),
    });
    const page = toPage(
      rows,
      parsed.limit,
      (c) => c,
      (c) => encodeCursor({ at: c.createdAt.toISOString(), id: c.id }),
    );
    // a previous owner's claims are not the agent's now (the cursor still moves past them)
    return { ...page, data: page.data.filter((c) => c.ownerPrincipal === agent.ownerPrincipal).map(toClaim) };
  }

  /**
   * POST /v1/identity/{mint}/disclosures (owner): a link revealing the named fields until it expires. The token is
   * shown once; the store keeps its SHA-256 only.
   */
  async createDisclosure(caller: Caller, input: CreateDisclosureInput): Promise<DisclosureLink> {
    const parsed = parseInput(CreateDisclosureInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    const token = `svc_dl_${randomBytes(24).toString('base64url')}`;
    const fields = [...new Set(parsed.fields)];
    const expiresAt = new Date(now.getTime() + parsed.expires_in * 1000);
    await this.deps.store.identity.insertDisclosure({
      network: agent.network,
      tokenHash: sha256(token),
      mint: agent.mint,
      fields,
      ownerPrincipal: agent.ownerPrincipal ?? caller.owner,
      createdAt: now,
      expiresAt,
    });
    return { token, url: `${this.deps.baseUrl}/v1/identity/disclosures/${token}`, mint: agent.mint, fields, expires_at: iso(expiresAt) };
  }

  /**
   * GET /v1/identity/disclosures/{token}: public (DECISIONS "Identity"): the link is the credential, so it needs no
   * key and names its own network; unknown 404, expired 410.
   */
  async readDisclosure(input: DisclosureTokenInput): Promise<Disclosure> {
    const { token } = parseInput(DisclosureTokenInput, input);
    const d = await this.deps.store.identity.getDisclosure(sha256(token));
    if (!d) throw new DomainError('not_found', 'No disclosure link with this token.');
    if (d.expiresAt.getTime() <= this.deps.clock.now().getTime()) {
      throw new DomainError('disclosure_expired', `This disclosure link expired at ${iso(d.expiresAt)}.`, { expires_at: iso(d.expiresAt) });
    }
    const agent = await this.deps.agents.require(d.network, d.mint);
    // A link made by a former owner of the agent (it was recorded again by another principal) shows nothing of it now.
    if (d.ownerPrincipal !== agent.ownerPrincipal) throw new DomainError('not_found', 'No disclosure link with this token.');
    const identity = await this.identityOf(agent);
    const out: Disclosure = { mint: d.mint, network: d.network, fields: d.fields, expires_at: iso(d.expiresAt) };
    for (const field of d.fields) {
      if (field === 'profile') out.profile = identity.profile;
      else if (field === 'domains') out.domains = identity.domains;
      else if (field === 'claims') out.claims = identity.claims;
      else if (field === 'reputation') out.reputation = identity.reputation;
      else
        out.private_claims = (await this.deps.store.identity.privateClaims(d.network, d.mint))
          .filter((c) => c.ownerPrincipal === agent.ownerPrincipal)
          .map(toClaim);
    }
    return out;
  }

  // ── capability cards (owner CRUD; public cards are in the identity) ───────────────────────────────────────────────

  /**
   * POST /v1/identity/{mint}/capability-cards (owner): one card per capability name (409), at most MAX_CARDS per agent
   * (400); event identity.capability_card.created.
   */
  async createCard(caller: Caller, input: CreateCardInput): Promise<CapabilityCard> {
    const parsed = parseInput(CreateCardInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    const record: CardRecord = {
      network: agent.network,
      id: `cap_${newId(now.getTime())}`,
      mint: agent.mint,
      capability: parsed.capability,
      title: parsed.title ?? null,
      description: parsed.description ?? null,
      endpoint: parsed.endpoint ?? null,
      tags: [...new Set(parsed.tags ?? [])],
      public: parsed.public ?? true,
      ownerPrincipal: agent.ownerPrincipal ?? caller.owner,
      createdAt: now,
      updatedAt: now,
    };
    await this.deps.store.transaction(async (tx) => {
      const held = await tx.identity.listCards(agent.network, agent.mint, { publicOnly: false });
      if (held.filter((c) => c.ownerPrincipal === record.ownerPrincipal).length >= MAX_CARDS) {
        throw new DomainError('invalid_request', `Agent ${agent.mint} has ${MAX_CARDS} capability cards, the most an agent may have; delete one first.`, {
          path: 'capability',
          limit: MAX_CARDS,
        });
      }
      // A former owner's card of this capability is shown to nobody and no longer deletable by anyone: it must not hold
      // the capability's name (unique per agent) against the current owner.
      for (const stale of held.filter((c) => c.capability === record.capability && c.ownerPrincipal !== record.ownerPrincipal)) {
        await tx.identity.deleteCard(stale.network, stale.mint, stale.id);
      }
      await tx.identity.insertCard(record);
      await tx.events.append(
        newEvent('identity.capability_card.created', identityEvent(agent, now), {
          mint: agent.mint,
          card_id: record.id,
          capability: record.capability,
          public: record.public,
        }),
      );
    });
    return toCard(record);
  }

  /** GET /v1/identity/{mint}/capability-cards (owner): every card, private ones too, by capability name. */
  async listCards(caller: Caller, mint: string): Promise<CardList> {
    const agent = await this.deps.agents.requireVisible(caller, mint);
    return bounded((await this.ownCards(agent, { publicOnly: false })).map(toCard));
  }

  /** GET /v1/identity/{mint}/capability-cards/{id} (owner). */
  async getCard(caller: Caller, input: CardIdInput): Promise<CapabilityCard> {
    const parsed = parseInput(CardIdInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const card = await this.deps.store.identity.getCard(agent.network, agent.mint, parsed.id);
    if (!card || card.ownerPrincipal !== agent.ownerPrincipal) throw cardNotFound(agent.mint, parsed.id);
    return toCard(card);
  }

  /** PATCH /v1/identity/{mint}/capability-cards/{id} (owner): the fields given change; event identity.capability_card.updated. */
  async updateCard(caller: Caller, input: UpdateCardInput): Promise<CapabilityCard> {
    const parsed = parseInput(UpdateCardInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    const updated = await this.deps.store.transaction(async (tx) => {
      const current = await tx.identity.getCard(agent.network, agent.mint, parsed.id);
      if (!current || current.ownerPrincipal !== agent.ownerPrincipal) throw cardNotFound(agent.mint, parsed.id);
      const next: CardRecord = {
        ...current,
        title: parsed.title === undefined ? current.title : parsed.title,
        description: parsed.description === undefined ? current.description : parsed.description,
        endpoint: parsed.endpoint === undefined ? current.endpoint : parsed.endpoint,
        tags: parsed.tags === undefined ? current.tags : [...new Set(parsed.tags)],
        public: parsed.public ?? current.public,
        updatedAt: now,
      };
      await tx.identity.updateCard(next);
      await tx.events.append(
        newEvent('identity.capability_card.updated', identityEvent(agent, now), {
          mint: agent.mint,
          card_id: next.id,
          capability: next.capability,
          public: next.public,
        }),
      );
      return next;
    });
    return toCard(updated);
  }

  /** DELETE /v1/identity/{mint}/capability-cards/{id} (owner): event identity.capability_card.deleted. */
  async deleteCard(caller: Caller, input: CardIdInput): Promise<void> {
    const parsed = parseInput(CardIdInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    const now = this.deps.clock.now();
    await this.deps.store.transaction(async (tx) => {
      const current = await tx.identity.getCard(agent.network, agent.mint, parsed.id);
      if (!current || current.ownerPrincipal !== agent.ownerPrincipal) throw cardNotFound(agent.mint, parsed.id);
      await tx.identity.deleteCard(agent.network, agent.mint, parsed.id);
      await tx.events.append(
        newEvent('identity.capability_card.deleted', identityEvent(agent, now), { mint: agent.mint, card_id: current.id, capability: current.capability }),
      );
    });
  }

  // ── registration documents ──────────────────────────────────────────────────────────────────────────────────────

  /**
   * GET /v1/agents/{mint}/registration.json?network=: the agent's registration-v1 document, public (it is what the
   * asset's uri points at). 404 agent_not_found when the network has no such agent.
   */
  async registration(input: RegistrationInput): Promise<RegistrationV1> {
    const parsed = parseInput(RegistrationInput, input);
    return this.registrationOf(await this.deps.agents.require(parsed.network, parsed.mint));
  }

  /** The gateway's URL of an agent's registration document (agents/prepare writes it into a hosted asset). */
  registrationUrl(network: Network, mint: string): string {
    return registrationUrl(this.deps.baseUrl, network, mint);
  }

  private async registrationOf(agent: AgentRecord): Promise<RegistrationV1> {
    const { network, mint } = agent;
    const [profile, domains, cards, links, created] = await Promise.all([
      this.deps.store.identity.getProfile(network, mint),
      this.deps.store.identity.verifiedDomains(network, mint),
      this.ownCards(agent, { publicOnly: true }),
      this.paidEndpoints(agent),
      this.deps.store.events.list(network, { owner: undefined, kinds: ['agent.create'], agent: mint, limit: 1 }),
    ]);
    // what the owner described at agents/prepare (the prepared event's echo), below what its profile says now
    const echo = RegistrationEcho.safeParse((created[0]?.metadata as { echo?: unknown } | undefined)?.echo);
    const described = echo.success ? echo.data : {};
    const facts: RegistrationFacts = {
      network,
      mint,
      name: profile?.displayName ?? agent.name ?? described.name ?? mint,
      description: profile?.description ?? described.description ?? '',
      image: profile?.image ?? '',
      paidEndpoints: links,
      listed: described.services ?? [],
      domains: domains.map((d) => d.domain),
      skills: [...new Set([...cards.map((c) => c.capability), ...(profile?.capabilities ?? [])])].sort(),
      receiptsUrl: `${this.deps.baseUrl}/v1/receipts/${mint}`,
    };
    return buildRegistration(facts);
  }

  /**
   * Reads the agent's registration document back from its uri (the live Core asset's, else the recorded one): the
   * gateway's own is built in place, any other is fetched through the guarded outbound port (https, public addresses
   * unless allow-listed, 5 s, 64 KiB, no redirects) and must be registration-v1 naming this agent when it names any.
   */
  private async readBack(agent: AgentRecord, asset: CoreAsset | null): Promise<RegistrationStatus> {
    const uri = asset?.uri || agent.uri;
    if (!uri) return { uri: null, hosted: false, ok: false, detail: 'the agent has no registration uri' };
    if (isOwnRegistrationUrl(uri, this.deps.baseUrl, agent.network, agent.mint)) {
      await this.registrationOf(agent);
      return { uri, hosted: true, ok: true, detail: 'the gateway serves the agent’s registration-v1 document' };
    }
    const failed = (detail: string): RegistrationStatus => ({ uri, hosted: false, ok: false, detail });
    let answer: Awaited<ReturnType<typeof this.deps.outbound.request>>;
    try {
      answer = await this.deps.outbound.request({
        url: uri,
        method: 'GET',
        headers: { accept: 'application/json' },
        timeoutMs: REGISTRATION_TIMEOUT_MS,
        maxResponseBytes: REGISTRATION_MAX_BYTES,
      });
    } catch {
      return failed(`the registration document at ${uri} could not be read`);
    }
    if (!answer.ok) return failed(`the registration document at ${uri} is unreachable: ${answer.message}`);
    if (answer.status !== 200) return failed(`the registration document at ${uri} answered HTTP ${answer.status}`);
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(answer.body));
    } catch {
      return failed(`the registration document at ${uri} is not JSON`);
    }
    const doc = RegistrationV1.safeParse(json);
    if (!doc.success) {
      const issue = doc.error.issues[0];
      return failed(`the document at ${uri} is not registration-v1: ${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'invalid'}`);
    }
    const regs = doc.data.registrations ?? [];
    if (regs.length && !regs.some((r) => r.agentId === agent.mint)) return failed(`the document at ${uri} registers another agent, not ${agent.mint}`);
    return { uri, hosted: false, ok: true, detail: `a valid registration-v1 document at ${uri}` };
  }

  /** The agent's paid endpoints: its enabled payment links' URLs and rails, newest first (at most 50). */
  private async paidEndpoints(agent: AgentRecord): Promise<RegistrationFacts['paidEndpoints']> {
    if (!agent.ownerPrincipal) return [];
    const links = await this.deps.store.paymentLinks.list(agent.network, { owner: agent.ownerPrincipal, ownerAgent: agent.mint, limit: 50 });
    return links.filter((l) => !l.disabled).map((l) => ({ endpoint: shareUrl(this.deps.baseUrl, l.network, l.id), protocol: l.protocol }));
  }

  /** The agent's cards made under its current owner (a former owner's cards show nothing of it). */
  private async ownCards(agent: AgentRecord, options: { publicOnly: boolean }): Promise<CardRecord[]> {
    return (await this.deps.store.identity.listCards(agent.network, agent.mint, options)).filter((c) => c.ownerPrincipal === agent.ownerPrincipal);
  }

  /** GET /v1/identity/{mint}/history (owner): the agent's identity.* events, newest first, paged like GET /v1/events. */
  async history(caller: Caller, input: HistoryInput): Promise<Page<Event>> {
    const parsed = parseInput(HistoryInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    return this.deps.events.list(caller, { kind: 'identity.*', agent: agent.mint, cursor: parsed.cursor, limit: parsed.limit });
  }

  private async find(
    network: Network,
    q: { mint?: string | undefined; handle?: string | undefined; domain?: string | undefined },
  ): Promise<AgentRecord | null> {
    let mint = q.mint;
    if (q.handle !== undefined) {
      const handle = Handle.safeParse(q.handle.replace(/^@/, ''));
      mint = handle.success ? (await this.deps.store.identity.findByHandle(network, handle.data))?.mint : undefined;
    } else if (q.domain !== undefined) {
      const domain = DomainName.safeParse(q.domain);
      mint = domain.success ? (await this.deps.store.identity.findVerifiedDomain(network, domain.data))?.mint : undefined;
    }
    return mint === undefined ? null : this.deps.store.agents.get(network, mint);
  }

  /** `readBack`: the live Core asset (or null) when the registration document is to be read back (resolve, verify). */
  private async identityOf(agent: AgentRecord, options?: { readBack: CoreAsset | null }): Promise<Identity> {
    const { network, mint } = agent;
    const [profile, domains, reputation, claims, cards, registration] = await Promise.all([
      this.deps.store.identity.getProfile(network, mint),
      this.deps.store.identity.verifiedDomains(network, mint),
      this.deps.store.identity.reputation(network, mint),
      this.deps.store.identity.listClaims(network, mint, { publicOnly: true }),
      this.ownCards(agent, { publicOnly: true }),
      options ? this.readBack(agent, options.readBack) : null,
    ]);
    return {
      mint,
      network,
      owner: agent.owner,
      name: agent.name,
      profile: {
        handle: profile?.handle ?? null,
        display_name: profile?.displayName ?? null,
        description: profile?.description ?? null,
        image: profile?.image ?? null,
        capabilities: profile?.capabilities ?? [],
        updated_at: profile ? iso(profile.updatedAt) : null,
      },
      domains: domains.map((d) => ({ domain: d.domain, verified_at: iso(d.verifiedAt!) })),
      claims: claims.map(toClaim),
      capability_cards: cards.map(toCard),
      reputation: summarize(reputation),
      registration,
    };
  }
}

/** The reputation summary of the agent's settled calls; rating = 5 × the share answered 2xx, one decimal. */
export function summarize(rows: ReputationRow[]): Reputation {
  const calls = rows.reduce((n, r) => n + r.calls, 0);
  const ok = rows.reduce((n, r) => n + r.okCalls, 0);
  const last = rows.reduce<Date | null>((m, r) => (r.lastAt && (!m || r.lastAt > m) ? r.lastAt : m), null);
  return {
    settled_calls: calls,
    rating: calls === 0 ? null : Math.round((ok * 50) / calls) / 10,
    volume: rows.map((r) => ({ currency: r.currency, asset: r.asset, amount_atomic: r.amountAtomic.toString(), calls: r.calls })),
    last_settled_at: last ? iso(last) : null,
  };
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

export function wellKnownUrl(domain: string): string {
  return `https://${domain}${WELL_KNOWN_PATH}`;
}

function toClaim(c: ClaimRecord): Claim {
  return {
    id: c.id,
    mint: c.mint,
    type: c.type,
    statement: c.statement,
    evidence_url: c.evidenceUrl,
    public: c.public,
    created_at: iso(c.createdAt),
    revoked_at: c.revokedAt ? iso(c.revokedAt) : null,
  };
}

function toCard(c: CardRecord): CapabilityCard {
  return {
    id: c.id,
    mint: c.mint,
    capability: c.capability,
    title: c.title,
    description: c.description,
    endpoint: c.endpoint,
    tags: c.tags,
    public: c.public,
    created_at: iso(c.createdAt),
    updated_at: iso(c.updatedAt),
  };
}

const cardNotFound = (mint: string, id: string) => new DomainError('not_found', `Agent ${mint} has no capability card ${id}.`, { id });

/** The envelope of an identity event: confirmed at once, owned by the agent's principal. */
function identityEvent(agent: AgentRecord, now: Date) {
  return {
    id: newId(now.getTime()),
    phase: 'confirmed' as const,
    network: agent.network,
    agentAsset: agent.mint,
    owner: agent.ownerPrincipal,
    createdAt: now,
    confirmedAt: now,
  };
}

/** What agents/prepare recorded in its event's echo that the registration document uses (anything else ignored). */
const RegistrationEcho = z.object({
  name: z.string().optional(),
  description: z.string().optional(),
  services: z.array(z.object({ name: z.string(), endpoint: z.string() })).optional(),
});

function challenge(d: DomainRecord): DomainChallenge {
  return {
    domain: d.domain,
    token: d.token,
    url: wellKnownUrl(d.domain),
    document: { mint: d.mint, network: d.network, token: d.token },
    verified_at: d.verifiedAt ? iso(d.verifiedAt) : null,
  };
}

function describeQuery(q: { mint?: string | undefined; handle?: string | undefined; domain?: string | undefined }): string {
  return q.mint !== undefined ? `mint ${q.mint}` : q.handle !== undefined ? `handle ${q.handle}` : `domain ${q.domain}`;
}
