import type { CosignResponse, FacilitatorHealth, FacilitatorRequest, SettleResponse, SupportedResponse, VerifyResponse } from '../facilitator/wire.ts';
import type { MppSettleRequest, MppSettleResponse } from '../facilitator/mpp.ts';
import type { PrepareAccountsRequest, PrepareAccountsResponse } from '../treasury/accounts.ts';

// The facilitator as the paywall sees it (fee-facilitator-mpp-tools §4.1, DECISIONS "Facilitator"). Two adapters:
// in-process (the FacilitatorService of this process) and HTTP (SVC_PAYWALL_FACILITATOR_URL, any x402 v2
// facilitator); test/adapters/facilitator-contract.ts holds both to this shape.
//
// A refused payment is a result, never a throw: verify → { isValid: false, invalidReason }, settle → { success:
// false, errorReason }. Throws only when the facilitator cannot be asked:
// - verify/supported/health unreachable or garbage → DomainError('facilitator_unavailable');
// - settle sent but no answer in time → DomainError('payment_pending', …, { signature: null }): the payment may
//   still land, so the caller must not treat it as refused. A settle the facilitator itself could not confirm in
//   time answers { success: false, errorReason: "settlement_pending", transaction: "<signature>" } instead.

export interface Facilitator {
  /** e.g. { kinds: [{ x402Version: 2, scheme: "exact", network: "solana:EtWT…" }], extensions: [], signers: { "solana:*": ["FeeP…"] } } */
  supported(): Promise<SupportedResponse>;
  /** e.g. { ok: true, fee_payer: "FeeP…", networks: ["chain-devnet"], protocol_fee: { bps: 100, enforcement: "enforce", authority: "Fee1…", authorities: {…} } } */
  health(): Promise<FacilitatorHealth>;
  verify(request: FacilitatorRequest): Promise<VerifyResponse>;
  settle(request: FacilitatorRequest): Promise<SettleResponse>;
  /**
   * Not x402: makes sure ATA(owner, asset) exists for each asset, creating the missing ones at the
   * facilitator's expense within its rent-sponsorship limits, so stock clients that need the seller's token account
   * to exist can pay. A refusal is an answer per account; throws facilitator_unavailable like the others.
   * e.g. { network: "solana:EtWT…", owner: "<treasury>", assets: ["4zMM…"] } →
   * { network, owner, accounts: [{ asset: "4zMM…", account: "9xQe…", ready: true, created: true }] }
   */
  prepareAccounts(request: PrepareAccountsRequest): Promise<PrepareAccountsResponse>;
  /**
   * The MPP rail's settle (POST /mpp/settle): the credential's challenge and transaction → { success, signature, slot }.
   * Refusals are results (errorReason, e.g. challenge_mismatch); throws like settle when no answer came.
   */
  mppSettle(request: MppSettleRequest): Promise<MppSettleResponse>;
  /**
   * Not x402 (a Solana Pay wallet signs and sends after the facilitator): the settlement transaction with the buyer's
   * slot still empty, verified as settle would (layout, fee leg, proven payee, the buyer's funds) but creating no token
   * account, signed in the fee payer's slot and returned — nothing is sent. Refusals are results (errorReason); throws
   * facilitator_unavailable like verify.
   */
  cosign(request: FacilitatorRequest): Promise<CosignResponse>;
}
