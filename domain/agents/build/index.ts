import type { z } from 'zod';
import type { PreparedKind } from '../../events/kinds.ts';
import type { AgentBuildContext, BuildContext, PlanOutcome } from '../../transactions/plan.ts';
import {
  PrepareAgentInput,
  PrepareBuyerPaymentInput,
  PrepareDelegationInput,
  PrepareDelegationRevokeInput,
  PrepareExecutiveInput,
  PrepareExecutiveRegisterInput,
  PrepareIdentityInput,
  PrepareProvisionInput,
  PrepareTokenSetInput,
  PrepareWithdrawAllInput,
  PrepareWithdrawInput,
  PrepareWithdrawSolAllInput,
  PrepareWithdrawSolInput,
} from '../prepare-schema.ts';
import { buildCreateAgent, buildRegisterIdentity, buildTokenSet } from './agent.ts';
import { buildBuyerPayment, type BuyerOffer } from './buyer.ts';
import { buildDelegation, buildDelegationRevoke } from './delegation.ts';
import { buildDelegateExecution, buildRegisterExecutive, buildRevokeExecution } from './executive.ts';
import { buildProvision, buildWithdraw, buildWithdrawAll, buildWithdrawSol, buildWithdrawSolAll } from './treasury.ts';

export { buildCreateAgent, buildRegisterIdentity, buildTokenSet, agentIdentityOf } from './agent.ts';
export { buildBuyerPayment, directOffer, feeTermsOf, type BuyerOffer, type BuyerBuildContext } from './buyer.ts';
export { buildDelegation, buildDelegationRevoke, paddedAllowance, stableOf } from './delegation.ts';
export { buildDelegateExecution, buildRegisterExecutive, buildRevokeExecution, executionDelegateRecordOf, executiveProfileOf } from './executive.ts';
export { buildProvision, buildWithdraw, buildWithdrawAll, buildWithdrawSol, buildWithdrawSolAll, RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS } from './treasury.ts';
export { IDENTITY_PROGRAM_ID, TOOLS_PROGRAM_ID, executeInstructions, umi } from './execute.ts';

// The 14 prepare routes as data (hosted-api §4.3, DECISIONS "Prepare / submit / events"), so the routes on all three
// doors are generated from one table. `context` says what the builder needs besides its input:
// - 'network': a BuildContext (agents/prepare: no agent exists yet);
// - 'agent': an AgentBuildContext with the recorded agent of the `{mint}` path parameter (merged into the input);
// - 'buyer': an AgentBuildContext of the BUYER agent (input.buyer_agent) plus the resolved offer: a payment link
//   resolved by the service, or directOffer(input, ctx) for (pay_to, amount, currency). Its build takes
//   (input, offer, ctx).

interface RouteBase<S extends z.ZodType> {
  /** the REST path; `{mint}` is the agent asset */
  path: string;
  input: S;
  kind: PreparedKind;
  summary: string;
}

export interface NetworkRoute<S extends z.ZodType> extends RouteBase<S> {
  context: 'network';
  build(input: z.output<S>, ctx: BuildContext): Promise<PlanOutcome>;
}

export interface AgentRoute<S extends z.ZodType> extends RouteBase<S> {
  context: 'agent';
  build(input: z.output<S>, ctx: AgentBuildContext): Promise<PlanOutcome>;
}

export interface BuyerRoute<S extends z.ZodType> extends RouteBase<S> {
  context: 'buyer';
  /** takes the resolved offer too: a payment link resolved by the service, or directOffer(input, ctx) */
  build(input: z.output<S>, offer: BuyerOffer, ctx: AgentBuildContext): Promise<PlanOutcome>;
}

/** Any route of the table, for code that walks it (`context` tells which build signature it has). */
export type PrepareRoute = NetworkRoute<z.ZodType> | AgentRoute<z.ZodType> | BuyerRoute<z.ZodType>;

const agentRoute = <S extends z.ZodType>(r: Omit<AgentRoute<S>, 'context'>): AgentRoute<S> => ({ ...r, context: 'agent' });

