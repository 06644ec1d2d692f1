import { DomainError } from '../shared/errors.ts';
import { CAIP2, findStable, type Network, type Stable, type StableSymbol } from '../shared/network.ts';
import { newId } from '../shared/ids.ts';
import { decodeCursor, encodeCursor, toPage, type Page } from '../shared/pagination.ts';
import { iso, isoOrNull, type GatewaySettings } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { Store, Repositories } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { AgentService } from '../agents/service.ts';
import { canAccess, ownerFilter, type Caller } from '../access/ownership.ts';
import { payToFor, treasuryOf } from '../treasury/derive.ts';
import type { PayToReadiness, TreasuryAccounts } from '../treasury/accounts.ts';
import { parsePrice, ParsePriceInput, priceSymbol } from './price.ts';
import { newWebhookSecret } from '../webhooks/signature.ts';
import { refuseUndeliverable } from '../webhooks/service.ts';
import type { OutboundHttp } from '../ports/outbound-http.ts';
import { z } from 'zod';
import { newEvent, type EventMetadata } from '../events/kinds.ts';
import {
  accessWindowSeconds,
  CreatePaymentLinkInput,
  formatAccessWindow,
  ListPaymentLinksInput,
  PreviewPaymentLinkInput,
  UpdatePaymentLinkInput,
  type AcceptEntry,
  type PaymentLink,
  type PaymentLinkRecord,
  type PaymentLinkWithSecret,
} from './schema.ts';

interface Deps {
  store: Store;
  clock: Clock;
  agents: AgentService;
  settings: GatewaySettings;
  /** told after a link was written (committed), e.g. to drop a cached copy */
  onChange?: (network: Network, id: string) => void;
  /** Makes the treasury's token accounts exist for the link's currencies (absent: not checked) */
  treasuryAccounts?: TreasuryAccounts | undefined;
  /** the outbound guard deliveries go through: a webhook_url it refuses is refused up front */
  outbound: OutboundHttp;
}

const CursorShape = z.object({ pk: z.string() });

/**
 * {base_url}/x/{id}; the paywall resolves chain-mainnet unless told otherwise (hosted-api §4.2 rule 2), so a devnet
 * link's URL names its network and works as shared.
 */
export function shareUrl(baseUrl: string, network: Network, id: string): string {
  const url = `${baseUrl}/x/${encodeURIComponent(id)}`;
  return network === 'chain-mainnet' ? url : `${url}?network=${network}`;
}

/**
 * hosted-api §2.3: one entry for the primary currency, then one per extra accepted currency. pay_to is the x402 payTo
 * (the treasury); `ready` is what the caller learnt about the token accounts (null: not checked). An `unproven` owner
 * agent is never ready: nothing is paid into its treasury (DECISIONS "Agents, submissions and events").
 */
export function acceptsFor(
  link: { network: Network; ownerAgent: string; amountAtomic: bigint; currencies: StableSymbol[] },
  readiness: { ready?: ReadonlyMap<StableSymbol, PayToReadiness> | undefined; unproven?: boolean } = {},
): AcceptEntry[] {
  const { network, ownerAgent, amountAtomic, currencies } = link;
  const { ready, unproven = false } = readiness;
  return currencies.map((symbol) => {
    const stable = findStable(network, symbol)!;
    return {
      scheme: 'exact',
      network: CAIP2[network],
      pay_to: treasuryOf(ownerAgent),
      pay_to_token_account: payToFor(ownerAgent, stable),
      pay_to_ready: unproven ? false : (ready?.get(stable.symbol)?.ready ?? null),
      asset: stable.mint,
      amount: amountAtomic.toString(),
      currency: stable.symbol,
    };
  });
}

function resolveCurrencies(network: Network, primary: Stable, extra: StableSymbol[] | undefined): StableSymbol[] {
  const extras = [...new Set(extra ?? [])].filter((s) => s !== primary.symbol);
  extras.forEach((symbol, i) => {
    if (!findStable(network, symbol)) {
      throw DomainError.invalid(
        [{ path: `accepts_currencies.${i}`, message: `${symbol} is not available on ${network}`, code: 'invalid_currency' }],
        `${symbol} is not available on ${network}.`,
      );
    }
  });
  return [primary.symbol, ...extras];
}

export class PaymentLinkService {
  constructor(private readonly deps: Deps) {}

