import type { MigrationSteps } from './steps.ts';

export const migration0002Policies: MigrationSteps = {
  up(addSql) {
    // hosted-api §5.7 / DECISIONS: first response per (api key, route, key) for 24 h.
    addSql(`create table idempotency_records (
      key_id text not null,
      route text not null,
      idem_key text not null,
      request_hash text not null,
      state text not null,
      response text null,
      locked_until timestamptz not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      primary key (key_id, route, idem_key)
    );`);
    addSql(`create index idempotency_records_expires_idx on idempotency_records (expires_at);`);

    // Sliding-window log: one row per admitted hit, shared by every process on the database. Unlogged: it is
    // throttling state, not a record, and losing it in a crash only forgives a minute of hits.
    addSql(`create unlogged table rate_hits (
      subject text not null,
      bucket text not null,
      at timestamptz not null
    );`);
    addSql(`create index rate_hits_subject_bucket_at_idx on rate_hits (subject, bucket, at);`);

    // The exact decision: lock the (subject, bucket) log, add the caller's not-yet-shared hits, age out, count,
    // admit or refuse — one round trip.
    addSql(`create or replace function svc_rate_hit(p_subject text, p_bucket text, p_limit integer, p_window_ms integer,
                                                       p_now timestamptz, p_pending jsonb)
      returns table (allowed boolean, used integer, oldest timestamptz)
      language plpgsql as $fn$
      declare
        v_used integer;
        v_oldest timestamptz;
      begin
        perform pg_advisory_xact_lock(hashtextextended(p_subject || '|' || p_bucket, 7201));
        insert into rate_hits (subject, bucket, at)
          select p_subject, p_bucket, value::timestamptz from jsonb_array_elements_text(p_pending);
        delete from rate_hits where subject = p_subject and bucket = p_bucket and at <= p_now - make_interval(secs => p_window_ms / 1000.0);
        select count(*)::integer, min(at) into v_used, v_oldest from rate_hits where subject = p_subject and bucket = p_bucket;
        if v_used < p_limit then
          insert into rate_hits (subject, bucket, at) values (p_subject, p_bucket, p_now);
          return query select true, v_used + 1, coalesce(v_oldest, p_now);
        else
          return query select false, v_used, v_oldest;
        end if;
      end
      $fn$;`);

    // Request records for usage metrics, kept 30 days.
    addSql(`create table request_records (
      id text primary key,
      key_id text not null,
      network text not null,
      bucket text not null,
      method text not null,
      route text not null,
      status integer not null,
      duration_ms integer not null,
      at timestamptz not null
    );`);
    addSql(`create index request_records_network_at_idx on request_records (network, at);`);
    addSql(`create index request_records_key_at_idx on request_records (key_id, at);`);
  },
};