export const PREPARE_ROUTES = {
  agentCreate: {
    context: 'network',
    path: '/v1/agents/prepare',
    input: PrepareAgentInput,
    kind: 'agent.create',
    summary: 'Mint a new agent: a Metaplex Core asset (its treasury is the asset-signer PDA) and its identity when the network runs the registry',
    build: buildCreateAgent,
  } satisfies NetworkRoute<typeof PrepareAgentInput>,
  identityRegister: agentRoute({
    path: '/v1/agents/{mint}/identity/prepare',
    input: PrepareIdentityInput,
    kind: 'agent.identity.register',
    summary: 'Register the agent identity on an existing asset (Agent Registry RegisterIdentityV1)',
    build: buildRegisterIdentity,
  }),
  executiveRegister: agentRoute({
    path: '/v1/agents/{mint}/executive/register/prepare',
    input: PrepareExecutiveRegisterInput,
    kind: 'agent.executive.register',
    summary: 'Register a wallet’s executive profile (Agent Registry RegisterExecutiveV1)',
    build: buildRegisterExecutive,
  }),
  executiveDelegate: agentRoute({
    path: '/v1/agents/{mint}/executive/delegate/prepare',
    input: PrepareExecutiveInput,
    kind: 'agent.executive.delegate',
    summary: 'Let the executive sign Execute for the asset (Agent Registry DelegateExecutionV1)',
    build: buildDelegateExecution,
  }),
  executiveRevoke: agentRoute({
    path: '/v1/agents/{mint}/executive/revoke/prepare',
    input: PrepareExecutiveInput,
    kind: 'agent.executive.revoke',
    summary: 'Revoke the executive’s Execute delegation (Agent Registry RevokeExecutionV1)',
    build: buildRevokeExecution,
  }),
  delegationSet: agentRoute({
    path: '/v1/agents/{mint}/delegation/prepare',
    input: PrepareDelegationInput,
    kind: 'agent.delegation.set',
    summary: 'Approve the executive as token delegate of the treasury up to an allowance (SPL Approve through Core Execute)',
    build: buildDelegation,
  }),
  delegationRevoke: agentRoute({
    path: '/v1/agents/{mint}/delegation/revoke/prepare',
    input: PrepareDelegationRevokeInput,
    kind: 'agent.delegation.revoke',
    summary: 'Revoke the token delegate of the treasury (SPL Revoke through Core Execute)',
    build: buildDelegationRevoke,
  }),
  tokenSet: agentRoute({
    path: '/v1/agents/{mint}/token/set/prepare',
    input: PrepareTokenSetInput,
    kind: 'agent.token.set',
    summary: 'Set the agent token of the identity (Agent Registry SetAgentTokenV1 through Core Execute)',
    build: buildTokenSet,
  }),
  provision: agentRoute({
    path: '/v1/agents/{mint}/treasury/provision/prepare',
    input: PrepareProvisionInput,
    kind: 'agent.treasury.provision',
    summary: 'Create the treasury’s missing token accounts (curated stables by default); no-op when all exist',
    build: buildProvision,
  }),
  withdraw: agentRoute({
    path: '/v1/agents/{mint}/treasury/withdraw/prepare',
    input: PrepareWithdrawInput,
    kind: 'agent.treasury.withdraw',
    summary: 'Move a token amount out of the treasury to a wallet (TransferChecked through Core Execute)',
    build: buildWithdraw,
  }),
  withdrawAll: agentRoute({
    path: '/v1/agents/{mint}/treasury/withdraw-all/prepare',
    input: PrepareWithdrawAllInput,
    kind: 'agent.treasury.withdraw',
    summary: 'Move the whole token balance out of the treasury; no-op at zero',
    build: buildWithdrawAll,
  }),
  withdrawSol: agentRoute({
    path: '/v1/agents/{mint}/treasury/withdraw-sol/prepare',
    input: PrepareWithdrawSolInput,
    kind: 'agent.treasury.withdraw_sol',
    summary: 'Move lamports out of the treasury (System transfer through Core Execute)',
    build: buildWithdrawSol,
  }),
  withdrawSolAll: agentRoute({
    path: '/v1/agents/{mint}/treasury/withdraw-sol-all/prepare',
    input: PrepareWithdrawSolAllInput,
    kind: 'agent.treasury.withdraw_sol',
    summary: 'Move the lamports above a reserve out of the treasury; no-op at or below it',
    build: buildWithdrawSolAll,
  }),
  buyerPayment: {
    context: 'buyer',
    path: '/v1/buyer/payment/prepare',
    input: PrepareBuyerPaymentInput,
    kind: 'buyer.payment',
    summary: 'Build a settlement payment from the buyer agent’s treasury, signed by its executive as token delegate',
    build: buildBuyerPayment,
  } satisfies BuyerRoute<typeof PrepareBuyerPaymentInput>,
} as const;

export type PrepareRouteName = keyof typeof PREPARE_ROUTES;

// every entry is a PrepareRoute: code generating the routes can walk the table with one type
PREPARE_ROUTES satisfies Record<PrepareRouteName, PrepareRoute>;
