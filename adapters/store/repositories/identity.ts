import { DomainError } from '../../../domain/shared/errors.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { IdentityRepository } from '../../../domain/ports/store.ts';
import type { CardRecord, ClaimRecord, DisclosureRecord, DomainRecord, ProfileRecord, ReputationRow } from '../../../domain/identity/schema.ts';
import { affected, date, dateOrNull, lockedInTransaction, one, query, uniqueOr, type RepoContext } from './context.ts';

// identity_profiles and identity_domains (migrations/0013-identity.ts is their definition); the reputation
// reads the receipt_reputation rollup (migrations/0021-scale2.ts).

interface ProfileRow {
  network: Network;
  mint: string;
  handle: string | null;
  display_name: string | null;
  description: string | null;
  image: string | null;
  capabilities: string[];
  owner_principal: string;
  updated_at: Date;
}

const profileFromRow = (r: ProfileRow): ProfileRecord => ({
  network: r.network,
  mint: r.mint,
  handle: r.handle,
  displayName: r.display_name,
  description: r.description,
  image: r.image,
  capabilities: r.capabilities,
  ownerPrincipal: r.owner_principal,
  updatedAt: date(r.updated_at),
});

interface DomainRow {
  network: Network;
  mint: string;
  domain: string;
  token: string;
  owner_principal: string;
  created_at: Date;
  verified_at: Date | null;
}

const domainFromRow = (r: DomainRow): DomainRecord => ({
  network: r.network,
  mint: r.mint,
  domain: r.domain,
  token: r.token,
  ownerPrincipal: r.owner_principal,
  createdAt: date(r.created_at),
  verifiedAt: dateOrNull(r.verified_at),
});

interface ClaimRow {
  network: Network;
  id: string;
  mint: string;
  type: string;
  statement: string;
  evidence_url: string | null;
  public: boolean;
  owner_principal: string;
  created_at: Date;
  revoked_at: Date | null;
}

const claimFromRow = (r: ClaimRow): ClaimRecord => ({
  network: r.network,
  id: r.id,
  mint: r.mint,
  type: r.type,
  statement: r.statement,
  evidenceUrl: r.evidence_url,
  public: r.public,
  ownerPrincipal: r.owner_principal,
  createdAt: date(r.created_at),
  revokedAt: dateOrNull(r.revoked_at),
});

interface DisclosureRow {
  network: Network;
  token_hash: string;
  mint: string;
  fields: DisclosureRecord['fields'];
  owner_principal: string;
  created_at: Date;
  expires_at: Date;
}

const disclosureFromRow = (r: DisclosureRow): DisclosureRecord => ({
  network: r.network,
  tokenHash: r.token_hash,
  mint: r.mint,
  fields: r.fields,
  ownerPrincipal: r.owner_principal,
  createdAt: date(r.created_at),
  expiresAt: date(r.expires_at),
});

interface CardRow {
  network: Network;
  id: string;
  mint: string;
  capability: string;
  title: string | null;
  description: string | null;
  endpoint: string | null;
  tags: string[];
  public: boolean;
  owner_principal: string;
  created_at: Date;
  updated_at: Date;
}

const cardFromRow = (r: CardRow): CardRecord => ({
  network: r.network,
  id: r.id,
  mint: r.mint,
  capability: r.capability,
  title: r.title,
  description: r.description,
  endpoint: r.endpoint,
  tags: r.tags,
  public: r.public,
  ownerPrincipal: r.owner_principal,
  createdAt: date(r.created_at),
  updatedAt: date(r.updated_at),
});

interface ReputationSqlRow {
  currency: string;
  asset: string;
  calls: number;
  ok_calls: number;
  amount_atomic: string;
  last_at: Date | null;
}

/** advisory lock class of an agent's capability cards (the other classes: receipts 7_201_003, buyer payments 7_201_014) */
const CARDS_LOCK = 7_201_015;

/**
 * The reputation of an agent: its earn receipts that count (decision allow, settlement verified on the ledger: migration
 * 0026) per currency and asset, from the receipt_reputation rollup and its unfolded deltas (migration 0021) — O(currencies), not
 * O(settled calls) — and the newest one's time, one probe of receipts_reputation_ts per row.
 */
