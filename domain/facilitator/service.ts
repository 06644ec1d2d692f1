import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { PublicKey, TransactionMessage, VersionedTransaction } from '@solana/web3.js';
import { createAssociatedTokenAccountIdempotentInstruction } from '@solana/spl-token';
import { encodeBase58 } from '../shared/base58.ts';
import { decodeMint, decodeTokenAccount, isTokenProgram } from '../shared/token-account.ts';
import { CAIP2, type Network, STABLES, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, X402_V1_NETWORK } from '../shared/network.ts';
import type { Clock } from '../ports/clock.ts';
import type { Facilitator } from '../ports/facilitator.ts';
import type { FacilitatorStore, SettlementRecord } from '../ports/facilitator-store.ts';
import type { Ledger, LedgerTransactionError } from '../ports/ledger.ts';
import type { GatewaySettings } from '../shared/settings.ts';
import { ceilDiv } from '../shared/money.ts';
import { parseInput } from '../shared/validation.ts';
import { ataOf } from './ata.ts';
import { decodeTransaction } from './decode.ts';
import type { FeePayerSigner } from './ed25519.ts';
import {
  DEFAULT_MAX_TIMEOUT_SECONDS,
  FacilitatorPolicy,
  FeeExtension,
  FEE_EXTENSION_KEY,
  type FeeTerms,
  type PaymentRequirements,
  type VerifyValid,
} from './schema.ts';
import { splitsMismatch } from './splits.ts';
import { verifyPayment } from './verify.ts';
import { acceptOfCharge, bindingOf, MPP_INTENT, MPP_METHOD, MppSettleRequest, SolanaChargeRequest, type MppSettleResponse } from './mpp.ts';
import {
  type AcceptsOffer,
  type AcceptsRequest,
  type AcceptsResponse,
  FacilitatorRequest,
  type CosignResponse,
  networkFromX402,
  paymentIdOf,
  requirementsV2,
  type SettlementStatus,
  SettlementStatusQuery,
  type FacilitatorCosts,
  type FacilitatorHealth,
  type FacilitatorReason,
  type SettleResponse,
  type SupportedResponse,
  type VerifyResponse,
  type X402RequirementsV2,
} from './wire.ts';
import type { PreparedAccount, PrepareAccountsRequest, PrepareAccountsResponse } from '../treasury/accounts.ts';

// The facilitator's use cases (fee-facilitator-mpp-tools §4.1, DECISIONS "Facilitator"): the pure verify of
// verify.ts plus what needs state and the ledger — the offer's fee terms against ours, rent sponsorship, the
// duplicate-settlement guard, co-signing, simulation, broadcast and confirmation.

/** Rent-exempt minimum of an associated token account: 165 bytes (SPL Token), 170 (Token-2022 with ImmutableOwner). */
const ATA_RENT: Record<string, bigint> = { [TOKEN_PROGRAM_ID]: 2_039_280n, [TOKEN_2022_PROGRAM_ID]: 2_074_080n };

export interface FacilitatorSettings {
  /** networks this facilitator settles on; each needs a ledger */
  networks: Network[];
  fee: GatewaySettings['fee'];
  /** lamports of token-account rent the facilitator sponsors per network per UTC day */
  rentBudgetLamports: bigint;
  /** how long settle waits for confirmation before answering settlement_pending */
  confirmTimeoutMs: number;
  confirmPollMs?: number;
}

export interface FacilitatorDeps {
  ledgers: Partial<Record<Network, Ledger>>;
  store: FacilitatorStore;
  signer: FeePayerSigner;
  clock: Clock;
  settings: FacilitatorSettings;
  /**
   * DECISIONS "Agents, submissions and events": no settlement into the treasury of an agent recorded here and not
   * proven on the ledger (AgentProof.refusalOfPayTo; absent: not checked)
   */
  payees?: { refusalOfPayTo(network: Network, payTo: string): Promise<{ message: string } | null> } | undefined;
  /** fee-leg findings under SVC_FEE_ENFORCE=warn, and anything else an operator should see */
  onWarning?: (message: string, context: Record<string, unknown>) => void;
}

/** `details`: what a client needs to act on the reason, e.g. insufficient_allowance's { allowance_atomic, required_atomic } */
type Failure = { ok: false; reason: FacilitatorReason; message: string; payer?: string | undefined; details?: Record<string, unknown> | undefined };

interface Prepared {
  ok: true;
  network: Network;
  ledger: Ledger;
  /** the network as the request spelled it (echoed in the settle response) */
  wireNetwork: string;
  requirements: PaymentRequirements;
  transaction: Uint8Array;
  /** the payment-identifier extension's id, when the payload carries one */
  paymentId: string | null;
}

interface Checked {
  prepared: Prepared;
  verdict: VerifyValid;
  /** the co-signed wire transaction */
  signed: Uint8Array;
  signature: string;
  blockhash: string;
  /** base64 SHA-256 of the message: the x402 reference facilitator's key of a payment (GET /status) */
  messageHash: string;
  /** token accounts this settlement makes the fee payer create, with the in-transaction ones flagged */
  creations: { account: string; owner: string; inTransaction: boolean }[];
}

/** how long (real time) the confirmation waits on the ledger's notification before polling on the Clock */
const NOTIFIED_WAIT_MS = 5_000;

const fail = (reason: FacilitatorReason, message: string, payer?: string): Failure => ({ ok: false, reason, message, payer });

export class FacilitatorService implements Facilitator {
  constructor(private readonly deps: FacilitatorDeps) {}

  get feePayer(): string {
    return this.deps.signer.address;
  }

  /** What this facilitator brings to every verify: its fee payer and the caps /supported publishes (one definition). */
  private get policy(): z.output<typeof FacilitatorPolicy> {
    return FacilitatorPolicy.parse({ feePayer: this.feePayer, enforcement: this.deps.settings.fee.enforcement });
  }

