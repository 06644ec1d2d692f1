import { z } from 'zod';
import { Address } from '../shared/address.ts';
import { U64_MAX } from '../shared/money.ts';
import { StableSymbol } from '../shared/network.ts';

// The request bodies of the 14 prepare routes (hosted-api §4.3, DECISIONS "Prepare / submit / events").
// One schema per route, shared by REST, tRPC and GraphQL. Agent routes carry `mint`: the path parameter is merged into
// the input. Amounts stay decimal strings on the wire (the builders turn them into bigint): atomic where the spec says
// atomic (withdraw `amount`, every lamports field), whole units of the stable for `allowance` and buyer `amount`.

const DIGITS = /^\d{1,20}$/;

const AtomicText = z
  .string()
  .regex(/^\d{1,20}$/, 'Expected an atomic amount: a decimal string of digits')
  // zod runs refinements after a failed regex too: only digits reach BigInt.
  .refine((s) => !DIGITS.test(s) || BigInt(s) <= U64_MAX, 'Exceeds the largest amount (u64)');

/** An atomic amount greater than zero, e.g. "1500000" */
export const PositiveAtomic = AtomicText.refine((s) => !DIGITS.test(s) || BigInt(s) > 0n, 'Must be greater than zero').describe('atomic units, decimal string');
/** An atomic amount, zero allowed, e.g. "0" */
export const Atomic = AtomicText.describe('atomic units, decimal string');
/** Whole units of a stable with at most its decimals, e.g. "12.5"; checked against the stable by the builder */
export const WholeUnits = z
  .string()
  .regex(/^\d{1,20}(\.\d{1,18})?$/, 'Expected a decimal amount in whole units, e.g. "12.5"')
  .describe('decimal amount in whole units of the stable');

export const TokenProgramChoice = z.enum(['spl', 'token-2022']).describe("the mint's token program: 'spl' (default) or 'token-2022' (USDG needs it)");

const Mint = Address.describe('the agent asset (path parameter)');
const Payer = Address.describe('wallet paying fees and rent; default: the natural signer of the route');

/** POST /v1/agents/prepare */
export const PrepareAgentInput = z
  .strictObject({
    owner: Address.describe('owner of the new agent asset'),
    payer: Payer.optional(),
    name: z.string().min(1).max(64).describe('asset name'),
    uri: z
      .url()
      .max(200)
      .describe('registration document URI; left out, the gateway hosts the registration-v1 document at GET /v1/agents/{mint}/registration.json')
      .optional(),
    description: z.string().max(1000).describe('free text for the registration document').optional(),
    services: z
      .array(
        z.strictObject({
          name: z.string().min(1).max(64).describe('service name, e.g. api'),
          endpoint: z.url().max(2048).describe('the service’s URL'),
        }),
      )
      .max(16)
      .describe('services the registration document advertises (the receipts service is added by the gateway)')
      .optional(),
  })
  .describe('A new agent: asset plus on-chain identity (hosted-api §4.3).');
export type PrepareAgentInput = z.output<typeof PrepareAgentInput>;

/** /v1/agents/{mint}/identity/prepare */
export const PrepareIdentityInput = z.strictObject({
  mint: Mint,
  payer: Payer.optional(),
  uri: z.url().max(200).describe('registration document URI; left out, the gateway-hosted GET /v1/agents/{mint}/registration.json').optional(),
});
export type PrepareIdentityInput = z.output<typeof PrepareIdentityInput>;

/** /v1/agents/{mint}/executive/register/prepare */
export const PrepareExecutiveRegisterInput = z.strictObject({
  mint: Mint,
  authority: Address.describe('the wallet that becomes an executive (signs)'),
  payer: Payer.optional(),
});
export type PrepareExecutiveRegisterInput = z.output<typeof PrepareExecutiveRegisterInput>;

/** /v1/agents/{mint}/executive/delegate/prepare and …/executive/revoke/prepare */
export const PrepareExecutiveInput = z.strictObject({
  mint: Mint,
  executive: Address.describe('the executive wallet (its profile is derived)'),
  payer: Payer.optional(),
});
export type PrepareExecutiveInput = z.output<typeof PrepareExecutiveInput>;

/** /v1/agents/{mint}/delegation/prepare */
export const PrepareDelegationInput = z.strictObject({
  mint: Mint,
  executive: Address.describe('wallet approved as token delegate'),
  stable_symbol: StableSymbol,
  allowance: WholeUnits,
  pad_for_protocol_fee: z.boolean().describe('gross the allowance up by the protocol fee (fee_padding_atoms answers the difference)').optional(),
  payer: Payer.optional(),
});
export type PrepareDelegationInput = z.output<typeof PrepareDelegationInput>;