export function reputationSql(network: string, agent: string): { sql: string; params: unknown[] } {
  return {
    sql: `select g.currency, g.asset, g.calls::int as calls, g.ok_calls::int as ok_calls, g.amount_atomic::text as amount_atomic,
            (select r.ts from receipts r where r.network = ? and r.agent = ? and r.kind = 'earn' and r.decision = 'allow'
                and r.verification = 'verified' and r.body->'price'->>'currency' = g.currency and r.body->'price'->>'asset' = g.asset
              order by r.ts desc limit 1) as last_at
       from (select currency, asset, sum(calls) as calls, sum(ok_calls) as ok_calls, sum(amount_atomic) as amount_atomic
               from (select currency, asset, calls, ok_calls, amount_atomic from receipt_reputation where network = ? and agent = ?
                     union all
                     select currency, asset, calls, ok_calls, amount_atomic from receipt_reputation_deltas where network = ? and agent = ?) u
              group by 1, 2 having sum(calls) <> 0) g
      order by 1, 2`,
    params: [network, agent, network, agent, network, agent],
  };
}

export function identityRepository(ctx: RepoContext): IdentityRepository {
  const em = () => ctx.em();
  return {
    getProfile: (network, mint) => one(em(), `select * from identity_profiles where network = ? and mint = ?`, [network, mint], profileFromRow),
    findByHandle: (network, handle) =>
      one(em(), `select * from identity_profiles where network = ? and lower(handle) = lower(?) and handle is not null`, [network, handle], profileFromRow),
    putProfile: async (p) => {
      const rows = await uniqueOr(
        query<ProfileRow>(
          em(),
          `insert into identity_profiles (network, mint, handle, display_name, description, image, capabilities, owner_principal, updated_at)
           values (?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?)
           on conflict (network, mint) do update set handle = excluded.handle, display_name = excluded.display_name,
             description = excluded.description, image = excluded.image, capabilities = excluded.capabilities,
             owner_principal = excluded.owner_principal, updated_at = excluded.updated_at
           returning *`,
          [p.network, p.mint, p.handle, p.displayName, p.description, p.image, JSON.stringify(p.capabilities), p.ownerPrincipal, p.updatedAt],
        ),
        () =>
          new DomainError('conflict', `The handle "${p.handle}" is taken on ${p.network} (handles are compared case-insensitively).`, {
            path: 'handle',
            handle: p.handle,
          }),
      );
      return profileFromRow(rows[0]!);
    },
    addDomain: async (d) => {
      await query(
        em(),
        `insert into identity_domains (network, mint, domain, token, owner_principal, created_at, verified_at)
         values (?, ?, ?, ?, ?, ?, null) on conflict (network, mint, domain) do nothing`,
        [d.network, d.mint, d.domain, d.token, d.ownerPrincipal, d.createdAt],
      );
      const stored = await one(
        em(),
        `select * from identity_domains where network = ? and mint = ? and domain = ?`,
        [d.network, d.mint, d.domain],
        domainFromRow,
      );
      return stored!;
    },
    getDomain: (network, mint, domain) =>
      one(em(), `select * from identity_domains where network = ? and mint = ? and domain = ?`, [network, mint, domain], domainFromRow),
    markDomainVerified: async (network, mint, domain, at) => {
      const conflict = () => new DomainError('conflict', `The domain ${domain} is verified by another agent on ${network}.`, { path: 'domain', domain });
      const n = await uniqueOr(
        affected(
          em(),
          `update identity_domains d set verified_at = coalesce(d.verified_at, ?) where d.network = ? and d.mint = ? and d.domain = ?
             and not exists (select 1 from identity_domains o where o.network = d.network and o.domain = d.domain and o.mint <> d.mint and o.verified_at is not null)`,
          [at, network, mint, domain],
        ),
        conflict,
      );
      return n > 0;
    },
    verifiedDomains: async (network, mint) =>
      (
        await query<DomainRow>(em(), `select * from identity_domains where network = ? and mint = ? and verified_at is not null order by domain`, [
          network,
          mint,
        ])
      ).map(domainFromRow),
    findVerifiedDomain: (network, domain) =>
      one(em(), `select * from identity_domains where network = ? and domain = ? and verified_at is not null`, [network, domain], domainFromRow),
    resetForNewOwner: async (network, mint, next) => {
      const before = await one(em(), `select * from identity_profiles where network = ? and mint = ? for update`, [network, mint], profileFromRow);
      // owner_principal is not null on these tables: a legacy agent nobody owns keeps the former principal's name on them
      await query(em(), `update identity_profiles set handle = null, owner_principal = coalesce(?, owner_principal) where network = ? and mint = ?`, [
        next.ownerPrincipal,
        network,
        mint,
      ]);
      await query(
        em(),
        `update identity_domains set verified_at = null, owner_principal = coalesce(?, owner_principal),
           token = 'svc_dv_' || rtrim(translate(encode(sha256(convert_to(? || ':' || domain, 'UTF8')), 'base64'), '+/', '-_'), '=')
         where network = ? and mint = ?`,
        [next.ownerPrincipal, next.secret, network, mint],
      );
      return before;
    },
    reputation: async (network, agent): Promise<ReputationRow[]> => {
      const { sql, params } = reputationSql(network, agent);
      const rows = await query<ReputationSqlRow>(em(), sql, params);
      return rows.map((r) => ({
        currency: r.currency,
        asset: r.asset,
        calls: r.calls,
        okCalls: r.ok_calls,
        amountAtomic: BigInt(r.amount_atomic.split('.')[0]!),
        lastAt: dateOrNull(r.last_at),
      }));
    },
    insertClaim: async (c) => {
      await query(
        em(),
        `insert into identity_claims (network, id, mint, type, statement, evidence_url, public, owner_principal, created_at, revoked_at)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, null)`,
        [c.network, c.id, c.mint, c.type, c.statement, c.evidenceUrl, c.public, c.ownerPrincipal, c.createdAt],
      );
    },
    getClaim: (network, mint, id) =>
      one(em(), `select * from identity_claims where network = ? and mint = ? and id = ?${lockedInTransaction(ctx)}`, [network, mint, id], claimFromRow),
    revokeClaim: async (network, mint, id, at) =>
      (await affected(em(), `update identity_claims set revoked_at = ? where network = ? and mint = ? and id = ? and revoked_at is null`, [
        at,
        network,
        mint,
        id,
      ])) > 0,
    listClaims: async (network, mint, { publicOnly, limit = 200, after }) =>
      (
        await query<ClaimRow>(
          em(),
          `select * from identity_claims where network = ? and mint = ?${publicOnly ? ' and public and revoked_at is null' : ''}${after ? ' and (created_at, id) > (?, ?)' : ''} order by created_at, id limit ?`,
          [network, mint, ...(after ? [after.createdAt, after.id] : []), limit],
        )
      ).map(claimFromRow),
    insertDisclosure: async (d) => {
      await query(
        em(),
        `insert into identity_disclosures (network, token_hash, mint, fields, owner_principal, created_at, expires_at) values (?, ?, ?, ?::jsonb, ?, ?, ?)`,
        [d.network, d.tokenHash, d.mint, JSON.stringify(d.fields), d.ownerPrincipal, d.createdAt, d.expiresAt],
      );
    },
    getDisclosure: (tokenHash) => one(em(), `select * from identity_disclosures where token_hash = ?`, [tokenHash], disclosureFromRow),
    privateClaims: async (network, mint) =>
      (
        await query<ClaimRow>(
          em(),
          `select * from identity_claims where network = ? and mint = ? and not public and revoked_at is null order by created_at, id limit 200`,
          [network, mint],
        )
      ).map(claimFromRow),
    insertCard: async (c) => {
      await uniqueOr(
        query(
          em(),
          `insert into identity_capability_cards (network, id, mint, capability, title, description, endpoint, tags, public, owner_principal, created_at, updated_at)
           values (?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?)`,
          [
            c.network,
            c.id,
            c.mint,
            c.capability,
            c.title,
            c.description,
            c.endpoint,
            JSON.stringify(c.tags),
            c.public,
            c.ownerPrincipal,
            c.createdAt,
            c.updatedAt,
          ],
        ),
        () =>
          new DomainError('conflict', `Agent ${c.mint} already has a capability card for ${c.capability}.`, { path: 'capability', capability: c.capability }),
      );
    },
    getCard: (network, mint, id) =>
      one(
        em(),
        `select * from identity_capability_cards where network = ? and mint = ? and id = ?${lockedInTransaction(ctx)}`,
        [network, mint, id],
        cardFromRow,
      ),
    updateCard: async (c) => {
      await query(
        em(),
        `update identity_capability_cards set title = ?, description = ?, endpoint = ?, tags = ?::jsonb, public = ?, updated_at = ?
          where network = ? and mint = ? and id = ?`,
        [c.title, c.description, c.endpoint, JSON.stringify(c.tags), c.public, c.updatedAt, c.network, c.mint, c.id],
      );
    },
    deleteCard: async (network, mint, id) =>
      (await affected(em(), `delete from identity_capability_cards where network = ? and mint = ? and id = ?`, [network, mint, id])) > 0,
    listCards: async (network, mint, { publicOnly }) => {
      // in a transaction (a create checking the agent's count) a concurrent create of the same agent waits until commit,
      // so two creates cannot both see 63 cards and make 65
      if (ctx.inTransaction) await query(em(), 'select pg_advisory_xact_lock(?, hashtext(?))', [CARDS_LOCK, `${network}:${mint}`]);
      return (
        await query<CardRow>(
          em(),
          `select * from identity_capability_cards where network = ? and mint = ?${publicOnly ? ' and public' : ''} order by capability limit 200`,
          [network, mint],
        )
      ).map(cardFromRow);
    },
  };
}