  /**
   * GET /supported (fee-facilitator-mpp-tools §4.1): one kind per (version, network). With the fee on, `svc.fee` is a
   * listed extension and each kind's extra carries the terms this facilitator holds an offer's extra["svc.fee"] to
   * (§2.1) — a seller copies them into its offers to charge the protocol fee; an offer without them settles as plain
   * x402 with no fee leg.
   */
  async supported(): Promise<SupportedResponse> {
    const { fee } = this.deps.settings;
    const extra = (n: Network) => ({
      feePayer: this.feePayer,
      ...(fee.bps > 0 ? { [FEE_EXTENSION_KEY]: { v: '1', bps: fee.bps, feeAuthority: fee.authorities[n] } satisfies FeeExtension } : {}),
    });
    const kinds = this.deps.settings.networks.flatMap((n) => [
      { x402Version: 2, scheme: 'exact', network: CAIP2[n], extra: extra(n) },
      { x402Version: 1, scheme: 'exact', network: X402_V1_NETWORK[n], extra: extra(n) },
    ]);
    return { kinds, extensions: fee.bps > 0 ? [FEE_EXTENSION_KEY] : [], signers: { 'solana:*': [this.feePayer] }, costs: this.costs() };
  }

  /** The caps verify holds a transaction to (the same policy object) and the rent rules settle applies. */
  private costs(): FacilitatorCosts {
    const { computeUnitLimitMax, computeUnitPriceMax } = this.policy;
    const rent: Record<string, string> = {};
    for (const [program, lamports] of Object.entries(ATA_RENT)) rent[program] = lamports.toString();
    return {
      computeUnitLimitMax,
      computeUnitPriceMaxMicroLamports: computeUnitPriceMax,
      priorityFeeMaxLamports: ceilDiv(BigInt(computeUnitLimitMax) * BigInt(computeUnitPriceMax), 1_000_000n).toString(),
      rent: {
        sponsorsTokenAccounts: this.deps.settings.rentBudgetLamports > 0n,
        perOwnerAndMint: 1,
        dailyBudgetLamports: this.deps.settings.rentBudgetLamports.toString(),
        tokenAccountLamports: rent,
      },
    };
  }

  /** p50/p95 of the newest settlements of a network (GET /v1/metrics/settlement): from the facilitator's own rows. */
  settlementLatency(network: Network, options: { since: Date; limit: number }): Promise<{ count: number; p50Ms: number | null; p95Ms: number | null }> {
    return this.deps.store.settlementLatency(network, options);
  }

  /**
   * GET /status: the outcome of this facilitator's settlement of one payment, by signature, message hash or
   * payment-identifier id. A pending row is read against the ledger (one status read, nothing written): a transaction
   * confirmed there is settled — or failed — whatever request still has to reconcile the row.
   */
  async status(query: unknown): Promise<SettlementStatus> {
    const q = parseInput(SettlementStatusQuery, query);
    const served = this.deps.settings.networks;
    const asked = q.network === undefined ? undefined : networkFromX402(q.network);
    const networks = q.network === undefined ? served : asked && served.includes(asked) ? [asked] : [];
    const unknown: SettlementStatus = { status: 'unknown', transaction: q.transaction ?? '', network: q.network ?? '' };
    if (!networks.length) return unknown;
    const key = q.transaction
      ? { signature: q.transaction }
      : q.messageHash
        ? { messageHash: /^[0-9a-fA-F]{64}$/.test(q.messageHash) ? Buffer.from(q.messageHash, 'hex').toString('base64') : q.messageHash }
        : { paymentId: q.paymentId! };
    const [row] = await this.deps.store.findSettlements(key, { networks, limit: 1 });
    if (!row) return unknown;
    let status: SettlementStatus['status'] = row.status;
    if (row.status === 'pending') {
      const [seen] = await (this.deps.ledgers[row.network]?.getSignatureStatuses([row.signature]) ?? Promise.resolve([null])).catch(() => [null]);
      if (seen && seen.confirmationStatus !== 'processed') status = seen.err === null ? 'settled' : 'failed';
    }
    return {
      status,
      transaction: row.signature,
      network: CAIP2[row.network],
      payer: row.payer,
      messageHash: row.messageHash,
      paymentId: row.paymentId,
      ...(row.status === 'failed' && row.error ? { errorReason: row.error } : {}),
      updatedAt: row.updatedAt.toISOString(),
    };
  }

  /**
   * POST /accepts, faremeter's facilitator endpoint (@faremeter/middleware with `facilitatorURL` posts its seller's
   * offers here and serves the answer as its 402): each exact offer on a network and mint this facilitator settles,
   * completed with what a buyer builds the transaction from — extra.feePayer, decimals, tokenProgram and a recent
   * blockhash, as faremeter's own Solana facilitator answers — and a timeout when the seller gave none. Offers it
   * cannot settle are left out, as faremeter's facilitator does, and `error` names why.
   */
  async accepts(request: AcceptsRequest): Promise<AcceptsResponse> {
    const accepts: X402RequirementsV2[] = [];
    const refused: string[] = [];
    const blockhashes = new Map<Network, Promise<string>>();
    for (const [i, offer] of request.accepts.entries()) {
      const completed = await this.completeOffer(offer, blockhashes);
      if ('ok' in completed) refused.push(`accepts[${i}]: ${completed.message}`);
      else accepts.push(completed);
    }
    return { x402Version: 2, ...(refused.length ? { error: refused.join('; ') } : {}), resource: request.resource ?? { url: '' }, accepts };
  }

  private async completeOffer(offer: AcceptsOffer, blockhashes: Map<Network, Promise<string>>): Promise<X402RequirementsV2 | Failure> {
    if (offer.scheme !== 'exact') return fail('unsupported_scheme', `scheme ${offer.scheme} is not supported; only exact`);
    const network = networkFromX402(offer.network);
    const ledger = network && this.deps.settings.networks.includes(network) ? this.deps.ledgers[network] : undefined;
    if (!network || !ledger) return fail('unsupported_network', `network ${offer.network} is not served by this facilitator`);
    const mint = await this.mintOf(network, ledger, offer.asset);
    if (!mint) return fail('unsupported_asset', `${offer.asset} is not an SPL Token or Token-2022 mint on ${network}`);
    const extra = offer.extra ?? {};
    const fee = this.feeTerms(network, extra);
    if (fee && !fee.ok) return fee;
    // one blockhash per network and answer
    let blockhash = blockhashes.get(network);
    if (!blockhash) {
      blockhash = ledger.getLatestBlockhash().then((b) => b.blockhash);
      blockhashes.set(network, blockhash);
    }
    return {
      ...offer,
      network: CAIP2[network],
      maxTimeoutSeconds: offer.maxTimeoutSeconds || DEFAULT_MAX_TIMEOUT_SECONDS,
      extra: { ...extra, feePayer: this.feePayer, decimals: mint.decimals, tokenProgram: mint.tokenProgram, recentBlockhash: await blockhash },
    };
  }

