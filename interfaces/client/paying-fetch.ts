import { Connection, type Keypair, PublicKey, type VersionedTransaction } from '@solana/web3.js';
import type { TransactionPartialSigner } from '@solana/kit';
import { z } from 'zod';
import { buildPaymentTransaction, feeLayoutFor } from '../../domain/facilitator/build.ts';
import {
  FACILITATOR_EXTRA_KEY,
  FacilitatorLocation,
  FEE_EXTENSION_KEY,
  FeeExtension,
  type FeeTerms,
  type PaymentRequirements,
} from '../../domain/facilitator/schema.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { associatedTokenAccount, treasuryOf } from '../../domain/treasury/derive.ts';
import { decodeMint, isTokenProgram } from '../../domain/shared/token-account.ts';
import { decodeBase58 } from '../../domain/shared/base58.ts';
import {
  FacilitatorHealth,
  networkFromX402,
  requirementsV2,
  ResourceInfo,
  SettleResponse,
  X402RequirementsV1,
  X402RequirementsV2,
  type PaymentPayloadV1,
  type PaymentPayloadV2,
} from '../../domain/facilitator/wire.ts';
import { STABLES, type Network } from '../../domain/shared/network.ts';
import { bindingMemo, boundDigestOf, requestDigest } from '../../domain/shared/request-binding.ts';
import { acceptOfCharge, challengeNetwork, encodeCredential, solanaCharges, SolanaChargeRequest, type WireChallenge } from '../../domain/facilitator/mpp.ts';

// The buyer kit (DECISIONS "x402 on the paywall" and "MPP rail", fee-facilitator-mpp-tools §2.1–2.4, §4.2): a fetch
// that answers an x402 or an MPP 402 by signing the §2.3 settlement transaction — seller leg, fee leg when the offer carries extra["svc.fee"], and
// idempotent creations of the receiving token accounts funded by the facilitator — and retrying the request once.
//
//   const pay = createPayingFetch({ signer: keypair, rpcUrl: 'https://api.devnet.solana.com', network: 'chain-devnet' });
//   const res = await pay('https://gateway.example/x/weather?network=chain-devnet');
//   const settled = decodePaymentResponse(res.headers.get('PAYMENT-RESPONSE')!); // { success, transaction, network, payer }

/** What a refusal of the kit is about; branch on `err.code`, never on the message. */
export const PAYING_FETCH_ERRORS = [
  /** the facilitator publishes another fee authority or rate than the offer names (§2.4): nothing is signed */
  'fee_authority_mismatch',
  /** the offer's gross (amount + fee) exceeds maxAmountAtomic */
  'amount_too_high',
  /** no "exact" accept on the kit's network */
  'no_matching_offer',
  /** the 402 names an asset that is not a token mint, or an offer the kit cannot build (no extra.feePayer …) */
  'unsupported_offer',
  /** the facilitator's /health could not be read: the fee terms cannot be checked, so nothing is signed */
  'facilitator_unavailable',
  /** rpcUrl did not answer (blockhash, mint metadata): nothing is signed */
  'rpc_unavailable',
] as const;
export type PayingFetchErrorCode = (typeof PAYING_FETCH_ERRORS)[number];

