import { Credential, Method, z } from 'mppx';
import { MPP_INTENT, MPP_METHOD } from '../../domain/facilitator/mpp.ts';
import type { Network } from '../../domain/shared/network.ts';
import { createChallengeSigner, type OfferSignerOptions } from '../client/paying-fetch.ts';

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
// the fee split and methodDetails["svc.fee"], idempotent creations paid by the facilitator) with the challenge's
// externalId as its memo — the request-binding memo of the request the challenge answers — which binds it to that
// challenge and that request; on the challenge's recentBlockhash when it carries one. @solana/mpp's `solana.charge` pays the same challenges (docs/mpp.md). The fee terms are held to the facilitator's published ones before anything is signed.

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
      methodDetails: z.looseObject({
        network: z.string(),
        recentBlockhash: z.optional(z.string()),
        feePayer: z.union([z.boolean(), z.string()]),
        feePayerKey: z.optional(z.string()),
        decimals: z.number(),
        tokenProgram: z.string(),
      }),
    }),
  },
});

export interface SolanaChargeOptions extends OfferSignerOptions {
  /** pay only challenges on this network (default: any network the kit knows) */
  network?: Network;
  /** refuse challenges whose gross (amount + protocol fee) exceeds this many atomic units */
  maxAmountAtomic?: bigint;
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
export { createChallengeSigner, PaymentError } from '../client/paying-fetch.ts';
