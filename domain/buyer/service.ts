import type { BuyerCatalog } from './catalog.ts';
import type { BuyerPaymentService } from './payment.ts';
import type { SpendPolicyService } from './policy.ts';
import type { QuoteService } from './quote.ts';
import type { BuyerReceiptService } from './receipts.ts';

export { BuyerCatalog } from './catalog.ts';
export { BuyerPaymentService } from './payment.ts';
export { SpendPolicyService } from './policy.ts';
export { QuoteService } from './quote.ts';
export { BuyerReceiptService } from './receipts.ts';

/** The buyer side, one service per use case (hosted-api §4.8 "Buyer"). */
export interface BuyerServices {
  /** networks, currencies, the facilitator */
  catalog: BuyerCatalog;
  quotes: QuoteService;
  policies: SpendPolicyService;
  payments: BuyerPaymentService;
  receipts: BuyerReceiptService;
}
