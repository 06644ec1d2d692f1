import { Credential, Method, z } from 'mppx';
import { acceptOfCharge, MPP_INTENT, MPP_METHOD, SolanaChargeRequest } from '../../domain/facilitator/mpp.ts';
import { networkFromX402 } from '../../domain/facilitator/wire.ts';
import type { Network } from '../../domain/shared/network.ts';
import { createOfferSigner, PaymentError, type OfferSignerOptions } from '../client/paying-fetch.ts';

// svc-gateway/mpp: the MPP rail's Solana `charge` method for mppx's client (mppx 0.11 ships evm, stripe and tempo, no
// Solana). Register it with mppx and its fetch pays MPP offers of this gateway — mppx parses the challenge, encodes the
// credential and reads the receipt; this method only builds and signs the transaction:
//
//   import { Mppx } from 'mppx/client';
//   import { solanaCharge } from 'svc-gateway/mpp';
//   const mppx = Mppx.create({ methods: [solanaCharge({ signer: keypair, rpcUrl, network: 'chain-devnet' })], polyfill: false });
//   const res = await mppx.fetch('https://gateway.example/x/weather?network=chain-devnet');
//   const receipt = Receipt.fromResponse(res); // { method: 'solana', reference: <signature>, status: 'success', … }
//
// The transaction is the §2.3 settlement transaction of the x402 rail (seller leg, fee leg when the challenge carries
// methodDetails["svc.fee"], idempotent creations paid by the facilitator) with the challenge id as its memo, which
// binds it to that challenge. The fee terms are held to the facilitator's published ones before anything is signed.

/** The method's wire shape (mppx Method): `request` as fee-facilitator-mpp-tools' charge, payload { type, transaction }. */
export const solanaChargeMethod = Method.from({
  name: MPP_METHOD,
  intent: MPP_INTENT,
  schema: {
    credential: { payload: z.object({ type: z.literal('transaction'), transaction: z.string() }) },
    request: z.looseObject({
      amount: z.string(),
      currency: z.string(),
      recipient: z.string(),
      description: z.optional(z.string()),
      externalId: z.optional(z.string()),
      methodDetails: z.looseObject({ network: z.string(), feePayer: z.string(), decimals: z.number(), tokenProgram: z.string() }),
    }),
  },
});

export interface SolanaChargeOptions extends OfferSignerOptions {
  /** pay only challenges on this network (default: any network the kit knows) */
  network?: Network;
  /** refuse challenges whose gross (amount + protocol fee) exceeds this many atomic units */
  maxAmountAtomic?: bigint;
}

/** The bound transaction of one challenge (base64): what the credential's payload carries. */
export function createChallengeSigner(options: SolanaChargeOptions): (challenge: { id: string; request: Record<string, unknown> }) => Promise<string> {
  const sign = createOfferSigner(options);
  return async (challenge) => {
    const request = SolanaChargeRequest.safeParse(challenge.request);
    if (!request.success) throw new PaymentError('unsupported_offer', `the challenge request is not a Solana charge: ${request.error.issues[0]?.path.join('.')} ${request.error.issues[0]?.message}`);
    const accept = acceptOfCharge(request.data);
    const network = networkFromX402(accept.network);
    if (!network || (options.network && network !== options.network)) {
      throw new PaymentError('no_matching_offer', `the challenge is on ${accept.network}, not ${options.network ?? 'a network the kit knows'}`, { network: accept.network });
    }
    return sign({ accept, network, resourceUrl: request.data.methodDetails.resource, maxAmountAtomic: options.maxAmountAtomic, memo: challenge.id });
  };
}

/** The client method for mppx (Mppx.create({ methods: [solanaCharge(…)] })). */
export function solanaCharge(options: SolanaChargeOptions) {
  const signChallenge = createChallengeSigner(options);
  return Method.toClient(solanaChargeMethod, {
    async createCredential({ challenge }) {
      const transaction = await signChallenge(challenge);
      return Credential.serialize({ challenge, payload: { type: 'transaction' as const, transaction } });
    },
  });
}

export { MPP_INTENT, MPP_METHOD, MPP_PROBLEM_TYPE } from '../../domain/facilitator/mpp.ts';
export { PaymentError } from '../client/paying-fetch.ts';