/** /v1/agents/{mint}/delegation/revoke/prepare */
export const PrepareDelegationRevokeInput = z.strictObject({
  mint: Mint,
  stable_symbol: StableSymbol,
  payer: Payer.optional(),
});
export type PrepareDelegationRevokeInput = z.output<typeof PrepareDelegationRevokeInput>;

/** /v1/agents/{mint}/token/set/prepare */
export const PrepareTokenSetInput = z.strictObject({
  mint: Mint,
  genesis_account: Address.describe('the Genesis account of the agent token launch'),
  payer: Payer.optional(),
});
export type PrepareTokenSetInput = z.output<typeof PrepareTokenSetInput>;

/** /v1/agents/{mint}/treasury/provision/prepare */
export const PrepareProvisionInput = z.strictObject({
  mint: Mint,
  payer: Payer.optional(),
  mints: z
    .array(z.strictObject({ mint: Address.describe('token mint to create the treasury’s account for'), token_program: TokenProgramChoice.optional() }))
    .min(1)
    .max(8)
    .describe('default: the curated stables of the network')
    .optional(),
});
export type PrepareProvisionInput = z.output<typeof PrepareProvisionInput>;

const withdrawFields = {
  mint: Mint,
  payer: Address.describe('wallet paying fees and account rent'),
  authority: Address.describe('the asset owner: only the owner may authorise Execute'),
  spl_mint: Address.describe('token mint to debit'),
  destination: Address.describe('receiving wallet (not a token account); its token account is derived'),
  token_program: TokenProgramChoice.describe("default: the curated stable's program, else 'spl'").optional(),
  decimals: z.number().int().min(0).max(18).describe('pre-fetched mint decimals').optional(),
  create_destination_ata_if_missing: z.boolean().default(true).describe('default true; false fails when the destination has no token account'),
};

/** /v1/agents/{mint}/treasury/withdraw/prepare */
export const PrepareWithdrawInput = z.strictObject({ ...withdrawFields, amount: PositiveAtomic.describe('atomic units of spl_mint to move, decimal string') });
export type PrepareWithdrawInput = z.output<typeof PrepareWithdrawInput>;

/** /v1/agents/{mint}/treasury/withdraw-all/prepare */
export const PrepareWithdrawAllInput = z.strictObject(withdrawFields);
export type PrepareWithdrawAllInput = z.output<typeof PrepareWithdrawAllInput>;

/** DECISIONS "Prepare / submit / events": the default reserve of withdraw-sol-all. */
export const DEFAULT_RESERVE_LAMPORTS = 1_000_000n;

/** /v1/agents/{mint}/treasury/withdraw-sol/prepare */
export const PrepareWithdrawSolInput = z.strictObject({
  mint: Mint,
  payer: Address.describe('wallet paying fees'),
  authority: Address.describe('the asset owner'),
  destination: Address.describe('receiving wallet'),
  lamports: PositiveAtomic.describe('lamports to move, decimal string'),
});
export type PrepareWithdrawSolInput = z.output<typeof PrepareWithdrawSolInput>;

/** /v1/agents/{mint}/treasury/withdraw-sol-all/prepare */
export const PrepareWithdrawSolAllInput = z.strictObject({
  mint: Mint,
  payer: Address.describe('wallet paying fees'),
  authority: Address.describe('the asset owner'),
  destination: Address.describe('receiving wallet'),
  reserve_lamports: Atomic.default(DEFAULT_RESERVE_LAMPORTS.toString()).describe('lamports left in the treasury (default 1000000; 0 closes it)'),
});
export type PrepareWithdrawSolAllInput = z.output<typeof PrepareWithdrawSolAllInput>;

/** POST /v1/buyer/payment/prepare: a payment link, or (pay_to, amount, currency). */
export const PrepareBuyerPaymentInput = z
  .strictObject({
    payment_link: z.string().min(1).max(128).describe('payment link id or slug').optional(),
    pay_to: Address.describe('the seller: owner of the receiving token account (an agent treasury)').optional(),
    amount: WholeUnits.describe('whole units of `currency`, e.g. "0.01"').optional(),
    currency: StableSymbol.optional(),
    buyer_agent: Address.describe('the paying agent: its treasury token account is debited'),
    executive: Address.describe('the SPL delegate of the treasury token account (signs)'),
    payer: Payer.optional(),
  })
  .superRefine((v, ctx) => {
    const direct = [v.pay_to, v.amount, v.currency].filter((x) => x !== undefined).length;
    if (v.payment_link !== undefined && direct > 0) {
      ctx.addIssue({ code: 'custom', path: ['payment_link'], message: 'Give either payment_link or (pay_to, amount, currency), not both' });
    } else if (v.payment_link === undefined && direct < 3) {
      ctx.addIssue({ code: 'custom', path: ['pay_to'], message: 'Give payment_link, or all of pay_to, amount and currency' });
    }
  });
export type PrepareBuyerPaymentInput = z.output<typeof PrepareBuyerPaymentInput>;
