import type { Caller } from '../access/ownership.ts';
import type { Store } from '../ports/store.ts';
import type { TransactionService } from '../transactions/service.ts';
import { DomainError } from '../shared/errors.ts';
import { findStable, type StableSymbol } from '../shared/network.ts';
import { parseInput } from '../shared/validation.ts';
import { wholeUnitsToAtomic } from '../agents/build/execute.ts';
import type { SpendPolicyService } from './policy.ts';
import type { QuoteService } from './quote.ts';
import { ExecuteInput, type ExecuteResult, type Quote } from './schema.ts';

// POST /v1/buyer/payment/execute: the buyer agent's spend policy first, then the prepared buyer payment
// (buyer/payment/prepare, unchanged) for the caller to sign client-side and send to /v1/submit — the gateway never
// holds the executive's key. A denial answers 403 spend_denied with the reasons; nothing is prepared.

export interface BuyerPaymentServiceDeps {
  store: Store;
  quotes: QuoteService;
  policies: SpendPolicyService;
  transactions: TransactionService;
}

/**
 * Executes in one process at once: each holds its transaction's connection while the policy reads and the prepare take
 * a second one (and wait on the ledger), so they are admitted a few at a time — never enough to drain the pool and
 * leave every request waiting for a connection none will give back.
 */
export const EXECUTE_CONCURRENCY = 2;

export class BuyerPaymentService {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly deps: BuyerPaymentServiceDeps) {}

  private async admitted<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= EXECUTE_CONCURRENCY) await new Promise<void>((r) => this.waiting.push(r));
    else this.running++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }

  async execute(caller: Caller, input: ExecuteInput): Promise<ExecuteResult> {
    const p = parseInput(ExecuteInput, input);
    await this.deps.policies.owned(caller, p.buyer_agent);
    let quote: Quote;
    let currency: StableSymbol | undefined;
    if (p.payment_link !== undefined) {
      quote = await this.deps.quotes.quote(caller, { payment_link: p.payment_link });
      // buyer/payment/prepare pays a link in its primary currency: the first option of its offer.
      currency = quote.options[0]?.currency ?? undefined;
    } else {
      const stable = findStable(caller.network, p.currency!);
      if (!stable) throw DomainError.invalid([{ path: 'currency', message: `${p.currency} is not a stable of ${caller.network}`, code: 'invalid_currency' }]);
      const amount = wholeUnitsToAtomic(p.amount!, stable.decimals, 'amount', stable.symbol);
      quote = await this.deps.quotes.direct(caller, { pay_to: p.pay_to!, amount, currency: stable.symbol });
      currency = stable.symbol;
    }
    // One execute of an agent at a time, from the policy read to the prepared row's commit: the next one sees this
    // payment in flight, so two executes side by side cannot each pass the daily cap alone.
    return this.admitted(() =>
      this.deps.store.transaction(async (tx) => {
        if (!(await tx.buyer.tryLockPayments(caller.network, p.buyer_agent))) {
          throw new DomainError('conflict', `Another payment of agent ${p.buyer_agent} is being prepared; retry in a moment.`, {
            agent: p.buyer_agent,
            retry: true,
          });
        }
        const evaluation = await this.deps.policies.decide(caller, p.buyer_agent, quote, currency);
        if (evaluation.decision === 'deny') {
          throw new DomainError('spend_denied', `The spend policy of ${p.buyer_agent} denies this payment: ${evaluation.reasons.join(' ')}`, {
            reasons: evaluation.reasons,
            checks: evaluation.checks,
          });
        }
        const prepared = await this.deps.transactions.prepareRoute(caller, 'buyerPayment', p as Record<string, unknown>);
        return { decision: 'allow' as const, checks: evaluation.checks, prepared };
      }),
    );
  }
}
