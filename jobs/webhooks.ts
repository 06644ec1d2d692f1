import type { TaskHandler } from '../domain/ports/job-queue.ts';
import { DeliverWebhookPayload } from '../domain/webhooks/delivery.ts';
import type { WebhookService } from '../domain/webhooks/service.ts';
import type { JobLogger } from './maintenance.ts';

/**
 * One attempt of one webhook delivery (DECISIONS "Webhooks"). The outcome — delivered, a retry scheduled, failed — is
 * recorded by the service; only a fault of our own (the database) throws, and graphile-worker runs the job again.
 */
export const deliverWebhook =
  (deps: { webhooks: WebhookService; log: JobLogger }): TaskHandler =>
  async (payload) => {
    const parsed = DeliverWebhookPayload.safeParse(payload);
    if (!parsed.success) {
      deps.log.info({ payload }, 'deliver_webhook: a payload without network and delivery_id is dropped');
      return;
    }
    const result = await deps.webhooks.attempt(parsed.data.network, parsed.data.delivery_id);
    // The console's webhook line (interfaces/log.ts); a failed attempt is the service's warning "webhook not delivered".
    if (result.outcome === 'delivered') deps.log.info({ evt: 'webhook', outcome: 'delivered', status: result.status, ...result.delivery }, 'webhook delivered');
  };

/** Re-enqueues due deliveries nobody is attempting (a runner that died mid-delivery); every minute and at start. */
export const sweepWebhooks =
  (deps: { webhooks: WebhookService; log: JobLogger }): TaskHandler =>
  async () => {
    const enqueued = await deps.webhooks.sweep();
    if (enqueued) deps.log.info({ enqueued }, 'webhook deliveries due again');
  };
