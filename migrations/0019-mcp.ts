import type { MigrationSteps } from './steps.ts';

// The catalogues of svc_discover read newest first through their own partial indexes — the payment links
// their owners listed (metadata.discoverable = true, enabled) and the agents with a registration document URI — and an
// agent's daily buckets (GET /v1/receipts/{agent}/daily) read the window's settled receipts as one range by ts.
export const migration0019Mcp: MigrationSteps = {
  up(addSql) {
    addSql(`create index payment_links_discoverable_idx on payment_links (network, pk desc)
      where not disabled and (metadata->>'discoverable') = 'true';`);
    addSql(`create index receipts_agent_settled_ts on receipts (network, agent, ts) where decision = 'allow';`);
    addSql(`create index agents_registered_idx on agents (network, registered_at desc, mint) where uri is not null;`);
  },
};
