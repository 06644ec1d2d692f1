import type { MigrationSteps } from './steps.ts';

// docs/architecture.md "Ownership": each owned row and each event carries its owning principal ("wallet:<addr>" or
// "key:<id>"), so a non-admin read is one indexed predicate (network, owner_principal, …) in the list's own order.
export const migration0005Ownership: MigrationSteps = {
  up(addSql) {
    // Links recorded their creating key (created_by) from the start: its principal owns them.
    addSql(`alter table payment_links add column owner_principal text null;`);
    addSql(`update payment_links l set owner_principal = coalesce(
        (select 'wallet:' || k.owner_wallet from api_keys k where k.id = l.created_by and k.owner_wallet is not null),
        'key:' || l.created_by);`);
    addSql(`alter table payment_links alter column owner_principal set not null;`);
    addSql(`create index payment_links_network_principal_pk_idx on payment_links (network, owner_principal, pk desc);`);
    addSql(`create index payment_links_network_principal_agent_pk_idx on payment_links (network, owner_principal, owner_agent, pk desc);`);

    // Agents did not record who recorded them. Legacy rows go to the wallet principal of their owner when a key of
    // that wallet exists on the network, else to the principal of the agent's oldest link; otherwise they stay
    // unowned (admin-only) until a principal records them again with the same owner (AgentService.record).
    addSql(`alter table agents add column owner_principal text null;`);
    addSql(`update agents a set owner_principal = coalesce(
        (select 'wallet:' || a.owner where exists (select 1 from api_keys k where k.network = a.network and k.owner_wallet = a.owner)),
        (select l.owner_principal from payment_links l where l.network = a.network and l.owner_agent = a.mint order by l.pk limit 1));`);

    // Events: a link's events belong to the link's owner (the link of that id that existed when the event was
    // written: slugs are reusable after a delete); other events of an agent to the agent's owner. Events of links
    // deleted since, and events of no owned resource, stay admin-only (null).
    addSql(`alter table events add column owner_principal text null;`);
    addSql(`update events e set owner_principal = (
        select l.owner_principal from payment_links l
         where l.network = e.network and l.id = e.metadata->>'payment_link_id' and l.created_at <= e.created_at
         order by l.created_at desc limit 1)
      where e.metadata ? 'payment_link_id';`);
    addSql(`update events e set owner_principal = a.owner_principal from agents a
      where e.owner_principal is null and not (e.metadata ? 'payment_link_id') and a.network = e.network and a.mint = e.agent_asset;`);
    addSql(`create index events_network_principal_seq_idx on events (network, owner_principal, seq desc);`);
    addSql(`create index events_network_principal_kind_seq_idx on events (network, owner_principal, kind text_pattern_ops, seq desc);`);
    addSql(`create index events_network_principal_agent_seq_idx on events (network, owner_principal, agent_asset, seq desc);`);
  },
};