export class PaymentError extends Error {
  override readonly name = 'PaymentError';
  constructor(
    readonly code: PayingFetchErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** A wallet that signs without handing out its key (browser wallets, HSMs): it adds its signature and returns the transaction. */
export interface TransactionSigner {
  /** base58 public key: the transfer authority */
  address: string;
  signTransaction(tx: VersionedTransaction): Promise<VersionedTransaction>;
}

export interface PayingFetchOptions {
  /** a web3.js Keypair, a wallet that signs a VersionedTransaction, or a @solana/kit signer */
  signer: PaymentSigner;
  /** Solana JSON-RPC of the paying network: blockhashes and, for mints that are not curated stables, mint metadata */
  rpcUrl: string;
  /**
   * where GET /health publishes the fee terms; default env SVC_FACILITATOR_URL, else the offer's
   * extra["svc.facilitator"], else `${origin of the request}/facilitator`
   */
  facilitatorUrl?: string;
  /** token account debited; default the signer's associated token account for the offer's mint */
  source?: string;
  /** pay from this agent's treasury, the signer being its executive (OfferSignerOptions.agent) */
  agent?: string;
  fetch?: typeof fetch;
  /** refuse offers whose gross (amount + protocol fee) exceeds this many atomic units */
  maxAmountAtomic?: bigint;
  /** pay only offers on this network; default the first "exact" offer on any network the kit knows */
  network?: Network;
}

/** Decodes PAYMENT-RESPONSE (or X-PAYMENT-RESPONSE): { success, transaction, network, payer }. */
export function decodePaymentResponse(header: string): SettleResponse {
  return SettleResponse.parse(JSON.parse(Buffer.from(header, 'base64').toString('utf8')));
}

const PaymentRequiredV2 = z.looseObject({
  x402Version: z.literal(2),
  error: z.string().optional(),
  resource: ResourceInfo.optional(),
  accepts: z.array(z.unknown()),
});
const PaymentRequiredV1 = z.looseObject({
  x402Version: z.literal(1),
  error: z.string().optional(),
  accepts: z.array(z.unknown()),
});

/** The kit reads only the fee block of the facilitator's GET /health. */
const HealthFeeBlock = FacilitatorHealth.pick({ protocol_fee: true });

/** The offer the kit pays: the accept exactly as received (echoed back as `accepted`) and its v2 reading. */
interface Chosen {
  version: 1 | 2;
  raw: Record<string, unknown>;
  accept: X402RequirementsV2;
  network: Network;
  resource: ResourceInfo | undefined;
}

interface MintInfo {
  decimals: number;
  tokenProgram: PaymentRequirements['tokenProgram'];
}

/** A @solana/kit signer (createKeyPairSignerFromBytes: what the official x402 clients take); it signs message bytes. */
export type KitTransactionSigner = Pick<TransactionPartialSigner, 'address' | 'signTransactions'>;
type KitTransaction = Parameters<KitTransactionSigner['signTransactions']>[0][number];

export type PaymentSigner = Keypair | TransactionSigner | KitTransactionSigner;

export interface OfferSignerOptions {
  signer: PaymentSigner;
  /** Solana JSON-RPC of the paying network, or one per network */
  rpcUrl: string | Partial<Record<Network, string>>;
  /**
   * where GET /health publishes the fee terms; default env SVC_FACILITATOR_URL, else the offer's
   * extra["svc.facilitator"], else `${origin of the resource}/facilitator`
   */
  facilitatorUrl?: string;
  /** token account debited; default the signer's associated token account for the offer's mint */
  source?: string;
  /**
   * pay from this agent's treasury (its token account of the offer's mint), the signer being its executive — the SPL
   * delegate delegation/prepare approved. The gateway's paywall then records the agent's spend receipt.
   */
  agent?: string;
  fetch?: typeof fetch;
}

export interface OfferToSign {
  /** the accept in x402 v2 form */
  accept: X402RequirementsV2;
  network: Network;
  /** the paid resource: its origin locates the default facilitator */
  resourceUrl: string | undefined;
  /** refuse when amount + fee exceeds this many atomic units */
  maxAmountAtomic?: bigint | undefined;
  /** the memo instruction's text; default a random nonce. The MPP rail binds a transaction to its challenge: the challenge id */
  memo?: string | undefined;
}

/**
 * The one path from an accepted offer to the buyer-signed §2.3 transaction (base64), shared by the paying fetch and the
 * x402 scheme client (svc-gateway/x402): fee terms held to the facilitator's published ones (§2.4), the gross held to
 * the buyer's limit, then the seller leg, the fee leg when offered, idempotent creations paid by the facilitator.
 */
export function createOfferSigner(options: OfferSignerOptions): (offer: OfferToSign) => Promise<string> {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const connections = new Map<string, Connection>();
  const { signer } = options;
  const signerAddress = signerAddressOf(signer);
  const mints = new Map<string, Promise<MintInfo>>();

  const rpcUrlOf = (network: Network): string => {
    const url = typeof options.rpcUrl === 'string' ? options.rpcUrl : options.rpcUrl[network];
    if (!url) throw new PaymentError('rpc_unavailable', `no rpcUrl for ${network}`, { network });
    return url;
  };
  const connectionOf = (url: string): Connection => {
    let connection = connections.get(url);
    if (!connection) {
      connection = new Connection(url, 'confirmed');
      connections.set(url, connection);
    }
    return connection;
  };

  const mintInfo = (network: Network, mint: string): Promise<MintInfo> => {
    const curated = STABLES[network].find((s) => s.mint === mint);
    if (curated) return Promise.resolve({ decimals: curated.decimals, tokenProgram: curated.tokenProgramId as MintInfo['tokenProgram'] });
    const key = `${network}:${mint}`;
    let info = mints.get(key);
    if (!info) {
      const url = rpcUrlOf(network);
      info = rpc(url, 'getAccountInfo', () => readMint(connectionOf(url), mint));
      mints.set(key, info);
      info.catch(() => mints.delete(key));
    }
    return info;
  };

  /** Node failures become rpc_unavailable; the kit's own refusals pass through. */
  const rpc = async <T>(url: string, method: string, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (e) {
      if (e instanceof PaymentError) throw e;
      throw new PaymentError('rpc_unavailable', `${method} on ${url} failed: ${(e as Error).message}`, { rpcUrl: url });
    }
  };

  /** §2.4: the offer's fee terms must be the ones the facilitator publishes; otherwise nothing is signed. */
  const confirmFeeTerms = async (offered: OfferedFee, network: Network, resourceUrl: string | undefined): Promise<void> => {
    // The offer's own facilitator (extra["svc.facilitator"]) comes before the resource's origin: x402 clients whose
    // core never shows a scheme the 402's resource still pay with no option.
    const located =
      options.facilitatorUrl ?? envFacilitatorUrl() ?? offered.facilitator ?? (resourceUrl ? `${new URL(resourceUrl).origin}/facilitator` : undefined);
    if (!located)
      throw new PaymentError(
        'facilitator_unavailable',
        'no facilitatorUrl, and the offer names no resource to find the facilitator from: the fee terms cannot be checked',
      );
    const base = located.replace(/\/+$/, '');
    let health: z.infer<typeof HealthFeeBlock>;
    try {
      const res = await fetchImpl(`${base}/health`, { headers: { accept: 'application/json' } });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      health = HealthFeeBlock.parse(await res.json());
    } catch (e) {
      throw new PaymentError('facilitator_unavailable', `cannot read the fee terms at ${base}/health: ${(e as Error).message}`, { facilitatorUrl: base });
    }
    const published = { bps: health.protocol_fee.bps, feeAuthority: health.protocol_fee.authorities[network] ?? health.protocol_fee.authority };
    if (published.feeAuthority !== offered.feeAuthority || published.bps !== offered.bps) {
      throw new PaymentError(
        'fee_authority_mismatch',
        `the offer names fee authority ${offered.feeAuthority} at ${offered.bps} bps; ${base} publishes ${published.feeAuthority} at ${published.bps} bps`,
        { offered: { bps: offered.bps, feeAuthority: offered.feeAuthority }, published, facilitatorUrl: base },
      );
    }
  };

  return async ({ accept, network, resourceUrl, maxAmountAtomic, memo }) => {
    const feePayer = accept.extra.feePayer;
    if (typeof feePayer !== 'string') throw new PaymentError('unsupported_offer', 'the offer names no extra.feePayer');
    const fee = offeredFeeTerms(accept);
    const mint = await mintInfo(network, accept.asset);
    const requirements: PaymentRequirements = {
      scheme: 'exact',
      network,
      payTo: accept.payTo,
      asset: accept.asset,
      amount: BigInt(accept.amount),
      tokenProgram: mint.tokenProgram,
      decimals: mint.decimals,
      ...(fee ? { fee: { bps: fee.bps, feeAuthority: fee.feeAuthority } } : {}),
    };
    const layout = feeLayoutFor(requirements);
    if (maxAmountAtomic !== undefined && layout.gross > maxAmountAtomic) {
      throw new PaymentError(
        'amount_too_high',
        `the offer costs ${layout.gross} atomic units (${layout.amount} + fee ${layout.fee}); the limit is ${maxAmountAtomic}`,
        {
          amount: layout.amount.toString(),
          fee: layout.fee.toString(),
          gross: layout.gross.toString(),
          max: maxAmountAtomic.toString(),
        },
      );
    }
    if (fee) await confirmFeeTerms(fee, network, resourceUrl);

    // x402 PR #2693: the blockhash the offer carries saves the RPC round trip; an offer without one, our own read.
    let blockhash = serverBlockhash(accept);
    if (!blockhash) {
      const url = rpcUrlOf(network);
      blockhash = await rpc(url, 'getLatestBlockhash', async () => (await connectionOf(url).getLatestBlockhash('confirmed')).blockhash);
    }
    let unsigned: VersionedTransaction;
    try {
      const source = options.agent ? associatedTokenAccount(treasuryOf(options.agent), requirements.asset, requirements.tokenProgram) : options.source;
      unsigned = buildPaymentTransaction({ feePayer, payer: signerAddress, ...(source ? { source } : {}), ...(memo ? { memo } : {}), requirements, blockhash });
    } catch (e) {
      if (e instanceof DomainError) throw new PaymentError('unsupported_offer', `the offer cannot be paid: ${e.message}`, { accept });
      throw e;
    }
    return Buffer.from((await signWith(signer, unsigned)).serialize()).toString('base64');
  };
}

/**
 * The MPP rail (DECISIONS "MPP rail"): the bound transaction of one Solana charge challenge (base64) — the same §2.3
 * transaction as on x402, its memo the challenge's externalId when that is the request-binding memo of the request the
 * challenge answers (request-binding.ts: the payment then names that request on the ledger, as on x402), else the
 * challenge id. Shared by the paying fetch and svc-gateway/mpp's mppx method.
 */
export function createChallengeSigner(
  options: OfferSignerOptions & { network?: Network | undefined; maxAmountAtomic?: bigint | undefined },
): (challenge: { id: string; request: Record<string, unknown> }) => Promise<string> {
  const sign = createOfferSigner(options);
  return async (challenge) => {
    const request = SolanaChargeRequest.safeParse(challenge.request);
    if (!request.success)
      throw new PaymentError(
        'unsupported_offer',
        `the challenge request is not a Solana charge: ${request.error.issues[0]?.path.join('.')} ${request.error.issues[0]?.message}`,
      );
    const accept = acceptOfCharge(request.data);
    const network = networkFromX402(accept.network);
    if (!network || (options.network && network !== options.network)) {
      throw new PaymentError('no_matching_offer', `the challenge is on ${accept.network}, not ${options.network ?? 'a network the kit knows'}`, {
        network: accept.network,
      });
    }
    const { externalId } = request.data;
    const memo = externalId && boundDigestOf(externalId) ? externalId : challenge.id;
    return sign({ accept, network, resourceUrl: request.data.methodDetails.resource, maxAmountAtomic: options.maxAmountAtomic, memo });
  };
}

/** The first Solana charge challenge of an MPP 402 on the wanted network (any known one by default); null when none. */
function chooseMppChallenge(response: Response, wanted: Network | undefined): WireChallenge | null {
  const challenges = solanaCharges(response.headers.get('www-authenticate'));
  if (challenges.length === 0) return null;
  for (const c of challenges) {
    const { network } = challengeNetwork(c);
    if (network && (!wanted || network === wanted)) return c;
  }
  throw new PaymentError('no_matching_offer', `no Solana charge challenge on ${wanted ?? 'a supported network'}`, {
    offered: challenges.map((c) => challengeNetwork(c).wire),
  });
}

export function createPayingFetch(options: PayingFetchOptions): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  const fetchImpl = options.fetch ?? globalThis.fetch;
  const signOffer = createOfferSigner(options);
  const signChallenge = createChallengeSigner(options);

  return async (input, init) => {
    const original = new Request(input, init);
    // Buffered once so the paid retry sends the very same body.
    const body = original.body === null ? undefined : await original.arrayBuffer();
    const send = (extra: Record<string, string> = {}) => {
      const headers = new Headers(original.headers);
      for (const [name, value] of Object.entries(extra)) headers.set(name, value);
      return fetchImpl(new Request(original.url, { method: original.method, headers, body, redirect: original.redirect, signal: original.signal }));
    };

    const first = await send();
    if (first.status !== 402) return first;
    // A request that already carried a payment is not paid twice.
    if (original.headers.has('PAYMENT-SIGNATURE') || original.headers.has('X-PAYMENT') || /^\s*Payment\s/i.test(original.headers.get('authorization') ?? ''))
      return first;
    const chosen = await chooseOffer(first, options.network);
    if (!chosen) {
      // Not x402: an MPP offer (WWW-Authenticate: Payment, fee-facilitator-mpp-tools §4.2) is paid with a credential.
      const challenge = chooseMppChallenge(first, options.network);
      if (!challenge) return first; // a 402 neither rail's: nothing the kit can pay
      await first.body?.cancel();
      const transaction = await signChallenge(challenge);
      return send({ Authorization: encodeCredential(challenge, transaction) });
    }
    await first.body?.cancel();

    // Request-bound: the memo names this very request (method, path, query, body digest), so the payment cannot be
    // spent on another resource (domain/shared/request-binding.ts).
    const url = new URL(original.url);
    const digest = await requestDigest({
      method: original.method,
      path: url.pathname,
      query: url.search.slice(1),
      body: body ? new Uint8Array(body) : undefined,
    });
    const transaction = await signOffer({
      accept: chosen.accept,
      network: chosen.network,
      resourceUrl: original.url,
      maxAmountAtomic: options.maxAmountAtomic,
      memo: bindingMemo(digest),
    });
    if (chosen.version === 1) {
      const payload: PaymentPayloadV1 = { x402Version: 1, scheme: 'exact', network: chosen.accept.network, payload: { transaction } };
      return send({ 'X-PAYMENT': base64Json(payload) });
    }
    const payload: PaymentPayloadV2 = {
      x402Version: 2,
      ...(chosen.resource ? { resource: chosen.resource } : {}),
      accepted: chosen.raw as X402RequirementsV2,
      payload: { transaction },
    };
    return send({ 'PAYMENT-SIGNATURE': base64Json(payload) });
  };
}

/** Fills only the buyer's signature slot: the fee payer's stays empty for the facilitator. */
async function signWith(signer: PaymentSigner, tx: VersionedTransaction): Promise<VersionedTransaction> {
  if (isTransactionSigner(signer)) return signer.signTransaction(tx);
  if (isKitSigner(signer)) {
    const required = tx.message.staticAccountKeys.slice(0, tx.message.header.numRequiredSignatures);
    const unsigned = {
      messageBytes: tx.message.serialize(),
      signatures: Object.fromEntries(required.map((k) => [k.toBase58(), null])),
      lifetimeConstraint: { blockhash: tx.message.recentBlockhash, lastValidBlockHeight: 0n },
    } as unknown as KitTransaction;
    const [signatures] = await signer.signTransactions([unsigned]);
    const mine = signatures?.[signer.address];
    if (!mine) throw new PaymentError('unsupported_offer', `the signer ${signer.address} returned no signature`);
    tx.addSignature(new PublicKey(signer.address), mine);
    return tx;
  }
  tx.sign([signer]);
  return tx;
}

function signerAddressOf(signer: PaymentSigner): string {
  if (isTransactionSigner(signer) || isKitSigner(signer)) return signer.address;
  return signer.publicKey.toBase58();
}

/** extra.recentBlockhash when it is a blockhash (base58 of 32 bytes), as x402's exact client reads it; else undefined. */
function serverBlockhash(accept: X402RequirementsV2): string | undefined {
  const provided = accept.extra.recentBlockhash;
  return typeof provided === 'string' && decodeBase58(provided)?.length === 32 ? provided : undefined;
}

/** The fee terms an offer states, and the facilitator it names as publishing them. */
type OfferedFee = FeeTerms & { facilitator?: string | undefined };

/** extra["svc.fee"] as offered (§2.1); undefined when the offer carries no fee extension. */
function offeredFeeTerms(accept: X402RequirementsV2): OfferedFee | undefined {
  const raw = accept.extra[FEE_EXTENSION_KEY];
  if (raw === undefined) return undefined;
  const offered = FeeExtension.safeParse(raw);
  if (!offered.success) throw new PaymentError('unsupported_offer', `extra["${FEE_EXTENSION_KEY}"] is malformed`, { extension: raw });
  const located = FacilitatorLocation.safeParse(accept.extra[FACILITATOR_EXTRA_KEY]);
  return { bps: offered.data.bps, feeAuthority: offered.data.feeAuthority, facilitator: located.success ? located.data : undefined };
}

/** PAYMENT-REQUIRED (v2) first, else the v1 body; the first "exact" accept on the wanted network (any known one by default). */
async function chooseOffer(response: Response, wanted: Network | undefined): Promise<Chosen | null> {
  const header = response.headers.get('PAYMENT-REQUIRED');
  let version: 1 | 2;
  let accepts: unknown[];
  let resource: ResourceInfo | undefined;
  const v2 = header ? PaymentRequiredV2.safeParse(decodeBase64Json(header)) : undefined;
  if (v2?.success) {
    version = 2;
    accepts = v2.data.accepts;
    resource = v2.data.resource;
  } else {
    const v1 = PaymentRequiredV1.safeParse(
      await response
        .clone()
        .json()
        .catch(() => null),
    );
    if (!v1.success) return null;
    version = 1;
    accepts = v1.data.accepts;
  }
  const schema = version === 2 ? X402RequirementsV2 : X402RequirementsV1;
  const seen: string[] = [];
  for (const raw of accepts) {
    const parsed = schema.safeParse(raw);
    if (!parsed.success) continue;
    const accept = requirementsV2(parsed.data);
    const network = networkFromX402(accept.network);
    seen.push(`${accept.scheme}@${accept.network}`);
    if (accept.scheme !== 'exact' || !network || (wanted && network !== wanted)) continue;
    return { version, raw: raw as Record<string, unknown>, accept, network, resource };
  }
  throw new PaymentError('no_matching_offer', `no "exact" offer on ${wanted ?? 'a supported network'}; offered: ${seen.join(', ') || 'nothing usable'}`, {
    offered: seen,
  });
}

/** Decimals and token program of a mint that is not a curated stable, from its account. */
async function readMint(connection: Connection, mint: string): Promise<MintInfo> {
  const account = await connection.getAccountInfo(new PublicKey(mint), 'confirmed');
  const owner = account?.owner.toBase58() ?? '';
  const state = account && decodeMint({ owner, data: account.data });
  if (!state || !isTokenProgram(owner)) throw new PaymentError('unsupported_offer', `${mint} is not a mint of SPL Token or Token-2022`, { asset: mint });
  return { decimals: state.decimals, tokenProgram: owner };
}

/** Duck-typed: a Keypair from another copy of web3.js is still a Keypair. */
function isTransactionSigner(signer: PaymentSigner): signer is TransactionSigner {
  return typeof (signer as TransactionSigner).signTransaction === 'function';
}

function isKitSigner(signer: PaymentSigner): signer is KitTransactionSigner {
  return typeof (signer as KitTransactionSigner).signTransactions === 'function';
}

function envFacilitatorUrl(): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.SVC_FACILITATOR_URL;
  return value ? value : undefined;
}

function base64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

function decodeBase64Json(text: string): unknown {
  try {
    return JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
  } catch {
    return null;
  }
}