  async health(): Promise<FacilitatorHealth> {
    const { networks, fee } = this.deps.settings;
    const authorities: Record<string, string> = {};
    for (const n of networks) authorities[n] = fee.authorities[n];
    return {
      ok: true,
      fee_payer: this.feePayer,
      networks,
      protocol_fee: { bps: fee.bps, enforcement: fee.enforcement, authority: fee.authorities[networks[0] ?? 'chain-devnet'], authorities },
    };
  }

  async verify(request: FacilitatorRequest): Promise<VerifyResponse> {
    const checked = await this.check(request);
    if (!checked.ok) return { isValid: false, invalidReason: checked.reason, invalidMessage: checked.message, payer: checked.payer };
    const { prepared, verdict, signature, creations } = checked.value;
    const existing = await this.deps.store.getSettlement(prepared.network, signature);
    if (existing && existing.status !== 'failed') {
      return {
        isValid: false,
        invalidReason: 'duplicate_settlement',
        invalidMessage: `transaction ${signature} was already submitted for settlement`,
        payer: verdict.payer,
      };
    }
    for (const c of creations) {
      const decision = await this.deps.store.checkSponsorship(this.sponsorship(prepared, c));
      if (decision !== 'ok') return { isValid: false, ...this.notSponsored(decision, c.account), payer: verdict.payer };
    }
    // Simulation needs the seller account to exist; when the facilitator will create it first, the buyer's funds are
    // read instead (settle's send preflights it after the creation).
    const refused = creations.some((c) => !c.inTransaction)
      ? await this.canPay(prepared, verdict)
      : await this.explained(prepared, verdict, await this.simulate(prepared.ledger, checked.value.signed));
    if (refused)
      return {
        isValid: false,
        invalidReason: refused.reason,
        invalidMessage: refused.message,
        ...(refused.details ? { invalidDetails: refused.details } : {}),
        payer: verdict.payer,
      };
    return { isValid: true, payer: verdict.payer };
  }

  async settle(request: FacilitatorRequest): Promise<SettleResponse> {
    return this.settleAs(request, 'x402');
  }

  /** settle under one rail's instruction layout (verify.ts: 'mpp' also takes the stock MPP clients' order). */
  private async settleAs(request: FacilitatorRequest, layout: 'x402' | 'mpp'): Promise<SettleResponse> {
    const wireNetwork = String((request as { paymentRequirements?: { network?: unknown } } | null)?.paymentRequirements?.network ?? '');
    const checked = await this.check(request, { layout });
    if (!checked.ok) return failed(checked, '', wireNetwork);
    const c = checked.value;
    const { network, ledger } = c.prepared;
    const payer = c.verdict.payer;
    const response = (outcome: Failure | null, transaction = c.signature): SettleResponse =>
      outcome ? failed(outcome, transaction, c.prepared.wireNetwork) : { success: true, transaction, network: c.prepared.wireNetwork, payer };

    const claim = await this.deps.store.claimSettlement({
      network,
      signature: c.signature,
      payer,
      blockhash: c.blockhash,
      messageHash: c.messageHash,
      paymentId: c.prepared.paymentId,
      at: this.deps.clock.now(),
    });
    if (!claim.claimed) {
      if (claim.existing.status === 'settled') {
        return response(fail('duplicate_settlement', `transaction ${c.signature} was already settled`, payer));
      }
      return response(await this.resume(c, claim.existing, claim.ownerGone));
    }

    // Rent sponsorship (DECISIONS "Facilitator"): reserved before anything is sent, given back if nothing lands.
    const createdMeanwhile = new Set<string>();
    for (const creation of c.creations) {
      const reserveFor = creation.inTransaction ? c.signature : `precreate:${c.signature}`;
      const decision = await this.deps.store.reserveSponsorship({ ...this.sponsorship(c.prepared, creation), signature: reserveFor });
      // A concurrent settlement to the same new seller created the account (and used the one sponsorship) since our
      // accounts were read: nothing to create any more, so no rent to sponsor (the idempotent creation is a no-op).
      if (decision === 'already_sponsored' && (await ledger.getAccount(creation.account))) {
        createdMeanwhile.add(creation.account);
        continue;
      }
      if (decision !== 'ok') {
        await this.deps.store.releaseSponsorships(network, `precreate:${c.signature}`);
        await this.giveUp(network, c.signature, 'ata_creation_not_sponsored');
        return response({ ok: false, ...this.notSponsored(decision, creation.account) }, '');
      }
    }

    // A stock x402 transaction creates no token account: the facilitator creates the seller's first, in its own
    // transaction, so a seller needs no setup before the first payment.
    const missingSeller = c.creations.find((x) => !x.inTransaction && !createdMeanwhile.has(x.account));
    if (missingSeller) {
      // Rent is spent only for a buyer who can pay: an unfunded transaction must not make the facilitator create
      // accounts for any owner named in a request.
      const unfunded = await this.canPay(c.prepared, c.verdict);
      if (unfunded) {
        await this.deps.store.releaseSponsorships(network, `precreate:${c.signature}`);
        await this.giveUp(network, c.signature, unfunded.reason);
        return response({ ...unfunded, payer }, '');
      }
      const created = await this.createAccount(ledger, c.prepared.requirements, missingSeller.owner);
      if (created) {
        await this.deps.store.releaseSponsorships(network, `precreate:${c.signature}`);
        await this.giveUp(network, c.signature, created.reason);
        return response(created, '');
      }
    }

    // §4.1.5's simulation is the send's preflight: the ledger simulates the co-signed transaction and refuses
    // it without landing anything when it would fail — one execution and one ledger round trip fewer than a separate
    // simulate before the send. A refusal names no transaction (nothing landed), as a failed simulation did; a
    // transaction the ledger already processed keeps its signature, so the caller can learn that it landed.
    const sent = await this.broadcast(c);
    return response(sent.failure, sent.refused && sent.failure?.reason !== 'duplicate_settlement' ? '' : c.signature);
  }

