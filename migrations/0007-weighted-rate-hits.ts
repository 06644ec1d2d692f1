import type { MigrationSteps } from './steps.ts';

export const migration0007WeightedRateHits: MigrationSteps = {
  up(addSql) {
    // The exact decision of 0002 for a request that takes `p_hits` slots at once (a GraphQL operation's cost, README
    // "Rate limits"): admitted only when all of them fit, then one row per slot. The 6-argument version stays for
    // processes of the previous release sharing the database during a rolling upgrade.
    addSql(`create or replace function svc_rate_hit(p_subject text, p_bucket text, p_limit integer, p_window_ms integer,
                                                       p_now timestamptz, p_pending jsonb, p_hits integer)
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
        if v_used + p_hits <= p_limit then
          insert into rate_hits (subject, bucket, at) select p_subject, p_bucket, p_now from generate_series(1, p_hits);
          return query select true, v_used + p_hits, coalesce(v_oldest, p_now);
        else
          return query select false, v_used, coalesce(v_oldest, p_now);
        end if;
      end
      $fn$;`);
  },
};
