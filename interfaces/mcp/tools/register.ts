import { Keypair, PublicKey } from '@solana/web3.js';
import { z } from 'zod';
import { PrepareAgentInput } from '../../../domain/agents/prepare-schema.ts';
import { atomicToDecimal, SOL_DECIMALS, U64_MAX } from '../../../domain/shared/money.ts';
import { findStable } from '../../../domain/shared/network.ts';
import { treasuryOf } from '../../../domain/treasury/derive.ts';
import { parseSecret, secretOf, type PendingRegister } from '../config.ts';
import { defineTool, ToolError, type ToolContext } from '../context.ts';

// fee-facilitator-mpp-tools §4.4: two-step onboarding. Step 1 makes (or imports) the executive key and stores it as
// pending_register; step 2 (no arguments, once the key holds 0.01 native coin) mints the agent with the executive as
// its owner, records it, approves an unlimited USDC delegation to the executive, and stores the configuration. Each
// step of step 2 is saved as it lands, so a retry after a failure resumes rather than minting again.

/** §8: 0.01 native coin covers the asset rent, one token-account rent and the fees. */
export const REQUIRED_LAMPORTS = 10_000_000n;

const Input = z.object({
  mode: z.enum(['generate', 'import']).optional().describe("step 1: 'generate' (default) a fresh executive keypair, or 'import' one"),
  executive_secret_base58: z.string().min(1).max(200).optional().describe("step 1 with mode 'import': the executive's 64-byte secret key, base58"),
  name: PrepareAgentInput.shape.name.optional().describe('step 1: friendly label, recorded on chain'),
  description: PrepareAgentInput.shape.description,
  image_url: z.url().max(2048).optional().describe('step 1: public avatar URL'),
  services: PrepareAgentInput.shape.services.describe('step 1: [{ name, endpoint }]; receipts is added automatically'),
});

async function balanceOf(ctx: ToolContext, address: string): Promise<bigint> {
  try {
    return BigInt(await ctx.connection().getBalance(new PublicKey(address), 'confirmed'));
  } catch (e) {
    throw new ToolError('rpc_unavailable', `The node at SVC_RPC_URL did not answer: ${e instanceof Error ? e.message : String(e)}.`);
  }
}

function fundingRequired(ctx: ToolContext, executive: string, balance: bigint) {
  const sol = atomicToDecimal(REQUIRED_LAMPORTS, SOL_DECIMALS);
  return {
    kind: 'register_agent',
    status: 'funding_required',
    network: ctx.network,
    executive_pubkey: executive,
    required_sol: sol,
    balance_sol: atomicToDecimal(balance, SOL_DECIMALS),
    instructions: [
      `Send at least ${sol} SOL on ${ctx.network} to ${executive} (the agent's executive key, kept in ${ctx.env.configPath}).`,
      ctx.network === 'chain-devnet'
        ? `On a devnet gateway: POST ${ctx.env.apiUrl}/v1/dev/faucet { "address": "${executive}", "sol": "0.05" }.`
        : 'Use any wallet or exchange withdrawal.',
      'Then call svc_register_agent again with no arguments.',
    ],
    config_path: ctx.env.configPath,
  };
}

const hasStep1Arguments = (a: z.output<typeof Input>) => Object.values(a).some((v) => v !== undefined);

export const registerAgent = defineTool({
  name: 'svc_register_agent',
  title: 'Register an agent (two steps)',
  description:
    'Onboard an agent without a browser. Step 1 (mode generate or import, name, description, image_url, services) creates the executive key and answers status funding_required with the address to fund with 0.01 SOL. Step 2 is this tool with no arguments: it mints the agent (a Metaplex Core asset whose treasury holds the funds), records it with the gateway, approves an unlimited USDC spend delegation to the executive and saves the configuration.',
  input: Input,
  async run(ctx, args) {
    const pending = ctx.config?.pending_register ?? null;
    if (!hasStep1Arguments(args) && pending) return step2(ctx, pending);
    if (ctx.agent()) {
      throw new ToolError(
        'agent_exists',
        `An agent is already configured (${ctx.agent()!.mint}); remove agent_mint from ${ctx.env.configPath} to register another.`,
      );
    }
    if (pending && hasStep1Arguments(args)) {
      throw new ToolError(
        'registration_pending',
        `A registration is pending for executive ${parseSecret(pending.executive_keypair)?.publicKey.toBase58() ?? '(unreadable key)'}: call svc_register_agent with no arguments to finish it (or delete pending_register from ${ctx.env.configPath} to start over).`,
      );
    }
    return step1(ctx, args);
  },
});

