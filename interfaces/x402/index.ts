import type { PaymentPayloadContext, PaymentPayloadResult, PaymentRequirements, SchemeClientHooks, SchemeNetworkClient } from '@x402/core/types';
import type { x402Client } from '@x402/core/client';
import { createOfferSigner, PaymentError, type PaymentSigner } from '../client/paying-fetch.ts';
import { networkFromX402, requirementsV2, X402RequirementsV1, X402RequirementsV2 } from '../../domain/facilitator/wire.ts';
import { CAIP2, NETWORKS, STABLES, X402_V1_NETWORK, type Network } from '../../domain/shared/network.ts';
import { bindingMemo, REQUEST_BINDING_EXTENSION } from '../../domain/shared/request-binding.ts';
import { z } from 'zod';

/** extensions["svc.request-binding"] of a gateway's 402 (domain/paywall/core.ts) */
const BindingExtension = z.looseObject({ info: z.looseObject({ digest: z.string().regex(/^[0-9a-f]{64}$/) }) });

// svc-gateway/x402: the gateway's fee layout (fee-facilitator-mpp-tools §2.1–2.4) as an x402 scheme client for the
// official client (@x402/core's x402Client, @x402/fetch's wrapFetchWithPayment). A buyer who already pays with the
// official client adds one line and pays fee-on links — the seller leg and, when the offer carries
// extra["svc.fee"], the fee leg in the same transaction; offers without it are paid as before:
//
//   import { ExactSvmFeeScheme } from 'svc-gateway/x402';
//   client.register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl }));   // after registerExactSvmScheme(...)
//
// It replaces the official "exact" SVM client for the networks it is registered on (one client per scheme and
// network). The transaction is the buyer kit's (svc-gateway/client) — one builder — so both pay the same bytes.
// The facilitator that publishes the fee terms is read from the offer itself, so the scheme needs no option in any
// @x402/core 2.x client (older cores never call the hook that shows a scheme the 402's resource).

/** Public endpoints used when no rpcUrl is given, as the official client does. */
const DEFAULT_RPC: Record<Network, string> = {
  'chain-mainnet': 'https://api.mainnet-beta.solana.com',
  'chain-devnet': 'https://api.devnet.solana.com',
};

export interface ExactSvmFeeSchemeOptions {
  /** Solana JSON-RPC: one URL, or one per network ("chain-devnet", "chain-mainnet"); default the public endpoints */
  rpcUrl?: string | Partial<Record<Network, string>>;
  /**
   * The facilitator whose GET /health the fee terms are checked against before signing (§2.4); default env
   * SVC_FACILITATOR_URL, else the one the offer names (extra["svc.facilitator"]), else
   * `${origin of the paid resource}/facilitator`
   */
  facilitatorUrl?: string;
  /** token account debited; default the signer's associated token account for the offer's mint */
  source?: string;
  fetch?: typeof fetch;
}

/**
 * The "exact" scheme on Solana with the gateway's protocol-fee leg. `signer` is what the official SVM client takes
 * (a @solana/kit signer, e.g. createKeyPairSignerFromBytes), a web3.js Keypair, or a wallet that signs a
 * VersionedTransaction.
 */
export class ExactSvmFeeScheme implements SchemeNetworkClient {
  readonly scheme = 'exact';
  readonly #sign: ReturnType<typeof createOfferSigner>;
  /** the paid resource of each offer being paid (from the 402), for the default facilitator URL */
  readonly #resources = new WeakMap<object, string>();
  /** the request digest the 402 states (extensions["svc.request-binding"]), bound into the payment's memo */
  readonly #digests = new WeakMap<object, string>();

  readonly schemeHooks: SchemeClientHooks = {
    onBeforePaymentCreation: async (context) => {
      const url = context.paymentRequired.resource?.url;
      if (url) this.#resources.set(context.selectedRequirements, url);
      const digest = BindingExtension.safeParse(context.paymentRequired.extensions?.[REQUEST_BINDING_EXTENSION]);
      if (digest.success) this.#digests.set(context.selectedRequirements, digest.data.info.digest);
    },
  };

