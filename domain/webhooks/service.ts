import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import { newId } from '../shared/ids.ts';
import type { Network } from '../shared/network.ts';
import { decodeCursor, encodeCursor, toPage, type Page } from '../shared/pagination.ts';
import { iso, isoOrNull } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Clock } from '../ports/clock.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import type { Repositories, Store } from '../ports/store.ts';
import type { DeliveryOutcome } from '../ports/webhook-store.ts';
import { canAccess, ownerFilter, type Caller } from '../access/ownership.ts';
import { toEvent } from '../events/service.ts';
import type { EventPhase, EventRecord } from '../events/schema.ts';
import { newWebhookSecret, signWebhook } from './signature.ts';
import { CLAIM_LEASE_MS, DELIVERY_TIMEOUT_MS, deliverJob, delivered, retryDelayMs } from './delivery.ts';
import {
  CreateWebhookInput,
  ListDeliveriesInput,
  ListWebhooksInput,
  RetryDeliveryInput,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryRecord,
  type WebhookPayload,
  type WebhookRecord,
  type WebhookWithSecret,
} from './schema.ts';

// DECISIONS "Webhooks" (hosted-api §5.8, §6): subscriptions owned per principal (docs/architecture.md "Ownership"), and
// the attempts of their deliveries. A delivery row is made in the transaction that appends its event (the store's
// fan-out) or, for a payment link's own webhook_url, in the paywall's record transaction (enqueueLinkDelivery); a
// graphile-worker job per attempt calls `attempt`, and `sweep` re-enqueues whatever is due and unattended.

interface Deps {
  store: Store;
  clock: Clock;
  outbound: OutboundHttp;
  /** failures nobody is waiting for (a receiver down), for the operator's log; never carries a secret */
  onWarning?: ((message: string, context: Record<string, unknown>) => void) | undefined;
}

const CursorShape = z.object({ id: z.string().max(64) });
const GONE = 'the receiver answered 410 Gone';
/** A receiver's answer body is not kept; a larger one is still an answer (its status counts). */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** One attempt, for the operator's log line: which delivery, where to (the host only: a URL may carry a token), how long. */
export interface AttemptSummary {
  delivery_id: string;
  webhook_id: string | null;
  /** a payment link's own webhook_url delivery: the link's row (webhook_id is null) */
  payment_link_pk: string | null;
  event_id: string | null;
  kind: string;
  phase: string;
  attempt: number;
  host: string | null;
  ms: number;
}

export type AttemptResult =
  | { outcome: 'skipped' }
  | { outcome: 'delivered'; status: number; delivery: AttemptSummary }
  | { outcome: 'retry'; nextAttemptAt: Date; error: string; status: number | null; delivery: AttemptSummary }
  | { outcome: 'failed'; error: string; status: number | null; delivery: AttemptSummary };

export class WebhookService {
  constructor(private readonly deps: Deps) {}

  toWire(r: WebhookRecord): Webhook {
    return {
      id: r.id,
      network: r.network,
      url: r.url,
      events: r.events,
      description: r.description,
      disabled: r.disabledAt !== null,
      disabled_reason: r.disabledReason,
      created_at: iso(r.createdAt),
      updated_at: iso(r.updatedAt),
    };
  }

  deliveryToWire(d: WebhookDeliveryRecord): WebhookDelivery {
    return {
      id: d.id,
      webhook_id: d.webhookId ?? '',
      event_id: d.eventId,
      type: d.kind,
      phase: d.phase,
      status: d.status,
      attempts: d.attempts,
      next_attempt_at: d.status === 'pending' ? isoOrNull(d.nextAttemptAt) : null,
      last_status: d.lastStatus,
      last_error: d.lastError,
      delivered_at: isoOrNull(d.deliveredAt),
      created_at: iso(d.createdAt),
    };
  }

