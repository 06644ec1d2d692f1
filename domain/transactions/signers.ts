import { z } from 'zod';

// hosted-api §4.5.1: submit refuses a transaction that lacks a required signature. The refusal names whose key each
// missing signature belongs to — a prepared event records the role of every signer it asked for — and how to add a
// signature without dropping the one the gateway already put in the prepared transaction (a new asset's key).

export const SignerRole = z
  .enum(['fee_payer', 'owner', 'new_asset', 'executive', 'authority'])
  .describe(
    'fee_payer: pays the fee (first signer); owner: the agent asset’s owner; new_asset: the fresh asset key the gateway signed for in the prepared transaction; executive: the agent’s executive or token delegate; authority: another required signer',
  );
export type SignerRole = z.infer<typeof SignerRole>;

export const PreparedSigner = z.object({
  address: z.string(),
  roles: z.array(SignerRole).describe('why this key must sign; one key may hold several roles (an owner that pays the fee)'),
  presigned: z.boolean().describe('true: the gateway signed this slot in the prepared transaction; keep that signature'),
});
export type PreparedSigner = z.infer<typeof PreparedSigner>;

/** What a prepare route knows of its signers besides their order. */
export interface SignerHints {
  feePayer: string;
  /** public keys of the fresh accounts the gateway signed for */
  presigned: readonly string[];
  /** the agent asset's owner, when the route knows it */
  owner?: string | null | undefined;
  /** the executive (or token delegate) the route names */
  executive?: string | null | undefined;
}

/** The roles of the ordered signers of a prepared message. */
export function signerRoles(signers: readonly string[], hints: SignerHints): PreparedSigner[] {
  const presigned = new Set(hints.presigned);
  return signers.map((address) => {
    const roles: SignerRole[] = [];
    if (presigned.has(address)) roles.push('new_asset');
    if (address === hints.feePayer) roles.push('fee_payer');
    if (hints.owner && address === hints.owner) roles.push('owner');
    if (hints.executive && address === hints.executive) roles.push('executive');
    if (roles.length === 0) roles.push('authority');
    return { address, roles, presigned: presigned.has(address) };
  });
}

/** The signers a prepared event recorded, or (an event prepared before it recorded them) the fee payer and the others by order. */
export function recordedSigners(signers: readonly string[], metadata: Record<string, unknown>): PreparedSigner[] {
  const recorded = z.array(PreparedSigner).safeParse(metadata.signers);
  if (recorded.success && recorded.data.length === signers.length && recorded.data.every((s, i) => s.address === signers[i])) return recorded.data;
  return signers.map((address, i) => ({ address, roles: [i === 0 ? 'fee_payer' : 'authority'], presigned: false }));
}

const ROLE_TEXT: Record<SignerRole, string> = {
  fee_payer: 'fee payer',
  owner: 'agent owner',
  new_asset: 'the new agent asset’s key, which the gateway signed for in the prepared transaction',
  executive: 'executive',
  authority: 'required signer',
};

/** How to add a signature and keep the others (web3.js v1 and @solana/kit), said once for every refusal. */
export const KEEP_SIGNATURES_HINT =
  'Add your signature to the prepared transaction without clearing the others: web3.js VersionedTransaction.deserialize(bytes).sign([key]) ' +
  'or Transaction.from(bytes).partialSign(key) — never Transaction.sign(), which drops the signatures already there — or @solana/kit partiallySignTransaction.';

export interface SignatureProblem extends PreparedSigner {
  problem: 'missing' | 'invalid';
}

/** The message and details of a refusal for missing or invalid signatures: whose key, in what role, and how to fix it. */
export function describeMissing(problems: readonly SignatureProblem[], eventId: string): { message: string; hint: string } {
  const named = problems.map(
    (p) => `${p.address} (${p.roles.map((r) => ROLE_TEXT[r]).join(', ')}${p.problem === 'invalid' ? '; the signature there does not verify' : ''})`,
  );
  const dropped = problems.some((p) => p.presigned);
  const hint = dropped
    ? `The gateway's own signature for the new asset was dropped, most likely by Transaction.sign(); the gateway does not keep that key, so sign the transaction of event ${eventId} as prepared again. ${KEEP_SIGNATURES_HINT}`
    : `Sign the transaction of event ${eventId} with ${problems.length === 1 ? 'that key' : 'those keys'} and submit it again. ${KEEP_SIGNATURES_HINT}`;
  return { message: `The transaction lacks a valid signature of ${named.join('; ')}. ${hint}`, hint };
}