  toWire(r: PaymentLinkRecord, ready?: ReadonlyMap<StableSymbol, PayToReadiness>): PaymentLink {
    const { baseUrl, facilitatorUrl } = this.deps.settings;
    const primary = findStable(r.network, r.currency)!;
    return {
      id: r.id,
      network: r.network,
      label: r.label,
      owner_agent: r.ownerAgent,
      pay_to: treasuryOf(r.ownerAgent),
      pay_to_token_account: payToFor(r.ownerAgent, primary),
      method: r.method,
      path: `/x/${r.id}`,
      price: r.price,
      currency: r.currency,
      accepts_currencies: r.acceptsCurrencies,
      protocol: r.protocol,
      response: r.response,
      webhook_url: r.webhookUrl,
      webhook_secret_set: r.webhookSecret !== null,
      wrap_receipt: r.wrapReceipt,
      settle_policy: r.settlePolicy,
      access_window: r.accessWindowSeconds === null ? null : formatAccessWindow(r.accessWindowSeconds),
      request_binding: r.requestBinding,
      disabled: r.disabled,
      facilitator: facilitatorUrl,
      share_url: shareUrl(baseUrl, r.network, r.id),
      accepts: acceptsFor(
        { network: r.network, ownerAgent: r.ownerAgent, amountAtomic: r.amountAtomic, currencies: [r.currency, ...r.acceptsCurrencies] },
        { ready, unproven: !r.ownerAgentProven },
      ),
      counters: {
        call_count: r.callCount,
        settled_count: r.settledCount,
        last_called_at: isoOrNull(r.lastCalledAt),
        last_settled_at: isoOrNull(r.lastSettledAt),
        last_tx_sig: r.lastTxSig,
      },
      metadata: r.metadata,
      created_at: iso(r.createdAt),
      updated_at: iso(r.updatedAt),
    };
  }

  /** The secret is in this answer only (docs/architecture.md "Ownership" and secrets); the event carries the link without it. */
  async create(caller: Caller, keyId: string, input: CreatePaymentLinkInput): Promise<PaymentLinkWithSecret> {
    const parsed = parseInput(CreatePaymentLinkInput, input);
    const { network } = caller;
    if (parsed.webhook_url) await refuseUndeliverable(this.deps.outbound, parsed.webhook_url, 'webhook_url');
    await this.payee(caller, parsed.owner_agent);
    const price = parsePrice(parsed.price, network, parsed.currency);
    const currencies = resolveCurrencies(network, price.stable, parsed.accepts_currencies);
    const now = this.deps.clock.now();
    const pk = newId(now.getTime());
    const record: PaymentLinkRecord = {
      pk,
      id: parsed.id ?? pk,
      network,
      label: parsed.label,
      ownerAgent: parsed.owner_agent,
      method: parsed.method,
      price: parsed.price,
      currency: price.stable.symbol,
      amountAtomic: price.amountAtomic,
      acceptsCurrencies: currencies.slice(1),
      protocol: parsed.protocol ?? 'x402',
      response: parsed.response,
      webhookUrl: parsed.webhook_url ?? null,
      webhookSecret: parsed.webhook_url ? newWebhookSecret() : null,
      wrapReceipt: parsed.wrap_receipt ?? false,
      settlePolicy: parsed.settle_policy ?? 'before_forward',
      accessWindowSeconds: parsed.access_window ? accessWindowSeconds(parsed.access_window)! : null,
      requestBinding: parsed.request_binding ?? 'optional',
      metadata: parsed.metadata ?? {},
      disabled: false,
      callCount: 0,
      settledCount: 0,
      lastCalledAt: null,
      lastSettledAt: null,
      lastTxSig: null,
      createdBy: keyId,
      ownerPrincipal: caller.owner,
      createdAt: now,
      updatedAt: now,
      ownerAgentProven: true,
    };
    const link = this.toWire(record);
    await this.deps.store.transaction(async (tx) => {
      await tx.paymentLinks.insert(record);
      await this.emit(tx, 'payment_link.created', record, { payment_link: link });
    });
    this.deps.onChange?.(network, record.id);
    return withSecret(await this.withReadiness(record, link), record.webhookSecret);
  }

  /** After the commit (no transaction held across ledger I/O): the accounts made ready, in the answer. */
  private async withReadiness(record: PaymentLinkRecord, link: PaymentLink): Promise<PaymentLink> {
    if (!this.deps.treasuryAccounts) return link;
    const ready = await this.deps.treasuryAccounts.ensure(record.network, record.ownerAgent, [record.currency, ...record.acceptsCurrencies]);
    return this.toWire(record, ready);
  }

  async get(caller: Caller, id: string): Promise<PaymentLink> {
    return this.toWire(await this.require(this.deps.store, caller, id));
  }