  /**
   * POST /v1/webhooks: 201 with `secret`, shown here only. An admin key's subscription sees every event of its
   * network; any other sees its principal's. A URL the outbound guard refuses outright (not https, a private
   * address not on SVC_OUTBOUND_ALLOW, one of the gateway's own listeners) is invalid_request at `url`.
   */
  async create(caller: Caller, keyId: string, input: CreateWebhookInput): Promise<WebhookWithSecret> {
    const parsed = parseInput(CreateWebhookInput, input);
    await refuseUndeliverable(this.deps.outbound, parsed.url, 'url');
    const now = this.deps.clock.now();
    const events = [...new Set(parsed.events ?? ['*'])];
    const record: WebhookRecord = {
      id: newId(now.getTime()),
      network: caller.network,
      ownerPrincipal: caller.owner,
      scope: caller.role === 'admin' ? 'network' : 'principal',
      url: parsed.url,
      events: events.includes('*') ? ['*'] : events,
      description: parsed.description || null,
      secret: newWebhookSecret(),
      disabledAt: null,
      disabledReason: null,
      createdBy: keyId,
      createdAt: now,
      updatedAt: now,
    };
    await this.deps.store.webhooks.insert(record);
    return { ...this.toWire(record), secret: record.secret };
  }

  async get(caller: Caller, id: string): Promise<Webhook> {
    return this.toWire(await this.require(this.deps.store, caller, id));
  }

  /** Only the caller's principal's subscriptions (an admin's: the whole network), newest first. */
  async list(caller: Caller, input: ListWebhooksInput): Promise<Page<Webhook>> {
    const q = parseInput(ListWebhooksInput, input);
    const before = q.cursor ? decodeCursor(CursorShape, q.cursor).id : undefined;
    const rows = await this.deps.store.webhooks.list(caller.network, { owner: ownerFilter(caller), beforeId: before, limit: q.limit + 1 });
    return toPage(
      rows,
      q.limit,
      (r) => this.toWire(r),
      (r) => encodeCursor({ id: r.id }),
    );
  }

  /** 204; its deliveries go with it (a pending one is not attempted any more). */
  async delete(caller: Caller, id: string): Promise<void> {
    await this.deps.store.transaction(async (tx) => {
      await this.require(tx, caller, id);
      await tx.webhooks.delete(caller.network, id);
    });
  }

  /** A new secret, answered once; the old one stops signing at once (the next attempt is signed with the new one). */
  async rotateSecret(caller: Caller, id: string): Promise<WebhookWithSecret> {
    return this.deps.store.transaction(async (tx) => {
      await this.require(tx, caller, id);
      const rotated = await tx.webhooks.rotateSecret(caller.network, id, newWebhookSecret(), this.deps.clock.now());
      return { ...this.toWire(rotated!), secret: rotated!.secret };
    });
  }

  /** GET /v1/webhooks/{id}/deliveries: newest first. */
  async listDeliveries(caller: Caller, input: ListDeliveriesInput): Promise<Page<WebhookDelivery>> {
    const q = parseInput(ListDeliveriesInput, input);
    await this.require(this.deps.store, caller, q.id);
    const before = q.cursor ? decodeCursor(CursorShape, q.cursor).id : undefined;
    const rows = await this.deps.store.webhookDeliveries.listByWebhook(caller.network, q.id, { beforeId: before, limit: q.limit + 1 });
    return toPage(
      rows,
      q.limit,
      (r) => this.deliveryToWire(r),
      (r) => encodeCursor({ id: r.id }),
    );
  }

  /**
   * POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry: an attempt now, whatever the delivery's status, with the
   * retry schedule started afresh. A disabled subscription is 409 conflict.
   */
  async retryDelivery(caller: Caller, input: RetryDeliveryInput): Promise<WebhookDelivery> {
    const q = parseInput(RetryDeliveryInput, input);
    return this.deps.store.transaction(async (tx) => {
      const hook = await this.require(tx, caller, q.id);
      if (hook.disabledAt) {
        throw new DomainError('conflict', `Webhook ${q.id} is disabled${hook.disabledReason ? ` (${hook.disabledReason})` : ''}; create a new one.`, {
          id: q.id,
        });
      }
      const d = await tx.webhookDeliveries.requeue(caller.network, q.id, q.delivery_id, this.deps.clock.now());
      if (!d) throw new DomainError('not_found', `Webhook ${q.id} has no delivery ${q.delivery_id}.`, { id: q.id, delivery_id: q.delivery_id });
      await enqueue(tx, d.network, d.id);
      return this.deliveryToWire(d);
    });
  }

