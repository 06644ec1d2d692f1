import { Keypair } from '@solana/web3.js';
import { publicKey } from '@metaplex-foundation/umi';
import { createV1 } from '@metaplex-foundation/mpl-core';
import { findAgentIdentityV1Pda, registerIdentityV1, setAgentTokenV1 } from '@metaplex-foundation/mpl-agent-registry';
import { DomainError } from '../../shared/errors.ts';
import { registrationDocument, RegistrationV1, registrationUrl } from '../../identity/registration.ts';
import { MPL_CORE_PROGRAM_ID, treasuryOf } from '../../treasury/derive.ts';
import type { AgentBuildContext, BuildContext, PlanOutcome, TransactionPlan } from '../../transactions/plan.ts';
import type { PrepareAgentInput, PrepareIdentityInput, PrepareTokenSetInput } from '../prepare-schema.ts';
import { assetCollection, executeFor, hasProgram, IDENTITY_PROGRAM_ID, requireProgram, signer, toInstructions, umi } from './execute.ts';

// agents/prepare, identity/prepare and token/set/prepare: the Core asset and the Agent Registry identity.

/** The agent identity PDA of an asset (["agent_identity", asset] under the identity program). */
export const agentIdentityOf = (asset: string): string => findAgentIdentityV1Pda(umi(), { asset: publicKey(asset) })[0];

/**
 * agents/prepare: createV1 of a fresh asset (its key is generated here and signs as a presigner: it only authorises
 * the account's creation), owned and updated by `owner`; then registerIdentityV1 when the network's ledger runs the
 * identity program, else the envelope says identity "not_registered" with a warning.
 */
export async function buildCreateAgent(input: PrepareAgentInput, ctx: BuildContext): Promise<PlanOutcome> {
  const asset = Keypair.generate();
  const assetAddress = asset.publicKey.toBase58();
  const { uri, hosted } = registrationUri(ctx, assetAddress, input.uri, { name: input.name, description: input.description, services: input.services });
  // the asset is Core's: without Core the transaction could only fail (the identity below is optional)
  await requireProgram(ctx, MPL_CORE_PROGRAM_ID);
  const payer = input.payer ?? input.owner;
  const create = createV1(umi(), {
    asset: signer(assetAddress),
    payer: signer(payer),
    owner: publicKey(input.owner),
    // explicit: left out, Core would make the payer the update authority, and the identity needs the owner's
    updateAuthority: publicKey(input.owner),
    name: input.name,
    uri,
  });
  const instructions = toInstructions(create);
  const registered = await hasProgram(ctx.reads, IDENTITY_PROGRAM_ID);
  if (registered) {
    instructions.push(
      ...toInstructions(
        registerIdentityV1(umi(), { asset: publicKey(assetAddress), payer: signer(payer), authority: signer(input.owner), agentRegistrationUri: uri }),
      ),
    );
  }
  const echo: Record<string, unknown> = {
    asset: assetAddress,
    treasury: treasuryOf(assetAddress),
    owner: input.owner,
    name: input.name,
    uri,
    registration_hosted: hosted,
    ...(registered ? { agent_identity: agentIdentityOf(assetAddress) } : {}),
    ...(input.description !== undefined ? { description: input.description } : {}),
    ...(input.services !== undefined ? { services: input.services } : {}),
  };
  return {
    kind: 'agent.create',
    agent: assetAddress,
    feePayer: payer,
    instructions,
    presigners: [asset.secretKey],
    echo,
    metadata: { echo },
    extras: registered
      ? { identity: 'registered' }
      : {
          identity: 'not_registered',
          warnings: [`The identity program (${IDENTITY_PROGRAM_ID}) does not run on ${ctx.network}: the asset is minted without an agent identity`],
        },
  } satisfies TransactionPlan;
}

/**
 * The registration uri of an asset: the caller's, or — `uri` left out — the gateway's own registration.json URL of the
 * asset (DECISIONS "Identity"). A hosted document is checked against registration-v1 here, as the gateway will serve
 * it (name, description and listed services; its paid endpoints and domains join as they come), and its URL must fit
 * the asset's 200-character uri.
 */
