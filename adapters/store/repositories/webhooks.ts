import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../../domain/shared/ids.ts';
import type { Network } from '../../../domain/shared/network.ts';
import type { EventPhase, EventRecord } from '../../../domain/events/schema.ts';
import type { JobQueue } from '../../../domain/ports/job-queue.ts';
import type { DeliveryTarget, WebhookDeliveryRepository, WebhookRepository } from '../../../domain/ports/webhook-store.ts';
import type { DeliveryStatus, WebhookDeliveryRecord, WebhookRecord, WebhookScope } from '../../../domain/webhooks/schema.ts';
import { deliverJob, patternsMatching } from '../../../domain/webhooks/delivery.ts';
import { ownerAlive } from '../process-owner.ts';
import { phasesOf } from './events.ts';

// DECISIONS "Webhooks": subscriptions, deliveries and the in-transaction job queue, in raw SQL on the
// MikroORM connection (the migration is the tables' one definition). Deliveries are the transactional outbox: the
// events repository calls `fanOut` inside `append`, and graphile_worker.add_job runs in the same transaction, so an
// event, its deliveries and their jobs commit together or not at all.

interface WebhookRow {
  id: string;
  network: Network;
  owner_principal: string;
  scope: WebhookScope;
  url: string;
  events: string[];
  description: string | null;
  secret: string;
  disabled_at: Date | null;
  disabled_reason: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

const webhookFromRow = (r: WebhookRow): WebhookRecord => ({
  id: r.id,
  network: r.network,
  ownerPrincipal: r.owner_principal,
  scope: r.scope,
  url: r.url,
  events: r.events,
  description: r.description,
  secret: r.secret,
  disabledAt: r.disabled_at ? new Date(r.disabled_at) : null,
  disabledReason: r.disabled_reason,
  createdBy: r.created_by,
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

interface DeliveryRow {
  id: string;
  network: Network;
  webhook_id: string | null;
  link_pk: string | null;
  event_id: string | null;
  kind: string;
  phase: EventPhase;
  payload: Record<string, unknown> | null;
  status: DeliveryStatus;
  attempts: number;
  attempt_base: number;
  next_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const dateOrNull = (d: Date | null) => (d ? new Date(d) : null);

const deliveryFromRow = (r: DeliveryRow): WebhookDeliveryRecord => ({
  id: r.id,
  network: r.network,
  webhookId: r.webhook_id,
  linkPk: r.link_pk,
  eventId: r.event_id,
  kind: r.kind,
  phase: r.phase,
  payload: r.payload,
  status: r.status,
  attempts: r.attempts,
  attemptBase: r.attempt_base,
  nextAttemptAt: dateOrNull(r.next_attempt_at),
  lastStatus: r.last_status,
  lastError: r.last_error,
  deliveredAt: dateOrNull(r.delivered_at),
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

/** The event columns a subscription's target query reads, prefixed "e_". */
interface TargetRow {
  url: string | null;
  secret: string | null;
  disabled_at: Date | null;
  disabled_reason: string | null;
  e_id: string | null;
  e_seq: string;
  e_kind: string;
  e_phase: EventPhase;
  e_network: Network;
  e_agent_asset: string | null;
  e_signature: string | null;
  e_block_time: string | null;
  e_confirmed_at: Date | null;
  e_slot: string | null;
  e_error_code: string | null;
  e_error_logs: string[] | null;
  e_metadata: Record<string, unknown>;
  e_client_reference: string | null;
  e_owner_principal: string | null;
  e_created_at: Date;
  e_updated_at: Date;
  e_phases: Parameters<typeof phasesOf>[0];
}

const eventOf = (r: TargetRow): EventRecord => ({
  id: r.e_id!,
  seq: BigInt(r.e_seq),
  kind: r.e_kind,
  phase: r.e_phase,
  phases: phasesOf(r.e_phases, { phase: r.e_phase, updatedAt: new Date(r.e_updated_at), signature: r.e_signature }),
  network: r.e_network,
  agentAsset: r.e_agent_asset,
  signature: r.e_signature,
  blockTime: r.e_block_time === null ? null : Number(r.e_block_time),
  confirmedAt: dateOrNull(r.e_confirmed_at),
  slot: r.e_slot === null ? null : Number(r.e_slot),
  errorCode: r.e_error_code,
  errorLogs: r.e_error_logs,
  metadata: r.e_metadata,
  clientReference: r.e_client_reference,
  owner: r.e_owner_principal,
  createdAt: new Date(r.e_created_at),
  updatedAt: new Date(r.e_updated_at),
});

type Em = () => EntityManager;

const rows = async <T>(em: Em, sql: string, params: unknown[]): Promise<T[]> => (await em().execute(sql, params)) as T[];

export function webhookRepository(em: Em, inTransaction: () => boolean): WebhookRepository {
  return {
    insert: async (w) => {
      await em().execute(
        `insert into webhooks (id, network, owner_principal, scope, url, events, description, secret, disabled_at, disabled_reason, created_by, created_at, updated_at)
         values (?, ?, ?, ?, ?, array(select jsonb_array_elements_text(?::jsonb)), ?, ?, ?, ?, ?, ?, ?)`,
        [
          w.id,
          w.network,
          w.ownerPrincipal,
          w.scope,
          w.url,
          JSON.stringify(w.events),
          w.description,
          w.secret,
          w.disabledAt,
          w.disabledReason,
          w.createdBy,
          w.createdAt,
          w.updatedAt,
        ],
      );
    },
    get: async (network, id) => {
      const found = await rows<WebhookRow>(em, `select * from webhooks where network = ? and id = ?${inTransaction() ? ' for update' : ''}`, [network, id]);
      return found[0] ? webhookFromRow(found[0]) : null;
    },
    list: async (network, q) => {
      const { sql, params } = webhookListSql(network, q);
      return (await rows<WebhookRow>(em, sql, params)).map(webhookFromRow);
    },
    rotateSecret: async (network, id, secret, at) => {
      const found = await rows<WebhookRow>(em, `update webhooks set secret = ?, updated_at = ? where network = ? and id = ? returning *`, [
        secret,
        at,
        network,
        id,
      ]);
      return found[0] ? webhookFromRow(found[0]) : null;
    },
    disable: async (network, id, reason, at) => {
      const changed = await rows(
        em,
        `update webhooks set disabled_at = ?, disabled_reason = ?, updated_at = ? where network = ? and id = ? and disabled_at is null returning 1`,
        [at, reason, at, network, id],
      );
      return changed.length > 0;
    },
    delete: async (network, id) => (await rows(em, `delete from webhooks where network = ? and id = ? returning 1`, [network, id])).length > 0,
  };
}

// The list statements, exported so the query-plan test EXPLAINs what runs.

/** webhooks newest first: webhooks_network_[principal_]id_idx */
export function webhookListSql(
  network: string,
  q: { owner?: string | undefined; beforeId?: string | undefined; limit: number },
): { sql: string; params: unknown[] } {
  const params: unknown[] = [network];
  let where = 'network = ?';
  if (q.owner !== undefined) {
    where += ' and owner_principal = ?';
    params.push(q.owner);
  }
  if (q.beforeId !== undefined) {
    where += ' and id < ?';
    params.push(q.beforeId);
  }
  params.push(q.limit);
  return { sql: `select * from webhooks where ${where} order by id desc limit ?`, params };
}

/** a webhook's deliveries newest first: webhook_deliveries_webhook_list_idx (id in "C" order, which the primary key cannot give) */
export function deliveryListSql(network: string, webhookId: string, q: { beforeId?: string | undefined; limit: number }): { sql: string; params: unknown[] } {
  const params: unknown[] = [webhookId, network];
  let where = 'webhook_id = ? and network = ?';
  if (q.beforeId !== undefined) {
    where += ' and id collate "C" < ?';
    params.push(q.beforeId);
  }
  params.push(q.limit);
  return { sql: `select * from webhook_deliveries where ${where} order by id collate "C" desc limit ?`, params };
}

/**
 * The deliveries of events appended together (events.appendMany): one pending delivery per (event, matching
 * subscription), each enqueued as a deliver_webhook job, in one statement; nothing when no subscription matched.
 */
export async function fanOutMatched(
  em: Em,
  events: readonly Pick<EventRecord, 'id' | 'network' | 'kind' | 'phase' | 'createdAt'>[],
  matches: readonly { event: number; webhookId: string }[],
): Promise<number> {
  if (matches.length === 0) return 0;
  const made = matches.map((m) => {
    const e = events[m.event]!;
    return {
      id: newId(e.createdAt.getTime()),
      network: e.network,
      webhook_id: m.webhookId,
      event_id: e.id,
      kind: e.kind,
      phase: e.phase,
      created_at: e.createdAt,
    };
  });
  const task = deliverJob(events[0]!.network, '').task;
  const counted = await rows<{ n: number }>(
    em,
    `with x as (
       select * from jsonb_to_recordset(?::jsonb) as x(id text, network text, webhook_id text, event_id text, kind text, phase text, created_at timestamptz)
     ),
     -- The subscriptions still there, held until commit: one deleted after the caller matched it (DELETE /v1/webhooks
     -- in another transaction) gets no delivery, where its foreign key would fail the event's whole write.
     live as (select id from webhooks where id in (select webhook_id from x) for key share),
     made as (
       insert into webhook_deliveries (id, network, webhook_id, event_id, kind, phase, status, next_attempt_at, created_at, updated_at)
       select x.id, x.network, x.webhook_id, x.event_id, x.kind, x.phase, 'pending', x.created_at, x.created_at, x.created_at
         from x join live on live.id = x.webhook_id
       on conflict do nothing
       returning id, network
     )
     select count(*)::int as n from graphile_worker.add_jobs(array(
       select json_populate_record(null::graphile_worker.job_spec,
                json_build_object('identifier', ?::text, 'payload', json_build_object('network', made.network, 'delivery_id', made.id),
                                  'job_key', ?::text || made.id))
         from made))`,
    [JSON.stringify(made), task, deliverJob(events[0]!.network, '').jobKey],
  );
  return counted[0]?.n ?? 0;
}

/** `epoch`: this process's liveness number (process-owner.ts), named by the claims it takes. */
export function webhookDeliveryRepository(em: Em, epoch: () => number | null): WebhookDeliveryRepository {
  return {
    fanOut: async (e) => {
      // Usually no subscription sees an event: one indexed read, nothing written.
      const subscribers = await rows<{ id: string }>(
        em,
        `select id from webhooks where network = ? and disabled_at is null and (scope = 'network' or owner_principal = ?)
            and events && array(select jsonb_array_elements_text(?::jsonb))`,
        [e.network, e.owner, JSON.stringify(patternsMatching(e.kind))],
      );
      // the deliveries and their jobs: the one statement appendMany's fan-out uses
      return fanOutMatched(
        em,
        [e],
        subscribers.map((sub) => ({ event: 0, webhookId: sub.id })),
      );
    },
    insert: async (d) => {
      await em().execute(
        `insert into webhook_deliveries (id, network, webhook_id, link_pk, event_id, kind, phase, payload, status, attempts, attempt_base, next_attempt_at,
                                         last_status, last_error, delivered_at, created_at, updated_at)
         values (?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          d.id,
          d.network,
          d.webhookId,
          d.linkPk,
          d.eventId,
          d.kind,
          d.phase,
          d.payload === null ? null : JSON.stringify(d.payload),
          d.status,
          d.attempts,
          d.attemptBase,
          d.nextAttemptAt,
          d.lastStatus,
          d.lastError,
          d.deliveredAt,
          d.createdAt,
          d.updatedAt,
        ],
      );
    },
    get: async (network, id) => {
      const found = await rows<DeliveryRow>(em, `select * from webhook_deliveries where network = ? and id = ?`, [network, id]);
      return found[0] ? deliveryFromRow(found[0]) : null;
    },
    listByWebhook: async (network, webhookId, q) => {
      const { sql, params } = deliveryListSql(network, webhookId, q);
      return (await rows<DeliveryRow>(em, sql, params)).map(deliveryFromRow);
    },
    claim: async (network, id, c) => {
      const found = await rows<DeliveryRow>(
        em,
        `update webhook_deliveries set claim = ?, claimed_by = ?, locked_until = ?, updated_at = ?
          where network = ? and id = ? and status = 'pending' and next_attempt_at <= ?
            and (claim is null or locked_until <= ? or not ${ownerAlive('webhook_deliveries.claimed_by')})
          returning *`,
        [c.token, epoch(), c.lockedUntil, c.now, network, id, c.now, c.now],
      );
      return found[0] ? deliveryFromRow(found[0]) : null;
    },
    target: async (d): Promise<DeliveryTarget> => {
      if (d.linkPk !== null) {
        const link = await rows<{ webhook_url: string | null; webhook_secret: string | null }>(
          em,
          `select webhook_url, webhook_secret from payment_links where pk = ? and network = ?`,
          [d.linkPk, d.network],
        );
        const url = link[0]?.webhook_url;
        const secret = link[0]?.webhook_secret;
        if (!url || !secret) return { ok: false, reason: 'the payment link has no webhook_url any more' };
        return { ok: true, url, secret, event: null };
      }
      const found = await rows<TargetRow>(
        em,
        `select w.url, w.secret, w.disabled_at, w.disabled_reason,
                e.id as e_id, e.seq::text as e_seq, e.kind as e_kind, e.phase as e_phase, e.network as e_network,
                e.agent_asset as e_agent_asset, e.signature as e_signature, e.block_time::text as e_block_time,
                e.confirmed_at as e_confirmed_at, e.slot::text as e_slot, e.error_code as e_error_code, e.error_logs as e_error_logs,
                e.metadata as e_metadata, e.client_reference as e_client_reference, e.owner_principal as e_owner_principal,
                e.created_at as e_created_at, e.updated_at as e_updated_at, e.phases as e_phases
           from webhooks w left join events e on e.id = ? and e.network = w.network
          where w.network = ? and w.id = ?`,
        [d.eventId, d.network, d.webhookId],
      );
      const row = found[0];
      if (!row?.url || !row.secret) return { ok: false, reason: 'the subscription was deleted' };
      if (row.disabled_at) return { ok: false, reason: `the subscription is disabled${row.disabled_reason ? ` (${row.disabled_reason})` : ''}` };
      if (!row.e_id) return { ok: false, reason: 'the event is no longer stored' };
      return { ok: true, url: row.url, secret: row.secret, event: eventOf(row) };
    },
    finish: async (network, id, token, o) => {
      const done = await rows(
        em,
        `update webhook_deliveries set status = ?, attempts = ?, next_attempt_at = ?, last_status = ?, last_error = ?, delivered_at = ?,
                claim = null, claimed_by = null, locked_until = null, updated_at = ?
          where network = ? and id = ? and claim = ? returning 1`,
        [o.status, o.attempts, o.nextAttemptAt, o.lastStatus, o.lastError, o.deliveredAt, o.at, network, id, token],
      );
      return done.length > 0;
    },
    requeue: async (network, webhookId, id, at) => {
      const found = await rows<DeliveryRow>(
        em,
        `update webhook_deliveries set status = 'pending', attempt_base = attempts, next_attempt_at = ?, updated_at = ?
          where network = ? and webhook_id = ? and id = ? returning *`,
        [at, at, network, webhookId, id],
      );
      return found[0] ? deliveryFromRow(found[0]) : null;
    },
    listDue: async (q) =>
      rows<{ network: Network; id: string }>(
        em,
        `select network, id from webhook_deliveries
          where status = 'pending' and next_attempt_at <= ?
            and (claim is null or locked_until <= ? or not ${ownerAlive('webhook_deliveries.claimed_by')})
          order by next_attempt_at limit ?`,
        [q.now, q.now, q.limit],
      ),
  };
}

/** graphile-worker's add_job on this connection: inside a transaction the job exists only if the transaction commits. */
export function transactionalJobQueue(em: Em): JobQueue {
  return {
    add: async (task, payload, options) => {
      await em().execute(`select 1 from graphile_worker.add_job(?::text, ?::json, run_at => ?::timestamptz, job_key => ?::text)`, [
        task,
        JSON.stringify(payload ?? {}),
        options?.runAt ?? null,
        options?.jobKey ?? null,
      ]);
    },
  };
}