  /** Only the caller's principal's links (an admin's: the whole network), through the (network, owner, pk) index. */
  async list(caller: Caller, input: ListPaymentLinksInput): Promise<Page<PaymentLink>> {
    const q = parseInput(ListPaymentLinksInput, input);
    const before = q.cursor ? decodeCursor(CursorShape, q.cursor).pk : undefined;
    const rows = await this.deps.store.paymentLinks.list(caller.network, {
      owner: ownerFilter(caller),
      ownerAgent: q.owner_agent,
      beforePk: before,
      limit: q.limit + 1,
    });
    return toPage(
      rows,
      q.limit,
      (r) => this.toWire(r),
      (r) => encodeCursor({ pk: r.pk }),
    );
  }

  /** Answers webhook_secret only when this PATCH made the link's first secret (a first webhook_url). */
  async update(caller: Caller, input: UpdatePaymentLinkInput): Promise<PaymentLinkWithSecret> {
    const { id, ...patch } = parseInput(UpdatePaymentLinkInput, input);
    const { network } = caller;
    const changed = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
    // before the transaction: the first use of an unproven agent reads the ledger, the guard may resolve a name, and
    // no transaction waits on either
    if (patch.webhook_url) await refuseUndeliverable(this.deps.outbound, patch.webhook_url, 'webhook_url');
    if (patch.owner_agent !== undefined) await this.payee(caller, patch.owner_agent);
    const updated = await this.deps.store.transaction(async (tx) => {
      const current = await this.require(tx, caller, id);
      if (changed.length === 0) return { link: this.toWire(current), record: null, secret: null };
      const next: PaymentLinkRecord = { ...current, updatedAt: this.deps.clock.now() };
      if (patch.owner_agent !== undefined) {
        await this.deps.agents.requireOwned(caller, patch.owner_agent).catch(rethrowAt('owner_agent'));
        next.ownerAgent = patch.owner_agent;
        next.ownerAgentProven = true;
      }
      if (patch.price !== undefined || patch.currency !== undefined || patch.accepts_currencies !== undefined) {
        // A new currency without a new price re-reads the stored price text in that currency; a new price keeps the
        // stored currency unless it names a symbol itself (PATCH changes only what it is given).
        const keepCurrency = patch.price === undefined || priceSymbol(patch.price) === undefined;
        const price = parsePrice(patch.price ?? current.price, network, patch.currency ?? (keepCurrency ? current.currency : undefined));
        next.price = patch.price ?? current.price;
        next.currency = price.stable.symbol;
        next.amountAtomic = price.amountAtomic;
        next.acceptsCurrencies = resolveCurrencies(network, price.stable, patch.accepts_currencies ?? current.acceptsCurrencies).slice(1);
      }
      if (patch.label !== undefined) next.label = patch.label;
      if (patch.method !== undefined) next.method = patch.method;
      if (patch.protocol !== undefined) next.protocol = patch.protocol;
      if (patch.response !== undefined) next.response = patch.response;
      if (patch.webhook_url !== undefined) {
        next.webhookUrl = patch.webhook_url;
        // The secret outlives URL changes (receivers keep verifying); it is made when a first URL is set.
        if (patch.webhook_url && !next.webhookSecret) next.webhookSecret = newWebhookSecret();
      }
      if (patch.wrap_receipt !== undefined) next.wrapReceipt = patch.wrap_receipt;
      if (patch.settle_policy !== undefined) next.settlePolicy = patch.settle_policy;
      if (patch.access_window !== undefined) next.accessWindowSeconds = patch.access_window ? accessWindowSeconds(patch.access_window)! : null;
      if (patch.request_binding !== undefined) next.requestBinding = patch.request_binding;
      if (patch.metadata !== undefined) next.metadata = patch.metadata;
      if (patch.disabled !== undefined) next.disabled = patch.disabled;
      await tx.paymentLinks.update(next);
      const link = this.toWire(next);
      await this.emit(tx, 'payment_link.updated', next, { payment_link: link, changed });
      return { link, record: next, secret: next.webhookSecret !== current.webhookSecret ? next.webhookSecret : null };
    });
    this.deps.onChange?.(network, id);
    const offerChanged = ['owner_agent', 'price', 'currency', 'accepts_currencies'].some((k) => changed.includes(k));
    const link = updated.record && offerChanged ? await this.withReadiness(updated.record, updated.link) : updated.link;
    return withSecret(link, updated.secret);
  }