function registrationUri(
  ctx: BuildContext,
  asset: string,
  given: string | undefined,
  described: { name: string; description?: string | undefined; services?: { name: string; endpoint: string }[] | undefined },
): { uri: string; hosted: boolean } {
  if (given !== undefined) return { uri: given, hosted: false };
  if (!ctx.baseUrl)
    throw new DomainError('invalid_request', 'Give `uri`: this gateway has no public base URL to host the registration document at.', { path: 'uri' });
  const uri = registrationUrl(ctx.baseUrl, ctx.network, asset);
  if (uri.length > 200) {
    throw new DomainError('invalid_request', `Give \`uri\`: the hosted registration URL (${uri.length} characters) exceeds the asset's 200.`, {
      path: 'uri',
      uri,
    });
  }
  const document = RegistrationV1.safeParse(
    registrationDocument({
      network: ctx.network,
      mint: asset,
      name: described.name,
      description: described.description ?? '',
      image: '',
      paidEndpoints: [],
      listed: described.services ?? [],
      domains: [],
      skills: [],
      receiptsUrl: `${ctx.baseUrl}/v1/receipts/${asset}`,
    }),
  );
  if (!document.success) {
    throw DomainError.invalid(
      document.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message, code: i.code })),
      'The registration document the gateway would host is not registration-v1.',
    );
  }
  return { uri, hosted: true };
}

/** identity/prepare: registerIdentityV1 on the recorded asset, authorised by its owner. */
export async function buildRegisterIdentity(input: PrepareIdentityInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  const { uri, hosted } = registrationUri(ctx, input.mint, input.uri, { name: ctx.agent.name ?? input.mint });
  // RegisterIdentityV1 adds the identity to the Core asset through Core
  await requireProgram(ctx, IDENTITY_PROGRAM_ID);
  await requireProgram(ctx, MPL_CORE_PROGRAM_ID);
  const owner = ctx.agent.owner;
  const payer = input.payer ?? owner;
  const identity = agentIdentityOf(input.mint);
  if (await ctx.reads.getAccount(identity)) {
    throw new DomainError('conflict', `Agent ${input.mint} already has a registered identity (${identity})`, { agent_identity: identity });
  }
  const collection = await assetCollection(ctx.reads, input.mint);
  const instructions = toInstructions(
    registerIdentityV1(umi(), {
      asset: publicKey(input.mint),
      ...(collection ? { collection: publicKey(collection) } : {}),
      payer: signer(payer),
      authority: signer(owner),
      agentRegistrationUri: uri,
    }),
  );
  const echo = { asset: input.mint, agent_identity: agentIdentityOf(input.mint), uri, registration_hosted: hosted };
  return { kind: 'agent.identity.register', agent: input.mint, feePayer: payer, instructions, echo, metadata: { echo } };
}

/**
 * token/set/prepare: setAgentTokenV1, whose authority is the asset signer — so it runs through Core `execute`
 * signed by the owner.
 */
export async function buildTokenSet(input: PrepareTokenSetInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  await requireProgram(ctx, IDENTITY_PROGRAM_ID);
  const owner = ctx.agent.owner;
  const payer = input.payer ?? owner;
  const treasury = treasuryOf(input.mint);
  if (!(await ctx.reads.getAccount(agentIdentityOf(input.mint)))) {
    const message = `Agent ${input.mint} has no registered identity: register it first (identity/prepare)`;
    throw new DomainError('invalid_request', message, { issues: [{ path: 'mint', message, code: 'identity_not_registered' }] });
  }
  const inner = toInstructions(
    setAgentTokenV1(umi(), {
      asset: publicKey(input.mint),
      genesisAccount: publicKey(input.genesis_account),
      payer: signer(payer),
      authority: signer(treasury),
    }),
  );
  const instructions = await executeFor(ctx, { asset: input.mint, authority: owner, payer, inner });
  const echo = { asset: input.mint, agent_identity: agentIdentityOf(input.mint), genesis_account: input.genesis_account, treasury };
  return { kind: 'agent.token.set', agent: input.mint, feePayer: payer, instructions, echo, metadata: { echo } };
}