  /**
   * POST /mpp/settle (fee-facilitator-mpp-tools §4.2, DECISIONS "MPP rail"): the MPP credential's transaction is the
   * §2.3 settlement transaction (or the stock MPP clients' order of it); a memo binding it to another challenge refuses
   * it (mpp.ts bindingOf), then it is verified against the challenge's request — the seller leg, the fee split against
   * this facilitator's terms — and settled exactly as an x402 payment — the same duplicate guard, so a
   * repeated settle of one transaction learns its outcome instead of paying twice. The challenge's HMAC and expiry are
   * the API's to check (it holds the key); a resumed settle after expiry must still learn a landed payment's outcome.
   */
  async mppSettle(raw: MppSettleRequest): Promise<MppSettleResponse> {
    const refuse = (errorReason: string, errorMessage: string, network = ''): MppSettleResponse => ({
      success: false,
      signature: '',
      slot: null,
      network,
      errorReason,
      errorMessage,
    });
    const parsed = MppSettleRequest.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return refuse('invalid_payload', `the body is not an MPP settle request: ${issue?.path.join('.') || '(root)'} ${issue?.message ?? ''}`.trim());
    }
    const { challenge, transaction } = parsed.data;
    if (challenge.method !== MPP_METHOD || challenge.intent !== MPP_INTENT) {
      return refuse('unsupported_scheme', `method ${challenge.method}/${challenge.intent} is not supported; only ${MPP_METHOD}/${MPP_INTENT}`);
    }
    const request = SolanaChargeRequest.safeParse(challenge.request);
    if (!request.success)
      return refuse(
        'invalid_payload',
        `the challenge request is not a Solana charge: ${request.error.issues[0]?.path.join('.')} ${request.error.issues[0]?.message}`,
      );
    // answered in the x402 settle's network form (CAIP-2), whichever form the challenge names
    const wireNetwork = acceptOfCharge(request.data).network;
    const bytes = decodeBase64(transaction);
    if (!bytes) return refuse('invalid_payload', 'transaction is not base64', wireNetwork);
    if (bindingOf(bytes, { id: challenge.id, request: request.data }) === 'foreign') {
      return refuse(
        'challenge_mismatch',
        'the transaction is bound to another challenge: a memo names neither this challenge id nor its externalId',
        wireNetwork,
      );
    }
    const accept = acceptOfCharge(request.data);
    const settled = await this.settleAs(
      { x402Version: 2, paymentPayload: { x402Version: 2, accepted: accept, payload: { transaction } }, paymentRequirements: accept },
      'mpp',
    );
    let slot: number | null = null;
    const network = networkFromX402(accept.network);
    if (settled.success && network) {
      const [status] = await this.deps.ledgers[network]!.getSignatureStatuses([settled.transaction]).catch(() => [null]);
      slot = status?.slot ?? null;
    }
    return {
      success: settled.success,
      signature: settled.transaction,
      slot,
      network: settled.network,
      ...(settled.payer ? { payer: settled.payer } : {}),
      ...(settled.errorReason ? { errorReason: settled.errorReason } : {}),
      ...(settled.errorMessage ? { errorMessage: settled.errorMessage } : {}),
    };
  }

  /**
   * The seller's token accounts before the first payment, for stock clients that simulate a plain transfer
   * into them. Existing accounts are ready; a missing one is created by the fee payer when the rent-sponsorship rules
   * allow it (one sponsored account per owner and mint, the daily budget) — the same rules as for settlements.
   */
  async prepareAccounts(request: PrepareAccountsRequest): Promise<PrepareAccountsResponse> {
    const network = networkFromX402(request.network);
    const ledger = network && this.deps.settings.networks.includes(network) ? this.deps.ledgers[network] : undefined;
    const answer = (accounts: PreparedAccount[]): PrepareAccountsResponse => ({ network: request.network, owner: request.owner, accounts });
    if (!network || !ledger) {
      const message = `network ${request.network} is not served by this facilitator`;
      return answer(request.assets.map((asset) => ({ asset, account: null, ready: false, reason: 'unsupported_network', message })));
    }
    const accounts: PreparedAccount[] = [];
    for (const asset of [...new Set(request.assets)]) {
      const mint = await this.mintOf(network, ledger, asset);
      if (!mint) {
        accounts.push({
          asset,
          account: null,
          ready: false,
          reason: 'unsupported_asset',
          message: `${asset} is not an SPL Token or Token-2022 mint on ${network}`,
        });
        continue;
      }
      const account = ataOf(request.owner, asset, mint.tokenProgram);
      if (await ledger.getAccount(account)) {
        accounts.push({ asset, account, ready: true, created: false });
        continue;
      }
      const token = { asset, tokenProgram: mint.tokenProgram };
      const reservation = `prepare:${account}`;
      const decision = await this.deps.store.reserveSponsorship({ ...this.rent(network, token, { account, owner: request.owner }), signature: reservation });
      if (decision !== 'ok') {
        // A concurrent request for the same owner and mint holds the one sponsorship: its creation may have landed.
        if (await ledger.getAccount(account)) accounts.push({ asset, account, ready: true, created: false });
        else accounts.push({ asset, account, ready: false, reason: 'ata_creation_not_sponsored', message: this.notSponsored(decision, account).message });
        continue;
      }
      const failure = await this.createAccount(ledger, token, request.owner);
      if (failure) {
        await this.deps.store.releaseSponsorships(network, reservation);
        accounts.push({ asset, account, ready: false, reason: 'account_creation_failed', message: failure.message });
        continue;
      }
      accounts.push({ asset, account, ready: true, created: true });
    }
    return answer(accounts);
  }

  /**
   * POST /cosign (docs/paywall.md "In a browser"): a Solana Pay wallet signs and sends the settlement itself, after
   * the facilitator. The same checks as settle but for the buyer's signature (its slot must still be empty), then the
   * buyer's funds; no token account is created (the rent guard holds only what settle sends itself), so the seller's
   * and fee accounts must exist. Nothing is sent: the fee payer's exposure is one network fee per transaction the
   * buyer chooses to send, as with settle.
   */
  async cosign(request: FacilitatorRequest): Promise<CosignResponse> {
    const wireNetwork = String((request as { paymentRequirements?: { network?: unknown } } | null)?.paymentRequirements?.network ?? '');
    const refuse = (f: Failure): CosignResponse => ({
      success: false,
      errorReason: f.reason,
      errorMessage: f.message,
      ...(f.details ? { errorDetails: f.details } : {}),
      transaction: '',
      signature: '',
      network: wireNetwork,
      ...(f.payer ? { payer: f.payer } : {}),
    });
    const checked = await this.check(request, { buyerSignsLater: true });
    if (!checked.ok) return refuse(checked);
    const c = checked.value;
    if (c.creations.length > 0) {
      return refuse(
        fail(
          'ata_creation_not_sponsored',
          `a wallet payment creates no token account: ${c.creations.map((x) => x.account).join(', ')} must exist first`,
          c.verdict.payer,
        ),
      );
    }
    const unfunded = await this.canPay(c.prepared, c.verdict);
    if (unfunded) return refuse({ ...unfunded, payer: c.verdict.payer });
    return {
      success: true,
      transaction: Buffer.from(c.signed).toString('base64'),
      signature: c.signature,
      network: c.prepared.wireNetwork,
      payer: c.verdict.payer,
    };
  }

  /** Parse, resolve the offer, run the pure verify and co-sign: everything verify and settle share. */
  private async check(raw: unknown, options: { buyerSignsLater?: boolean; layout?: 'x402' | 'mpp' } = {}): Promise<{ ok: true; value: Checked } | Failure> {
    const prepared = await this.prepare(raw);
    if (!prepared.ok) return prepared;
    const { requirements } = prepared;
    const refused = await this.payeeRefusal(prepared.network, requirements.payTo);
    if (refused) return refused;
    const verdict = verifyPayment({
      transaction: prepared.transaction,
      requirements,
      facilitator: this.policy,
      buyerSignsLater: options.buyerSignsLater === true,
      layout: options.layout ?? 'x402',
    });
    if (!verdict.isValid) return fail(verdict.invalidReason, verdict.message, verdict.payer ?? undefined);
    if (verdict.warnings.length) {
      this.deps.onWarning?.('fee leg accepted under SVC_FEE_ENFORCE=warn', { warnings: verdict.warnings, payer: verdict.payer, network: prepared.network });
    }

    const decoded = decodeTransaction(prepared.transaction);
    const signed = Uint8Array.from(prepared.transaction);
    const feePayerSignature = this.deps.signer.sign(decoded.messageBytes);
    // The first signature slot sits right after the one-byte signature count (fewer than 128 signers).
    signed.set(feePayerSignature, 1);
    const signature = encodeBase58(feePayerSignature);

    const sellerAccount = ataOf(requirements.payTo, requirements.asset, requirements.tokenProgram);
    const wanted = new Map<string, { owner: string; inTransaction: boolean }>();
    for (const account of verdict.createsAccounts) {
      const owner = account === sellerAccount ? requirements.payTo : requirements.fee!.feeAuthority;
      wanted.set(account, { owner, inTransaction: true });
    }
    if (!wanted.has(sellerAccount)) wanted.set(sellerAccount, { owner: requirements.payTo, inTransaction: false });
    const accounts = [...wanted.keys()];
    const existing = await prepared.ledger.getMultipleAccounts(accounts);
    const creations = accounts.filter((_, i) => existing[i] === null).map((account) => ({ account, ...wanted.get(account)! }));

    const messageHash = createHash('sha256').update(decoded.messageBytes).digest('base64');
    return { ok: true, value: { prepared, verdict, signed, signature, blockhash: decoded.recentBlockhash, messageHash, creations } };
  }

  /** The payTo's agent, when it is one recorded here, must be proven: `agent_unproven` otherwise, before anything is signed. */
  private async payeeRefusal(network: Network, payTo: string): Promise<Failure | null> {
    if (!this.deps.payees) return null;
    try {
      const refusal = await this.deps.payees.refusalOfPayTo(network, payTo);
      return refusal ? fail('agent_unproven', refusal.message) : null;
    } catch (e) {
      return fail('settlement_failed', `the payTo ${payTo} could not be checked (${(e as Error).message}); nothing was settled`);
    }
  }

  private async prepare(raw: unknown): Promise<Prepared | Failure> {
    const parsed = FacilitatorRequest.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return fail('invalid_payload', `the request is not an x402 verify/settle body: ${issue?.path.join('.') || '(root)'} ${issue?.message ?? ''}`.trim());
    }
    const request = parsed.data;
    const offer = requirementsV2(request.paymentRequirements);
    if (request.x402Version === 2) {
      const accepted = request.paymentPayload.accepted;
      const same = (['scheme', 'network', 'asset', 'amount', 'payTo'] as const).every((k) => accepted[k] === offer[k]);
      if (!same) return fail('requirements_mismatch', 'paymentPayload.accepted differs from paymentRequirements');
    } else if (request.paymentPayload.scheme !== offer.scheme || request.paymentPayload.network !== offer.network) {
      return fail('requirements_mismatch', 'paymentPayload scheme/network differ from paymentRequirements');
    }
    if (offer.scheme !== 'exact') return fail('unsupported_scheme', `scheme ${offer.scheme} is not supported; only exact`);
    const network = networkFromX402(offer.network);
    const ledger = network && this.deps.settings.networks.includes(network) ? this.deps.ledgers[network] : undefined;
    if (!network || !ledger) return fail('unsupported_network', `network ${offer.network} is not served by this facilitator`);

    const mint = await this.mintOf(network, ledger, offer.asset);
    if (!mint) return fail('unsupported_asset', `${offer.asset} is not an SPL Token or Token-2022 mint on ${network}`);
    const fee = this.feeTerms(network, offer.extra);
    if (fee && !fee.ok) return fee;
    const splits = splitsMismatch(offer.extra, BigInt(offer.amount), fee?.terms);
    if (splits) return fail('requirements_mismatch', splits);

    const transaction = decodeBase64(request.paymentPayload.payload.transaction);
    if (!transaction) return fail('invalid_payload', 'payload.transaction is not base64');
    return {
      ok: true,
      network,
      ledger,
      wireNetwork: offer.network,
      transaction,
      paymentId: paymentIdOf(request),
      requirements: {
        scheme: 'exact',
        network,
        payTo: offer.payTo,
        asset: offer.asset,
        amount: BigInt(offer.amount),
        tokenProgram: mint.tokenProgram,
        decimals: mint.decimals,
        fee: fee?.terms,
      },
    };
  }

  /**
   * extra["svc.fee"] as the offer states it, held to this facilitator's own terms: under enforce a different rate or
   * authority is refused (the fee is ours to name); under warn it is reported and the offer's terms are verified;
   * under off the offer's terms only shape the second transfer.
   */
  private feeTerms(network: Network, extra: X402RequirementsV2['extra']): { ok: true; terms: FeeTerms } | Failure | undefined {
    const raw = extra[FEE_EXTENSION_KEY];
    if (raw === undefined) return undefined;
    const ext = FeeExtension.safeParse(raw);
    if (!ext.success) return fail('fee_terms_mismatch', `extra["${FEE_EXTENSION_KEY}"] is malformed`);
    const { fee } = this.deps.settings;
    const ours = { bps: fee.bps, feeAuthority: fee.authorities[network] };
    const matches = ext.data.bps === ours.bps && ext.data.feeAuthority === ours.feeAuthority;
    if (!matches && fee.enforcement === 'enforce') {
      return fail(
        'fee_terms_mismatch',
        `the offer's fee terms (${ext.data.bps} bps to ${ext.data.feeAuthority}) differ from this facilitator's (${ours.bps} bps to ${ours.feeAuthority})`,
      );
    }
    if (!matches) this.deps.onWarning?.('offer fee terms differ from the facilitator’s', { network, offer: ext.data, ours });
    return { ok: true, terms: { bps: ext.data.bps, feeAuthority: ext.data.feeAuthority } };
  }

  private async mintOf(
    network: Network,
    ledger: Ledger,
    mint: string,
  ): Promise<{ tokenProgram: typeof TOKEN_PROGRAM_ID | typeof TOKEN_2022_PROGRAM_ID; decimals: number } | null> {
    const curated = STABLES[network].find((s) => s.mint === mint);
    if (curated) return { tokenProgram: curated.tokenProgramId as typeof TOKEN_PROGRAM_ID, decimals: curated.decimals };
    const account = await ledger.getAccount(mint);
    const state = decodeMint(account);
    if (!account || !state?.isInitialized || !isTokenProgram(account.owner)) return null;
    return { tokenProgram: account.owner, decimals: state.decimals };
  }

  private sponsorship(prepared: Prepared, creation: { account: string; owner: string }) {
    return this.rent(prepared.network, prepared.requirements, creation);
  }

  private rent(network: Network, token: Pick<PaymentRequirements, 'asset' | 'tokenProgram'>, creation: { account: string; owner: string }) {
    return {
      network,
      owner: creation.owner,
      mint: token.asset,
      account: creation.account,
      lamports: ATA_RENT[token.tokenProgram] ?? ATA_RENT[TOKEN_PROGRAM_ID]!,
      day: this.deps.clock.now().toISOString().slice(0, 10),
      dailyBudget: this.deps.settings.rentBudgetLamports,
    };
  }

  private notSponsored(
    decision: 'already_sponsored' | 'budget_exhausted',
    account: string,
  ): { reason: 'ata_creation_not_sponsored'; invalidReason: 'ata_creation_not_sponsored'; message: string; invalidMessage: string } {
    const message =
      decision === 'already_sponsored'
        ? `the facilitator already paid once for a token account of this owner and mint; ${account} must be created by its owner`
        : `the facilitator's daily rent budget is spent; ${account} must be created by its owner`;
    return { reason: 'ata_creation_not_sponsored', invalidReason: 'ata_creation_not_sponsored', message, invalidMessage: message };
  }

  /**
   * The buyer's source token account can cover amount + fee for the transfer authority (fee-facilitator-mpp-tools §7:
   * a delegate's remaining allowance too).
   */
  private async canPay(prepared: Prepared, verdict: VerifyValid): Promise<Failure | null> {
    const account = await prepared.ledger.getAccount(verdict.source);
    const gross = verdict.amount + verdict.fee;
    const state = decodeTokenAccount(account);
    if (!state || account?.owner !== prepared.requirements.tokenProgram) {
      return fail('insufficient_funds', `the source ${verdict.source} is not a token account of ${prepared.requirements.asset}`, verdict.payer);
    }
    if (state.mint !== prepared.requirements.asset) return fail('insufficient_funds', `the source ${verdict.source} holds another mint`, verdict.payer);
    if (state.amount < gross) return fail('insufficient_funds', `the source holds ${state.amount} atoms; the payment needs ${gross}`, verdict.payer);
    if (state.owner === verdict.payer) return null;
    const allowance = state.delegate === verdict.payer ? state.delegatedAmount : 0n;
    if (allowance < gross) {
      // fee-facilitator-mpp-tools §2.2.6, §7: the buyer is told to size the delegation in gross; the numbers say by how much
      const why =
        state.delegate === verdict.payer
          ? `the delegation allows ${allowance} atoms`
          : `${verdict.payer} is neither the owner nor the delegate of ${verdict.source}`;
      return {
        ...fail('insufficient_allowance', `${why}; the payment needs ${gross} (amount + protocol fee)`, verdict.payer),
        details: { allowance_atomic: allowance.toString(), required_atomic: gross.toString() },
      };
    }
    return null;
  }

  /**
   * The token program reports a delegate's short allowance as InsufficientFunds, as it does a short balance: a ledger
   * refusal of that kind is read against the source account, so a delegate short of allowance learns
   * `insufficient_allowance` (fee-facilitator-mpp-tools §7).
   */
  private async explained<F extends Failure | null>(prepared: Prepared, verdict: VerifyValid, failure: F): Promise<F | Failure> {
    if (failure?.reason !== 'insufficient_funds') return failure;
    return (await this.canPay(prepared, verdict).catch(() => null)) ?? failure;
  }

  /** §4.1.5: the co-signed transaction against the node; null when it would succeed. */
  private async simulate(ledger: Ledger, signed: Uint8Array): Promise<Failure | null> {
    const result = await ledger.simulateTransaction(signed, { sigVerify: true });
    if (result.err === null) return null;
    return ledgerFailure(result.err, result.logs);
  }

  /** Creates the seller's account; fine when a concurrent settlement (the same bytes, even) created it first. */
  private async createAccount(ledger: Ledger, requirements: Pick<PaymentRequirements, 'asset' | 'tokenProgram'>, owner: string): Promise<Failure | null> {
    const failure = await this.sendCreation(ledger, requirements, owner);
    if (failure && (await ledger.getAccount(ataOf(owner, requirements.asset, requirements.tokenProgram)))) return null;
    return failure;
  }

  private async sendCreation(ledger: Ledger, requirements: Pick<PaymentRequirements, 'asset' | 'tokenProgram'>, owner: string): Promise<Failure | null> {
    const key = (a: string) => new PublicKey(a);
    const { blockhash } = await ledger.getLatestBlockhash();
    const account = ataOf(owner, requirements.asset, requirements.tokenProgram);
    const message = new TransactionMessage({
      payerKey: key(this.feePayer),
      recentBlockhash: blockhash,
      instructions: [
        createAssociatedTokenAccountIdempotentInstruction(
          key(this.feePayer),
          key(account),
          key(owner),
          key(requirements.asset),
          key(requirements.tokenProgram),
        ),
      ],
    }).compileToV0Message();
    const tx = new VersionedTransaction(message);
    tx.addSignature(key(this.feePayer), this.deps.signer.sign(tx.message.serialize()));
    const what = `creating the seller's token account ${account}`;
    let sent: Awaited<ReturnType<Ledger['sendTransaction']>>;
    try {
      sent = await ledger.sendTransaction(tx.serialize());
    } catch (e) {
      return fail('settlement_failed', `${what} failed: ${(e as Error).message}`);
    }
    if (!sent.ok) return { ...ledgerFailure(sent.err, sent.logs), reason: 'settlement_failed', message: `${what} failed` };
    const landed = await this.confirm(ledger, sent.signature);
    if (landed === 'pending') return fail('settlement_failed', `${what} was not confirmed in time`);
    return landed === null ? null : fail('settlement_failed', `${what} failed on the ledger`);
  }

  /**
   * Send the co-signed transaction (with the ledger's preflight simulation) and wait for it; an unknown outcome stays
   * pending for a later settle to resolve. `refused`: the ledger refused it before landing (preflight, signatures,
   * blockhash): nothing moved.
   */
  private async broadcast(c: Checked): Promise<{ failure: Failure | null; refused: boolean }> {
    const { network, ledger } = c.prepared;
    let sent: Awaited<ReturnType<Ledger['sendTransaction']>>;
    try {
      sent = await ledger.sendTransaction(c.signed);
    } catch (e) {
      // submit_timeout or an unreachable node after the bytes may have left: the outcome is unknown.
      await this.deps.store.leavePending({ network, signature: c.signature, at: this.deps.clock.now() });
      return {
        failure: fail(
          'settlement_pending',
          `broadcast not acknowledged (${(e as Error).message}); settle again with the same transaction to learn the outcome`,
          c.verdict.payer,
        ),
        refused: false,
      };
    }
    if (!sent.ok) {
      const failure = await this.explained(c.prepared, c.verdict, ledgerFailure(sent.err, sent.logs));
      await this.giveUp(network, c.signature, failure.reason);
      return { failure: { ...failure, payer: c.verdict.payer }, refused: true };
    }
    return { failure: await this.settleOutcome(c, await this.confirm(ledger, c.signature)), refused: false };
  }

  /**
   * A pending claim found again: left pending by a settle that answered settlement_pending (reconciled here), in
   * flight elsewhere, or abandoned — then resolved from the ledger.
   */
  private async resume(c: Checked, existing: SettlementRecord, ownerGone: boolean): Promise<Failure | null> {
    const { ledger, network } = c.prepared;
    if (existing.status === 'pending' && existing.error === 'settlement_pending') return this.reconcile(c);
    const since = existing.updatedAt;
    // While its first request still waits for confirmation, that request answers for it: only one success. A claim
    // whose process died is abandoned at once (a replay after a restart is answered within seconds).
    const abandoned = ownerGone || this.deps.clock.now().getTime() - since.getTime() > this.deps.settings.confirmTimeoutMs;
    if (!abandoned) return fail('settlement_pending', `transaction ${c.signature} is being settled by another request`, c.verdict.payer);
    const [status] = await ledger.getSignatureStatuses([c.signature]);
    if (status) return this.settleOutcome(c, status.confirmationStatus === 'processed' ? await this.confirm(ledger, c.signature) : status.err);
    if (!(await ledger.isBlockhashValid(c.blockhash))) {
      await this.giveUp(network, c.signature, 'transaction_expired');
      return fail('transaction_expired', `transaction ${c.signature} never landed and its blockhash expired`, c.verdict.payer);
    }
    // Still valid and unknown: broadcast the same bytes again (the ledger deduplicates by signature).
    await this.deps.store.finishSettlement({ network, signature: c.signature, status: 'failed', error: null, at: this.deps.clock.now() });
    const again = await this.deps.store.claimSettlement({
      network,
      signature: c.signature,
      payer: c.verdict.payer,
      blockhash: c.blockhash,
      at: this.deps.clock.now(),
    });
    if (!again.claimed) return fail('settlement_pending', `transaction ${c.signature} is being settled by another request`, c.verdict.payer);
    return (await this.broadcast(c)).failure;
  }

  /**
   * x402 `settlement_pending`, the reference's way: the settle of a payment this facilitator answered pending (the
   * resource server's one retry, on whichever instance) takes the row — one taker across instances — and waits for the
   * transaction already broadcast, on the ledger; it never sends anything. Confirmed: the one success; landed and
   * failed: failed; still unknown: pending again, or transaction_expired once its blockhash expired unseen.
   */
  private async reconcile(c: Checked): Promise<Failure | null> {
    const { ledger, network } = c.prepared;
    if (!(await this.deps.store.takePending({ network, signature: c.signature, at: this.deps.clock.now() }))) {
      return fail('settlement_pending', `transaction ${c.signature} is being reconciled by another request`, c.verdict.payer);
    }
    const outcome = await this.confirm(ledger, c.signature);
    if (outcome === 'pending' && !(await ledger.isBlockhashValid(c.blockhash).catch(() => true))) {
      const [status] = await ledger.getSignatureStatuses([c.signature]).catch(() => [null]);
      if (!status) {
        await this.giveUp(network, c.signature, 'transaction_expired');
        return fail('transaction_expired', `transaction ${c.signature} never landed and its blockhash expired`, c.verdict.payer);
      }
    }
    return this.settleOutcome(c, outcome);
  }

  private async settleOutcome(c: Checked, outcome: LedgerTransactionError | null | 'pending'): Promise<Failure | null> {
    const { network } = c.prepared;
    if (outcome === 'pending') {
      // no request waits on it any more: the next settle of this payment, on any instance, reconciles it
      await this.deps.store.leavePending({ network, signature: c.signature, at: this.deps.clock.now() });
      return fail(
        'settlement_pending',
        `transaction ${c.signature} was sent but not confirmed within ${this.deps.settings.confirmTimeoutMs} ms; settle again to learn the outcome`,
        c.verdict.payer,
      );
    }
    if (outcome !== null) {
      // It landed and failed: the fee was paid, nothing moved; sponsored creations in it were rolled back too.
      const failure = ledgerFailure(outcome, []);
      await this.giveUp(network, c.signature, failure.reason);
      return { ...failure, reason: failure.reason === 'simulation_failed' ? 'settlement_failed' : failure.reason, payer: c.verdict.payer };
    }
    await this.deps.store.finishSettlement({ network, signature: c.signature, status: 'settled', error: null, at: this.deps.clock.now() });
    return null;
  }

  /**
   * Waits until the transaction is confirmed: its error (null = success), or 'pending' after the timeout. The
   * ledger notifies first (the embedded one answers on the history write that confirms it: no poll interval in the
   * paid path), within a real-time bound; past it, polls on the Clock until confirmTimeoutMs of the clock has passed.
   */
  private async confirm(ledger: Ledger, signature: string): Promise<LedgerTransactionError | null | 'pending'> {
    const { clock } = this.deps;
    const deadline = clock.now().getTime() + this.deps.settings.confirmTimeoutMs;
    const notified = await ledger
      .waitForSignature(signature, { commitment: 'confirmed', timeoutMs: Math.min(this.deps.settings.confirmTimeoutMs, NOTIFIED_WAIT_MS) })
      .catch(() => null);
    if (notified && notified.confirmationStatus !== 'processed') return notified.err;
    const poll = this.deps.settings.confirmPollMs ?? 50;
    for (;;) {
      const [status] = await ledger.getSignatureStatuses([signature]).catch(() => [null]);
      if (status && status.confirmationStatus !== 'processed') return status.err;
      if (clock.now().getTime() >= deadline) return 'pending';
      await clock.sleep(poll);
    }
  }

  private async giveUp(network: Network, signature: string, reason: string): Promise<void> {
    await this.deps.store.releaseSponsorships(network, signature);
    await this.deps.store.finishSettlement({ network, signature, status: 'failed', error: reason, at: this.deps.clock.now() });
  }
}

