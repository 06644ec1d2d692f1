import type { Store, EventFeed } from '../domain/ports/store.ts';
import type { Clock } from '../domain/ports/clock.ts';
import type { GatewaySettings } from '../domain/shared/settings.ts';
import { AccessService } from '../domain/access/service.ts';
import { AgentService } from '../domain/agents/service.ts';
import { PaymentLinkService } from '../domain/payment-links/service.ts';
import { EventService } from '../domain/events/service.ts';
import { MetaService } from '../domain/meta/service.ts';

/** The domain services every front door calls; built once by the composition root. */
export interface Services {
  access: AccessService;
  agents: AgentService;
  paymentLinks: PaymentLinkService;
  events: EventService;
  meta: MetaService;
  settings: GatewaySettings;
}

export function buildServices(deps: { store: Store; feed: EventFeed; clock: Clock; settings: GatewaySettings }): Services {
  const { store, feed, clock, settings } = deps;
  const agents = new AgentService({ store, clock });
  return {
    access: new AccessService({ store, clock }),
    agents,
    paymentLinks: new PaymentLinkService({ store, clock, agents, settings }),
    events: new EventService({ store, feed }),
    meta: new MetaService({ settings, clock }),
    settings,
  };
}
