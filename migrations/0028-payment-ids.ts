import type { MigrationSteps } from './steps.ts';

// x402 payment-identifier (domain/paywall/payment-id.ts): a buyer's payment id, per link, bound to the payment it first
// came with (the paid_calls key, the SHA-256 of the transaction's message) for the 24 h replay window. The primary key
// decides two requests racing with one id; the clean-up job prunes expired ids with the paid calls.
export const migration0028PaymentIds: MigrationSteps = {
  up(addSql) {
    addSql(`create table payment_ids (
      network text not null,
      link_pk text not null,
      payment_id text not null,
      payment_key text not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      primary key (network, link_pk, payment_id)
    );`);
    addSql(`create index payment_ids_expires_idx on payment_ids (expires_at);`);
  },
};