function failed(f: Failure, transaction: string, network: string): SettleResponse {
  return {
    success: false,
    errorReason: f.reason,
    errorMessage: f.message,
    ...(f.details ? { errorDetails: f.details } : {}),
    transaction,
    network,
    payer: f.payer,
  };
}

function decodeBase64(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  return Uint8Array.from(Buffer.from(text, 'base64'));
}

/** SPL Token's InsufficientFunds; the same code under Token-2022. */
const TOKEN_INSUFFICIENT_FUNDS = 1;

/** A ledger's transaction error as a stable reason. */
export function ledgerFailure(err: LedgerTransactionError, logs: string[]): Failure {
  const text = typeof err === 'string' ? err : JSON.stringify(err);
  const tail = logs.length ? ` (${logs.slice(-3).join(' | ')})` : '';
  if (err === 'BlockhashNotFound') return fail('transaction_expired', 'the transaction’s blockhash is unknown or expired; build it again with a fresh one');
  if (err === 'AlreadyProcessed') return fail('duplicate_settlement', 'the ledger already processed this transaction');
  if (typeof err === 'object' && Array.isArray(err.InstructionError)) {
    const [, inner] = err.InstructionError as [number, unknown];
    if (inner && typeof inner === 'object' && (inner as { Custom?: unknown }).Custom === TOKEN_INSUFFICIENT_FUNDS) {
      return fail('insufficient_funds', `the source account cannot cover the transfer${tail}`);
    }
  }
  if (err === 'InsufficientFundsForFee' || err === 'AccountNotFound') {
    return fail('simulation_failed', `the facilitator's fee payer cannot pay the transaction fee (${text})`);
  }
  return fail('simulation_failed', `the ledger refused the transaction: ${text}${tail}`);
}
