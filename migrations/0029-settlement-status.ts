import type { MigrationSteps } from './steps.ts';

// The facilitator's settlements answer for their outcome (DECISIONS "Facilitator", x402 `settlement_pending`): a buyer
// or a seller asks by the signature, the transaction message hash (base64 SHA-256 of the message, the key the x402
// reference facilitator uses) or the payment-identifier extension's id. Settlement latency per network is read from the
// newest settled rows through their own index (a bounded read, never a scan of the table).
export const migration0029SettlementStatus: MigrationSteps = {
  up(addSql) {
    addSql(`alter table facilitator_settlements add column message_hash text null, add column payment_id text null;`);
    addSql(`create index facilitator_settlements_message_hash_idx on facilitator_settlements (message_hash) where message_hash is not null;`);
    addSql(`create index facilitator_settlements_payment_id_idx on facilitator_settlements (payment_id, created_at desc) where payment_id is not null;`);
    addSql(`create index facilitator_settlements_settled_idx on facilitator_settlements (network, updated_at desc) where status = 'settled';`);
  },
};
