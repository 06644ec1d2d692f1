import { z } from 'zod';
import { IdentityMintInput, ResolveInput, VerifyInput } from '../../../domain/identity/schema.ts';
import { atomicToDecimal } from '../../../domain/shared/money.ts';
import { STABLES } from '../../../domain/shared/network.ts';
import { defineTool, ToolError } from '../context.ts';

// fee-facilitator-mpp-tools §4.3: which agent this is, other agents' identities, verdicts and reputation.

export const getIdentity = defineTool({
  name: 'svc_get_identity',
  title: 'This agent',
  description: 'Which agent the tools act as, on which network, and its treasury account (where it holds and receives funds).',
  input: z.object({}),
  async run(ctx) {
    const agent = ctx.agent();
    if (!agent) {
      return {
        agent_mint: null,
        network: ctx.network,
        treasury_address: null,
        executive_pubkey: null,
        pending_register: ctx.config?.pending_register != null,
        hint: 'No agent is configured: run svc_register_agent.',
        config_path: ctx.env.configPath,
      };
    }
    const local = {
      agent_mint: agent.mint,
      network: ctx.network,
      treasury_address: agent.treasury,
      executive_pubkey: agent.executive.publicKey.toBase58(),
    };
    // which agent, network and treasury are this process's own facts; the API's record adds owner, name and uri
    if (!ctx.hasApiKey) {
      return {
        ...local,
        owner: null,
        name: null,
        registration_uri: null,
        hint: 'Set SVC_API_KEY to add the API’s record of the agent.',
        api_url: ctx.env.apiUrl,
        config_path: ctx.env.configPath,
      };
    }
    const recorded = await ctx.call((api) => api.agents.get.query({ mint: agent.mint }));
    return { ...local, owner: recorded.owner, name: recorded.name, registration_uri: recorded.uri, api_url: ctx.env.apiUrl, config_path: ctx.env.configPath };
  },
});

export const resolveIdentity = defineTool({
  name: 'svc_resolve_identity',
  title: 'Resolve another agent',
  description:
    'Resolve an agent by exactly one of mint, handle or verified domain: public profile, verified domains, public capability cards, public claims and a reputation summary.',
  input: ResolveInput,
  run: (ctx, input) => ctx.call((api) => api.identity.resolve.query(input)),
});

export const verifyIdentity = defineTool({
  name: 'svc_verify_identity',
  title: 'Verify an agent before dealing with it',
  description:
    'Check that a mint, handle or domain resolves to a live identity; with intent, capability or thresholds (min_rating 0–5, require_verified_domain, min_settled_calls) it answers an allow, warn or deny verdict with the checks behind it.',
  input: VerifyInput,
  run: (ctx, input) => ctx.call((api) => api.identity.verify.mutate(input)),
});

export const reputation = defineTool({
  name: 'svc_reputation',
  title: 'Reputation of an agent',
  description:
    'Reputation snapshot of an on-chain agent from its settled paid calls: settled-call volume, dispute rate (share of settled calls not answered 2xx) and rating in [0, 1].',
  input: IdentityMintInput,
  async run(ctx, { mint }) {
    const identity = await ctx.call((api) => api.identity.get.query({ mint }));
    const r = identity.reputation;
    if (!r) throw new ToolError('agent_not_found', `No reputation for ${mint}.`);
    let usd = 0n;
    for (const v of r.volume) {
      const stable = STABLES[ctx.network].find((s) => s.mint === v.asset);
      // stables are 6-decimal dollar tokens: sum in micro-dollars
      if (stable) usd += BigInt(v.amount_atomic) * 10n ** BigInt(6 - Math.min(6, stable.decimals));
    }
    const share2xx = r.rating === null ? null : r.rating / 5;
    return {
      agent: mint,
      network: ctx.network,
      settled_calls: r.settled_calls,
      volume_usd: atomicToDecimal(usd, 6),
      volume: r.volume,
      rating: share2xx === null ? null : Math.round(share2xx * 1000) / 1000,
      dispute_rate: share2xx === null ? null : Math.round((1 - share2xx) * 1000) / 1000,
      last_settled_at: r.last_settled_at,
    };
  },
});
