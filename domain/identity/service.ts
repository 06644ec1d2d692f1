import { createHash, randomBytes } from 'node:crypto';
import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import type { Network } from '../shared/network.ts';
import { iso } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Caller } from '../access/ownership.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { AgentService } from '../agents/service.ts';
import { decodeCoreAsset } from '../agents/asset.ts';
import { newEvent } from '../events/kinds.ts';
import type { EventService } from '../events/service.ts';
import type { Event } from '../events/schema.ts';
import type { Page } from '../shared/pagination.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ledger } from '../ports/ledger.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Store } from '../ports/store.ts';
import { readLedger } from '../treasury/balances.ts';
import { judge, type VerifyFacts } from './checks.ts';
import {
  AddDomainInput,
  ClaimIdInput,
  CreateClaimInput,
  CreateDisclosureInput,
  DisclosureTokenInput,
  HistoryInput,
  DomainInput,
  DomainName,
  Handle,
  ResolveInput,
  UpdateProfileInput,
  VerifyInput,
  WellKnownDocument,
  type Claim,
  type Disclosure,
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

// Issue 13, DECISIONS "Identity". Owner routes (profile, domains) need the caller's principal to own the agent
// (another principal: 404 agent_not_found, as every owned resource). Reads (get, resolve, verify) are public on the
// network: any valid key of the network sees any agent's identity, which is what identity is for.

/** The domain check's fetch: small document, short wait (the outbound adapter enforces both). */
const WELL_KNOWN_TIMEOUT_MS = 5_000;
const WELL_KNOWN_MAX_BYTES = 16 * 1024;
export const WELL_KNOWN_PATH = '/.well-known/svc-agent.json';

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
          { id: newId(now.getTime()), phase: 'confirmed', network: agent.network, agentAsset: agent.mint, owner: agent.ownerPrincipal, createdAt: now, confirmedAt: now },
          { mint: agent.mint, handle: record.handle, previous_handle: previous?.handle ?? null, display_name: record.displayName, capabilities: record.capabilities },
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
    return this.identityOf(agent);
  }

  /** POST /v1/identity/verify: the named checks of domain/identity/checks.ts and their verdict; nothing matched → deny. */
  async verify(caller: Caller, input: VerifyInput): Promise<VerifyResult> {
    const q = parseInput(VerifyInput, input);
    const agent = await this.find(caller.network, q);
    const facts: VerifyFacts = { identity: null, asset: 'absent' };
    if (agent) {
      facts.identity = await this.identityOf(agent);
      const account = await readLedger(this.deps.ledgers, agent.network, (ledger) => ledger.getAccount(agent.mint));
      facts.asset = account === null ? 'absent' : decodeCoreAsset(account) ? 'live' : 'not_core';
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
    if (!claim) throw new DomainError('not_found', `Agent ${agent.mint} has not claimed ${parsed.domain}; POST /v1/identity/${agent.mint}/domains first.`, { domain: parsed.domain });
    if (claim.verifiedAt) return challenge(claim);
    const url = wellKnownUrl(claim.domain);
    const refused = (reason: string, message: string) => new DomainError('invalid_request', `Domain ${claim.domain} is not verified: ${message}`, { domain: claim.domain, url, reason });
    const answer = await this.deps.outbound.request({ url, method: 'GET', headers: { accept: 'application/json' }, timeoutMs: WELL_KNOWN_TIMEOUT_MS, maxResponseBytes: WELL_KNOWN_MAX_BYTES });
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
        throw new DomainError('conflict', `The domain ${claim.domain} is verified by another agent on ${agent.network}.`, { path: 'domain', domain: claim.domain });
      }
      await tx.events.append(
        newEvent(
          'identity.domain.verified',
          { id: newId(now.getTime()), phase: 'confirmed', network: agent.network, agentAsset: agent.mint, owner: agent.ownerPrincipal, createdAt: now, confirmedAt: now },
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
          { id: newId(now.getTime()), phase: 'confirmed', network: agent.network, agentAsset: agent.mint, owner: agent.ownerPrincipal, createdAt: now, confirmedAt: now },
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
          { id: newId(now.getTime()), phase: 'confirmed', network: agent.network, agentAsset: agent.mint, owner: agent.ownerPrincipal, createdAt: now, confirmedAt: now },
          { mint: agent.mint, claim_id: current.id, type: current.type },
        ),
      );
      return { ...current, revokedAt: now };
    });
    return toClaim(claim);
  }

  /** GET /v1/identity/{mint}/claims (owner): every claim, private and revoked ones too, oldest first. */
  async listClaims(caller: Caller, mint: string): Promise<ClaimList> {
    const agent = await this.deps.agents.requireVisible(caller, mint);
    const claims = await this.deps.store.identity.listClaims(agent.network, agent.mint, { publicOnly: false });
    return { data: claims.filter((c) => c.ownerPrincipal === agent.ownerPrincipal).map(toClaim) };
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

  /** GET /v1/identity/disclosures/{token}: any key of the network holding the link; unknown 404, expired 410. */
  async readDisclosure(caller: Caller, input: DisclosureTokenInput): Promise<Disclosure> {
    const { token } = parseInput(DisclosureTokenInput, input);
    const d = await this.deps.store.identity.getDisclosure(caller.network, sha256(token));
    if (!d) throw new DomainError('not_found', `No disclosure link with this token on ${caller.network}.`);
    if (d.expiresAt.getTime() <= this.deps.clock.now().getTime()) {
      throw new DomainError('disclosure_expired', `This disclosure link expired at ${iso(d.expiresAt)}.`, { expires_at: iso(d.expiresAt) });
    }
    const agent = await this.deps.agents.require(d.network, d.mint);
    // A link made by a former owner of the agent (it was recorded again by another principal) shows nothing of it now.
    if (d.ownerPrincipal !== agent.ownerPrincipal) throw new DomainError('not_found', `No disclosure link with this token on ${caller.network}.`);
    const identity = await this.identityOf(agent);
    const out: Disclosure = { mint: d.mint, network: d.network, fields: d.fields, expires_at: iso(d.expiresAt) };
    for (const field of d.fields) {
      if (field === 'profile') out.profile = identity.profile;
      else if (field === 'domains') out.domains = identity.domains;
      else if (field === 'claims') out.claims = identity.claims;
      else if (field === 'reputation') out.reputation = identity.reputation;
      else out.private_claims = (await this.deps.store.identity.privateClaims(d.network, d.mint)).filter((c) => c.ownerPrincipal === agent.ownerPrincipal).map(toClaim);
    }
    return out;
  }

  /** GET /v1/identity/{mint}/history (owner): the agent's identity.* events, newest first, paged like GET /v1/events. */
  async history(caller: Caller, input: HistoryInput): Promise<Page<Event>> {
    const parsed = parseInput(HistoryInput, input);
    const agent = await this.deps.agents.requireVisible(caller, parsed.mint);
    return this.deps.events.list(caller, { kind: 'identity.*', agent: agent.mint, cursor: parsed.cursor, limit: parsed.limit });
  }

  private async find(network: Network, q: { mint?: string | undefined; handle?: string | undefined; domain?: string | undefined }): Promise<AgentRecord | null> {
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

  private async identityOf(agent: AgentRecord): Promise<Identity> {
    const { network, mint } = agent;
    const [profile, domains, reputation, claims] = await Promise.all([
      this.deps.store.identity.getProfile(network, mint),
      this.deps.store.identity.verifiedDomains(network, mint),
      this.deps.store.identity.reputation(network, mint),
      this.deps.store.identity.listClaims(network, mint, { publicOnly: true }),
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
      capability_cards: [],
      reputation: summarize(reputation),
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