  /**
   * POST /v1/payment-links/{id}/webhook-secret/rotate: a new secret, answered once; the old one stops signing at once.
   * The event says that it changed, never what it is.
   */
  async rotateWebhookSecret(caller: Caller, id: string): Promise<PaymentLinkWithSecret> {
    const rotated = await this.deps.store.transaction(async (tx) => {
      const current = await this.require(tx, caller, id);
      const next: PaymentLinkRecord = { ...current, webhookSecret: newWebhookSecret(), updatedAt: this.deps.clock.now() };
      await tx.paymentLinks.update(next);
      const link = this.toWire(next);
      await this.emit(tx, 'payment_link.updated', next, { payment_link: link, changed: ['webhook_secret'] });
      return withSecret(link, next.webhookSecret);
    });
    this.deps.onChange?.(caller.network, id);
    return rotated;
  }

  /** hosted-api §3.2: 204, event payment_link.deleted, slug reusable on the same network. */
  async delete(caller: Caller, id: string): Promise<void> {
    const { network } = caller;
    await this.deps.store.transaction(async (tx) => {
      const current = await this.require(tx, caller, id);
      await tx.paymentLinks.delete(network, id);
      await this.emit(tx, 'payment_link.deleted', current, {});
    });
    this.deps.onChange?.(network, id);
  }

  /** hosted-api §4.1 preview: nothing is stored. */
  async preview(caller: Caller, input: PreviewPaymentLinkInput) {
    const parsed = parseInput(PreviewPaymentLinkInput, input);
    const { network } = caller;
    await this.payee(caller, parsed.owner_agent);
    const price = parsePrice(parsed.price, network, parsed.currency);
    const currencies = resolveCurrencies(network, price.stable, parsed.accepts_currencies);
    return {
      network,
      owner_agent: parsed.owner_agent,
      treasury: treasuryOf(parsed.owner_agent),
      pay_to: treasuryOf(parsed.owner_agent),
      pay_to_token_account: payToFor(parsed.owner_agent, price.stable),
      facilitator: this.deps.settings.facilitatorUrl,
      price: parsed.price,
      currency: price.stable.symbol,
      amount_atomic: price.amountAtomic.toString(),
      accepts: acceptsFor({ network, ownerAgent: parsed.owner_agent, amountAtomic: price.amountAtomic, currencies }),
    };
  }

  parsePrice(network: Network, input: z.input<typeof ParsePriceInput>) {
    const parsed = parseInput(ParsePriceInput, input);
    const price = parsePrice(parsed.price, network, parsed.currency);
    return {
      amount_atomic: price.amountAtomic.toString(),
      currency: price.stable.symbol,
      decimals: price.stable.decimals,
      display: price.display,
    };
  }

  /**
   * A link's owner_agent: the caller's agent (404 / 403), proven on the ledger (DECISIONS "Agents, submissions and
   * events"; an unproven one gets its first-use look, then `agent_unproven` saying what to do).
   */
  private async payee(caller: Caller, mint: string): Promise<void> {
    const agent = await this.deps.agents.requireOwned(caller, mint).catch(rethrowAt('owner_agent'));
    await this.deps.agents.proof.requireProven(agent, 'link').catch(rethrowAt('owner_agent'));
  }

  /** Another principal's link is not found, exactly like a missing one: its existence is not disclosed. */
  private async require(repos: Repositories, caller: Caller, id: string): Promise<PaymentLinkRecord> {
    const row = await repos.paymentLinks.get(caller.network, id);
    if (!row || !canAccess(caller, row.ownerPrincipal)) {
      throw new DomainError('payment_link_not_found', `No payment link ${id} on ${caller.network}.`, { id });
    }
    return row;
  }

  private async emit<K extends 'payment_link.created' | 'payment_link.updated' | 'payment_link.deleted'>(
    tx: Repositories,
    kind: K,
    link: PaymentLinkRecord,
    extra: Omit<EventMetadata<K>, 'payment_link_id'>,
  ) {
    const now = this.deps.clock.now();
    const fields = {
      id: newId(now.getTime()),
      phase: 'confirmed' as const,
      network: link.network,
      agentAsset: link.ownerAgent,
      owner: link.ownerPrincipal,
      createdAt: now,
      confirmedAt: now,
    };
    await tx.events.append(newEvent(kind, fields, { payment_link_id: link.id, ...extra } as EventMetadata<K>));
  }
}

/** The secret a call made, in its answer only. */
function withSecret(link: PaymentLink, secret: string | null): PaymentLinkWithSecret {
  return secret === null ? link : { ...link, webhook_secret: secret };
}

/** A missing owner agent (404 agent_not_found), another principal's (403 forbidden) or an unproven one names the field. */
function rethrowAt(path: string) {
  return (e: unknown): never => {
    if (e instanceof DomainError && (e.code === 'agent_not_found' || e.code === 'forbidden' || e.code === 'agent_unproven')) {
      throw new DomainError(e.code, e.message, { ...e.details, path });
    }
    throw e;
  };
}