  /**
   * One attempt of one delivery (the deliver_webhook job; at least once, so any number of calls is safe): claims it
   * when it is pending, due and unattended; POSTs the signed payload through the outbound guard with the 15 s timeout;
   * records the outcome while still holding the claim, with the next attempt's job in the same transaction.
   */
  async attempt(network: Network, deliveryId: string): Promise<AttemptResult> {
    const { store, clock } = this.deps;
    const now = clock.now();
    const token = newId(now.getTime());
    const d = await store.webhookDeliveries.claim(network, deliveryId, { token, now, lockedUntil: new Date(now.getTime() + CLAIM_LEASE_MS) });
    if (!d) return { outcome: 'skipped' };
    const target = await store.webhookDeliveries.target(d);
    const summary = (url: string | null, ms: number, attempt: number): AttemptSummary => ({
      delivery_id: d.id,
      webhook_id: d.webhookId,
      payment_link_pk: d.webhookId ? null : d.linkPk,
      event_id: d.eventId,
      kind: d.kind,
      phase: d.phase,
      attempt,
      host: url === null ? null : hostOf(url),
      ms,
    });
    if (!target.ok) {
      await store.webhookDeliveries.finish(network, d.id, token, {
        status: 'failed',
        attempts: d.attempts,
        nextAttemptAt: null,
        lastStatus: d.lastStatus,
        lastError: target.reason,
        deliveredAt: null,
        at: clock.now(),
      });
      return { outcome: 'failed', error: target.reason, status: null, delivery: summary(null, 0, d.attempts) };
    }

    const body = JSON.stringify(payloadOf(d, target.event));
    const sentAt = clock.now();
    const headers = {
      ...signWebhook({ secret: target.secret, body, timestamp: Math.floor(sentAt.getTime() / 1000), id: d.id }),
      'content-type': 'application/json',
      'x-svc-event': d.kind,
      'x-svc-delivery': d.id,
    };
    const started = performance.now();
    const answer = await this.deps.outbound.request({
      url: target.url,
      method: 'POST',
      headers,
      body,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      maxResponseBytes: MAX_ANSWER_BYTES,
    });

    const at = clock.now();
    const attempts = d.attempts + 1;
    const delivery = summary(target.url, Math.round(performance.now() - started), attempts);
    const lastStatus = answer.ok ? answer.status : null;
    let outcome: DeliveryOutcome;
    let result: AttemptResult;
    if (answer.ok && delivered(answer.status)) {
      outcome = { status: 'delivered', attempts, nextAttemptAt: null, lastStatus, lastError: null, deliveredAt: at, at };
      result = { outcome: 'delivered', status: answer.status, delivery };
    } else {
      const error = answer.ok ? (answer.status === 410 ? GONE : `the receiver answered ${answer.status}`) : `${answer.reason}: ${answer.message}`;
      // A 410, or a target the outbound guard refuses (a URL stored before the rule, a name now resolving to a private
      // address): no later attempt can do better, so the delivery fails now with the reason, never retried.
      const final = answer.ok ? answer.status === 410 : answer.reason === 'url_refused';
      const delay = final ? null : retryDelayMs(attempts - d.attemptBase);
      const nextAttemptAt = delay === null ? null : new Date(at.getTime() + delay);
      outcome = { status: nextAttemptAt ? 'pending' : 'failed', attempts, nextAttemptAt, lastStatus, lastError: error, deliveredAt: null, at };
      result = nextAttemptAt
        ? { outcome: 'retry', nextAttemptAt, error, status: lastStatus, delivery }
        : { outcome: 'failed', error, status: lastStatus, delivery };
    }

    // Delivered or finally failed is one conditional write; a retry or a 410 adds writes that commit with it.
    const simple = !outcome.nextAttemptAt && lastStatus !== 410;
    const recorded = simple
      ? await store.webhookDeliveries.finish(network, d.id, token, outcome)
      : await store.transaction(async (tx) => {
          if (!(await tx.webhookDeliveries.finish(network, d.id, token, outcome))) return false;
          if (outcome.nextAttemptAt) await enqueue(tx, network, d.id, outcome.nextAttemptAt);
          // DECISIONS "Webhooks": a receiver answering 410 disables the subscription.
          if (lastStatus === 410 && d.webhookId) await tx.webhooks.disable(network, d.webhookId, GONE, at);
          return true;
        });
    if (!recorded) return { outcome: 'skipped' };
    if (result.outcome !== 'delivered') {
      // The operator's warning (and the console's webhook line for a failed attempt, interfaces/log.ts).
      this.deps.onWarning?.('webhook not delivered', {
        ...delivery,
        attempt: attempts,
        status: lastStatus,
        error: result.error,
        next_attempt_at: result.outcome === 'retry' ? iso(result.nextAttemptAt) : null,
      });
    }
    return result;
  }