  constructor(signer: PaymentSigner, options: ExactSvmFeeSchemeOptions = {}) {
    const rpcUrl = options.rpcUrl ?? DEFAULT_RPC;
    this.#sign = createOfferSigner({
      signer,
      rpcUrl: typeof rpcUrl === 'string' ? rpcUrl : { ...DEFAULT_RPC, ...rpcUrl },
      ...(options.facilitatorUrl ? { facilitatorUrl: options.facilitatorUrl } : {}),
      ...(options.source ? { source: options.source } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }

  /** The curated stables, so the official client's spend controls (USD caps) apply to them. */
  readonly findDefaultAsset = (asset: string, network: string) => {
    const ours = networkFromX402(network);
    const stable = ours ? STABLES[ours].find((s) => s.mint === asset) : undefined;
    return stable ? { asset: stable.mint, decimals: stable.decimals, symbol: stable.symbol } : undefined;
  };

  async createPaymentPayload(x402Version: number, paymentRequirements: PaymentRequirements, context?: PaymentPayloadContext): Promise<PaymentPayloadResult> {
    const raw: unknown = paymentRequirements;
    const parsed = x402Version === 1 ? X402RequirementsV1.safeParse(raw) : X402RequirementsV2.safeParse(raw);
    if (!parsed.success) throw new PaymentError('unsupported_offer', `not an x402 v${x402Version} "exact" offer: ${parsed.error.issues[0]?.message ?? ''}`);
    const accept = requirementsV2(parsed.data);
    const network = networkFromX402(accept.network);
    if (!network) throw new PaymentError('no_matching_offer', `network ${accept.network} is not a Solana network this scheme pays on`);
    const v1Resource = 'maxAmountRequired' in parsed.data ? (parsed.data as X402RequirementsV1).resource : undefined;
    const resourceUrl = this.#resources.get(paymentRequirements) ?? v1Resource;
    const cap = context?.maxAmountPerPayment;
    // Request-bound (svc-gateway/x402 sees no request: the 402 states the digest of the one it answered)
    const digest = this.#digests.get(paymentRequirements);
    const transaction = await this.#sign({
      accept,
      network,
      resourceUrl,
      ...(digest ? { memo: bindingMemo(digest) } : {}),
      // The official client caps the offer's amount; the fee leg comes on top, so the cap holds for the gross here.
      maxAmountAtomic: cap !== undefined && /^\d+$/.test(cap) ? BigInt(cap) : undefined,
    });
    if (x402Version === 1) {
      return { x402Version: 1, scheme: 'exact', network: accept.network, payload: { transaction } } as PaymentPayloadResult;
    }
    return { x402Version, payload: { transaction } };
  }
}

export interface RegisterSvcFeeSchemeConfig extends ExactSvmFeeSchemeOptions {
  signer: PaymentSigner;
  /** default both Solana networks */
  networks?: Network[];
}

/** Registers the scheme for x402 v2 (CAIP-2) and v1 (solana, solana-devnet) on each network; returns the client. */
export function registerSvcFeeScheme(client: x402Client, config: RegisterSvcFeeSchemeConfig): x402Client {
  const { signer, networks = [...NETWORKS], ...options } = config;
  const scheme = new ExactSvmFeeScheme(signer, options);
  for (const network of networks) {
    client.register(CAIP2[network] as `${string}:${string}`, scheme);
    client.registerV1(X402_V1_NETWORK[network], scheme);
  }
  return client;
}

/**
 * One payment requirement as faremeter's client hands it to a payment handler (@faremeter/types `x402PaymentRequirements`,
 * v2 fields): only what the scheme reads, so this module imports nothing of faremeter.
 */
export interface FaremeterRequirements {
  scheme: string;
  network: string;
  amount: string;
  payTo: string;
  asset: string;
  maxTimeoutSeconds?: number;
  extra?: unknown;
}

/** faremeter's `PaymentHandler` (@faremeter/types client): what `wrap(fetch, { handlers })` of @faremeter/fetch takes. */
export type FaremeterPaymentHandler = <R extends FaremeterRequirements>(
  context: { request: RequestInfo | URL },
  accepts: R[],
) => Promise<{ requirements: R; exec(): Promise<{ payload: object }> }[]>;

/**
 * The same scheme as a payment handler for @faremeter/fetch, whose own Solana "exact" handler pays the seller leg only
 * (it reads no extra.splits), so a fee-on link refuses it with fee_leg_missing:
 *
 *   import { createSvcFeePaymentHandler } from 'svc-gateway/x402';
 *   const pay = wrap(fetch, { handlers: [createSvcFeePaymentHandler({ signer, rpcUrl })] });
 *
 * faremeter hands every offer in its v2 form (`amount`), v1 402s included; the transaction is the buyer kit's.
 */
export function createSvcFeePaymentHandler(config: RegisterSvcFeeSchemeConfig): FaremeterPaymentHandler {
  const { signer, networks = [...NETWORKS], ...options } = config;
  const scheme = new ExactSvmFeeScheme(signer, options);
  const names = new Set<string>(networks.flatMap((n) => [CAIP2[n], X402_V1_NETWORK[n]]));
  return async (_context, accepts) =>
    accepts
      .filter((requirements) => requirements.scheme === 'exact' && names.has(requirements.network))
      .map((requirements) => ({
        requirements,
        exec: async () => {
          // a v1 network name (solana-devnet) is read as its CAIP-2 id, the form the scheme's v2 parser takes
          const network = networkFromX402(requirements.network);
          const v2 = { ...requirements, network: network ? CAIP2[network] : requirements.network } as unknown as PaymentRequirements;
          return { payload: (await scheme.createPaymentPayload(2, v2)).payload };
        },
      }));
}

export {
  PaymentError,
  PAYING_FETCH_ERRORS,
  type PayingFetchErrorCode,
  type PaymentSigner,
  type KitTransactionSigner,
  type TransactionSigner,
} from '../client/paying-fetch.ts';