async function step1(ctx: ToolContext, args: z.output<typeof Input>) {
  const mode = args.mode ?? 'generate';
  let executive: Keypair;
  if (mode === 'import') {
    if (!args.executive_secret_base58) {
      throw new ToolError('invalid_request', "mode 'import' needs executive_secret_base58: the executive's 64-byte secret key in base58.", {
        path: 'executive_secret_base58',
      });
    }
    const parsed = parseSecret(args.executive_secret_base58);
    if (!parsed) throw new ToolError('invalid_request', 'executive_secret_base58 is not a 64-byte secret key in base58.', { path: 'executive_secret_base58' });
    executive = parsed;
  } else {
    if (args.executive_secret_base58)
      throw new ToolError('invalid_request', "executive_secret_base58 is only taken with mode 'import'.", { path: 'executive_secret_base58' });
    executive = Keypair.generate();
  }
  const record: PendingRegister = {
    executive_keypair: secretOf(executive),
    name: args.name ?? 'svc agent',
    ...(args.description !== undefined ? { description: args.description } : {}),
    ...(args.image_url !== undefined ? { image_url: args.image_url } : {}),
    ...(args.services !== undefined ? { services: args.services.filter((s) => s.name.toLowerCase() !== 'receipts') } : {}),
  };
  await ctx.save({ ...(ctx.config ?? ctx.emptyConfig()), network: ctx.network, pending_register: record });
  const address = executive.publicKey.toBase58();
  return fundingRequired(ctx, address, await balanceOf(ctx, address));
}

async function step2(ctx: ToolContext, pending: PendingRegister) {
  const executive = parseSecret(pending.executive_keypair);
  if (!executive) throw new ToolError('invalid_config', `pending_register.executive_keypair in ${ctx.env.configPath} is not a secret key.`);
  const address = executive.publicKey.toBase58();
  let state = pending;
  const persist = async (patch: Partial<PendingRegister>) => {
    state = { ...state, ...patch };
    await ctx.save({ ...(ctx.config ?? ctx.emptyConfig()), pending_register: state });
  };

  // A mint that failed on the ledger (its event failed) is forgotten, so this retry mints again.
  if (state.mint && state.create_event_id) {
    const event = await ctx.call((api) => api.events.get.query({ id: state.create_event_id! }));
    if (event.phase === 'failed') await persist({ mint: undefined, uri: undefined, create_event_id: undefined, create_signature: undefined });
  }

  if (!state.mint) {
    const balance = await balanceOf(ctx, address);
    if (balance < REQUIRED_LAMPORTS) return fundingRequired(ctx, address, balance);
    const envelope = await ctx.call((api) =>
      api.prepare.agentCreate.mutate({
        owner: address,
        payer: address,
        name: state.name,
        // no uri: the gateway hosts the registration-v1 document at its GET /v1/agents/{mint}/registration.json (with
        // the receipts service entry of §2.7) and writes that URL into the asset
        ...(state.description !== undefined ? { description: state.description } : {}),
        ...(state.services?.length ? { services: state.services } : {}),
      }),
    );
    const mint = String(envelope.echo.asset);
    const uri = String(envelope.echo.uri);
    // saved once submitted: from then on a retry resumes with this asset rather than minting a second one
    await ctx.signSubmitTrack(envelope, [executive], (signature) =>
      persist({ mint, uri, create_event_id: envelope.event_id ?? undefined, create_signature: signature }),
    );
  }
  const mint = state.mint!;

  // §4.4: the minted asset must be visible on the node within 20 s; otherwise a retry resumes from here.
  const deadline = Date.now() + ctx.assetTimeoutMs;
  while (
    (await ctx
      .connection()
      .getAccountInfo(new PublicKey(mint), 'confirmed')
      .catch(() => null)) === null
  ) {
    if (Date.now() > deadline) {
      throw new ToolError(
        'asset_not_visible',
        `The agent asset ${mint} is not visible on the node yet; call svc_register_agent again with no arguments to resume.`,
        { mint, create_signature: state.create_signature ?? null },
      );
    }
    await new Promise((r) => setTimeout(r, 500));
  }

  await ctx.call((api) => api.agents.record.mutate({ mint, owner: address, name: state.name, ...(state.uri ? { uri: state.uri } : {}) }));

  if (!state.delegation_signature) {
    const usdc = findStable(ctx.network, 'USDC')!;
    const envelope = await ctx.call((api) =>
      api.prepare.delegationSet.mutate({
        mint,
        executive: address,
        stable_symbol: 'USDC',
        // unlimited: the cap is the largest token amount (u64), per mint
        allowance: atomicToDecimal(U64_MAX, usdc.decimals),
        payer: address,
      }),
    );
    // saved once confirmed: approving again after a crash is harmless (the same allowance), skipping a failed one is not
    const done = await ctx.signSubmitTrack(envelope, [executive]);
    await persist({ delegation_signature: done?.signature });
  }

  await ctx.save(ctx.registeredConfig(mint, executive));
  return {
    kind: 'register_agent',
    status: 'registered',
    network: ctx.network,
    mint,
    treasury_address: treasuryOf(mint),
    executive_pubkey: address,
    create_signature: state.create_signature ?? null,
    delegation_signature: state.delegation_signature ?? null,
    config_path: ctx.env.configPath,
  };
}