  /**
   * The recurring safety net: re-enqueues pending deliveries that are due and that nobody is attempting — a runner
   * killed mid-delivery (its claim names a process that is gone), a job that ran before its due time by this clock.
   * Returns how many were enqueued.
   */
  async sweep(limit = 500): Promise<number> {
    const due = await this.deps.store.webhookDeliveries.listDue({ now: this.deps.clock.now(), limit });
    for (const d of due) await enqueue(this.deps.store, d.network, d.id);
    return due.length;
  }

  /** Another principal's subscription is not found, exactly like a missing one (docs/architecture.md "Ownership"). */
  private async require(repos: Repositories, caller: Caller, id: string): Promise<WebhookRecord> {
    const row = await repos.webhooks.get(caller.network, id);
    if (!row || !canAccess(caller, row.ownerPrincipal)) throw new DomainError('webhook_not_found', `No webhook ${id} on ${caller.network}.`, { id });
    return row;
  }
}

/**
 * DECISIONS "Webhooks", one outbound rule at every entry (POST /v1/webhooks `url`, a payment link's `webhook_url` at
 * create and update): a receiver URL the outbound guard refuses outright — not https, a private address not on
 * SVC_OUTBOUND_ALLOW, one of the gateway's own listeners, credentials in it — is invalid_request at `path` with code
 * `url_refused`. A name that does not resolve yet is accepted (each attempt checks again, and a refusal then fails
 * the delivery at once).
 */
export async function refuseUndeliverable(outbound: OutboundHttp, url: string, path: string): Promise<void> {
  const refused = await outbound.check(url);
  if (refused?.reason === 'url_refused') {
    throw DomainError.invalid([{ path, message: refused.message, code: 'url_refused' }], `The webhook URL is refused: ${refused.message}.`);
  }
}

/**
 * hosted-api §2.1 webhook_url: a payment link's own delivery, made inside the caller's transaction (the paywall's
 * record transaction) like a subscription's — same rows, same schedule, signed with the link's secret at attempt time.
 * `data` is the body's `data` (the link webhook's own shape).
 */
export async function enqueueLinkDelivery(
  tx: Repositories,
  input: { network: Network; linkPk: string; kind: string; phase?: EventPhase; data: Record<string, unknown>; now: Date },
): Promise<string> {
  const { now } = input;
  const id = newId(now.getTime());
  await tx.webhookDeliveries.insert({
    id,
    network: input.network,
    webhookId: null,
    linkPk: input.linkPk,
    eventId: null,
    kind: input.kind,
    phase: input.phase ?? 'confirmed',
    payload: input.data,
    status: 'pending',
    attempts: 0,
    attemptBase: 0,
    nextAttemptAt: now,
    lastStatus: null,
    lastError: null,
    deliveredAt: null,
    createdAt: now,
    updatedAt: now,
  });
  await enqueue(tx, input.network, id);
  return id;
}

async function enqueue(repos: Repositories, network: Network, deliveryId: string, runAt?: Date): Promise<void> {
  const job = deliverJob(network, deliveryId);
  await repos.jobs.add(job.task, job.payload, { jobKey: job.jobKey, ...(runAt ? { runAt } : {}) });
}

/** DECISIONS "Webhooks": `{ id: <delivery id>, type, phase, created_at, data: <event> }`. */
export function payloadOf(d: WebhookDeliveryRecord, event: EventRecord | null): WebhookPayload {
  return { id: d.id, type: d.kind, phase: d.phase, created_at: iso(d.createdAt), data: event ? toEvent(event) : (d.payload ?? {}) };
}

function hostOf(url: string): string | null {
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}
