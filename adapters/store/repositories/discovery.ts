import type { Network } from '../../../domain/shared/network.ts';
import type { DiscoverableLinkFilter, DiscoveryRepository, RegisteredAgentRow } from '../../../domain/ports/discovery-store.ts';
import { query, type RepoContext } from './context.ts';
import { fromRow, LINK_SELECT, type PaymentLinkRow } from './payment-links.ts';

// The catalogues of svc_discover, each read newest first through its partial index of migration 0019.

interface AgentRow {
  mint: string;
  network: Network;
  name: string | null;
  uri: string;
  treasury: string;
  capabilities: string[] | null;
  description: string | null;
}

const agentFromRow = (r: AgentRow): RegisteredAgentRow => ({
  mint: r.mint,
  network: r.network,
  name: r.name,
  uri: r.uri,
  treasury: r.treasury,
  capabilities: r.capabilities ?? [],
  description: r.description,
});

/**
 * the newest discoverable links (payment_links_discoverable_idx) whose owner agent is proven on the ledger (DECISIONS
 * "Agents, submissions and events": an unproven agent's link takes no payment, so it is not offered — one primary-key
 * probe of agents per row, a scalar subquery so the links are still read in the index's order, never joined and
 * sorted); exported so bench:growth prints its plan
 */
export function discoverableLinksSql(network: string, limit: number, offset = 0, filter: DiscoverableLinkFilter = {}): { sql: string; params: unknown[] } {
  const where = discoverableWhere(network, filter);
  return { sql: `${LINK_SELECT} where ${where.sql} order by pk desc limit ? offset ?`, params: [...where.params, limit, offset] };
}

/** the catalogue's condition, with the bazaar filters: payTo names the owner agent's treasury (agents.treasury) */
function discoverableWhere(network: string, filter: DiscoverableLinkFilter): { sql: string; params: unknown[] } {
  const params: unknown[] = [network];
  let sql = `network = ? and not disabled and (metadata->>'discoverable') = 'true'
      and (select p.proven_at from agents p where p.network = l.network and p.mint = l.owner_agent) is not null`;
  if (filter.protocol !== undefined) {
    sql += ' and protocol = ?';
    params.push(filter.protocol);
  }
  if (filter.payTo !== undefined) {
    sql += ' and (select p.treasury from agents p where p.network = l.network and p.mint = l.owner_agent) = ?';
    params.push(filter.payTo);
  }
  return { sql, params };
}

export function discoveryRepository(ctx: RepoContext): DiscoveryRepository {
  const em = () => ctx.em();
  return {
    discoverableLinks: async (network, limit, offset = 0, filter = {}) => {
      // rows read as the payment-links repository reads them, mapped by its one row mapper
      const { sql, params } = discoverableLinksSql(network, limit, offset, filter);
      const rows = await query<PaymentLinkRow>(em(), sql, params);
      return rows.map(fromRow);
    },
    countDiscoverableLinks: async (network, filter = {}) => {
      const where = discoverableWhere(network, filter);
      const [row] = await query<{ n: string }>(em(), `select count(*)::text as n from payment_links l where ${where.sql}`, where.params);
      return Number(row?.n ?? 0);
    },
    registeredAgents: async (network, limit, offset = 0) => {
      const rows = await query<AgentRow>(
        em(),
        `select a.mint, a.network, a.name, a.uri, a.treasury, p.capabilities, p.description
         from (select * from agents where network = ? and uri is not null and proven_at is not null order by registered_at desc, mint limit ? offset ?) a
         left join identity_profiles p on p.network = a.network and p.mint = a.mint
         order by a.registered_at desc, a.mint`,
        [network, limit, offset],
      );
      return rows.map(agentFromRow);
    },
  };
}
