import type { MigrationSteps } from './steps.ts';

// DECISIONS "Webhooks": subscriptions owned per principal, and one delivery row per (webhook, event, phase)
// written in the transaction that appends the event (the transactional outbox), delivered by graphile-worker jobs.
export const migration0009Webhooks: MigrationSteps = {
  up(addSql) {
    // scope 'principal': the events of owner_principal; 'network' (made with an admin key): every event of the network.
    // events: kind patterns as given ("*", "payment_link.*", "receipt.published"); matched by array overlap with the
    // patterns an event's kind satisfies, so the fan-out is one indexed query.
    addSql(`create table webhooks (
      id text primary key,
      network text not null,
      owner_principal text not null,
      scope text not null check (scope in ('principal', 'network')),
      url text not null,
      events text[] not null,
      description text null,
      secret text not null,
      disabled_at timestamptz null,
      disabled_reason text null,
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    );`);
    addSql(`create index webhooks_network_principal_id_idx on webhooks (network, owner_principal, id desc);`);
    addSql(`create index webhooks_network_id_idx on webhooks (network, id desc);`);
    addSql(`create index webhooks_network_scope_idx on webhooks (network) where disabled_at is null and scope = 'network';`);

    // A delivery targets a subscription (webhook_id) or a payment link's own webhook_url (link_pk, hosted-api §2.1):
    // same schedule, same rows. payload: the `data` of a link delivery (its own shape); null sends the event itself.
    // claim/claimed_by/locked_until: the attempt in flight (claimed_by is the process number of process_epochs, so a
    // kill -9'd runner's claim is taken over at once); attempt_base: attempts before the last manual retry.
    addSql(`create table webhook_deliveries (
      id text primary key,
      network text not null,
      webhook_id text null references webhooks (id) on delete cascade,
      link_pk text null references payment_links (pk) on delete cascade,
      event_id text null,
      kind text not null,
      phase text not null,
      payload jsonb null,
      status text not null check (status in ('pending', 'delivered', 'failed')),
      attempts integer not null default 0,
      attempt_base integer not null default 0,
      next_attempt_at timestamptz null,
      last_status integer null,
      last_error text null,
      delivered_at timestamptz null,
      claim text null,
      claimed_by integer null,
      locked_until timestamptz null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      check ((webhook_id is null) <> (link_pk is null))
    );`);
    addSql(`create unique index webhook_deliveries_once_idx on webhook_deliveries (webhook_id, event_id, phase) where webhook_id is not null;`);
    addSql(`create index webhook_deliveries_webhook_id_idx on webhook_deliveries (webhook_id, id desc) where webhook_id is not null;`);
    addSql(`create index webhook_deliveries_link_idx on webhook_deliveries (link_pk) where link_pk is not null;`);
    addSql(`create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';`);
  },
};
