import { Agent, RecordAgentInput } from '../../../domain/agents/schema.ts';
import { AgentPayTo, TreasuryBalances } from '../../../domain/treasury/schema.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { graphqlEnum, NetworkEnum, StableSymbolEnum, TokenProgramEnum } from '../enums.ts';
import { toDomainInput, type Assert, type SameKeys } from './common.ts';

// hosted-api §4.4: agent records, through the same procedures as REST (ctx.api).

const DelegationRef = builder.objectRef<Agent['delegations'][number]>('Delegation').implement({
  extensions: fromZod(Agent.shape.delegations.element),
  fields: (t) => ({
    stableSymbol: t.expose('stable_symbol', { type: StableSymbolEnum }),
    delegate: t.exposeString('delegate'),
    allowanceAtomic: t.exposeString('allowance_atomic'),
  }),
});

const TreasuryTokenRef = builder.objectRef<TreasuryBalances['tokens'][number]>('TreasuryToken').implement({
  extensions: fromZod(TreasuryBalances.shape.tokens.element),
  description: 'A token account the treasury owns. Amounts are atomic decimal strings.',
  fields: (t) => ({
    symbol: t.expose('symbol', { type: StableSymbolEnum, nullable: true, description: 'null for a mint outside the curated stables' }),
    mint: t.exposeString('mint'),
    tokenProgram: t.expose('token_program', { type: TokenProgramEnum }),
    tokenAccount: t.exposeString('token_account'),
    amountAtomic: t.exposeString('amount_atomic'),
    decimals: t.exposeInt('decimals'),
  }),
});

const TreasuryBalancesRef = builder.objectRef<TreasuryBalances>('TreasuryBalances').implement({
  extensions: fromZod(TreasuryBalances),
  description: 'hosted-api §4.4: what the treasury holds, read from the ledger. Lamport amounts are decimal strings.',
  fields: (t) => ({
    agent: t.exposeString('agent'),
    treasury: t.exposeString('treasury'),
    network: t.expose('network', { type: NetworkEnum }),
    lamports: t.exposeString('lamports'),
    reserveLamports: t.exposeString('reserve_lamports'),
    spendableLamports: t.exposeString('spendable_lamports'),
    tokens: t.expose('tokens', { type: [TreasuryTokenRef] }),
    slot: t.exposeInt('slot'),
  }),
});

const PayToEntryRef = builder.objectRef<AgentPayTo['pay_to'][number]>('PayToEntry').implement({
  extensions: fromZod(AgentPayTo.shape.pay_to.element),
  description: 'Where to pay the agent in one curated stable.',
  fields: (t) => ({
    currency: t.expose('currency', { type: StableSymbolEnum }),
    asset: t.exposeString('asset'),
    tokenProgram: t.expose('token_program', { type: TokenProgramEnum }),
    payTo: t.exposeString('pay_to', { description: 'The x402 payTo: the agent’s treasury.' }),
    tokenAccount: t.exposeString('token_account', { description: 'ATA(payTo, asset): the account a payment credits.' }),
    ready: t.exposeBoolean('ready', { description: 'Whether tokenAccount exists on the ledger now.' }),
  }),
});

const AgentPayToRef = builder.objectRef<AgentPayTo>('AgentPayTo').implement({
  extensions: fromZod(AgentPayTo),
  fields: (t) => ({
    agent: t.exposeString('agent'),
    network: t.expose('network', { type: NetworkEnum }),
    treasury: t.exposeString('treasury'),
    payTo: t.expose('pay_to', { type: [PayToEntryRef] }),
  }),
});

const AgentSourceEnum = graphqlEnum('AgentSource', Agent.shape.source);

export const AgentRef = builder.objectRef<Agent>('Agent').implement({
  extensions: fromZod(Agent),
  description: 'An agent (an MPL Core asset) and its treasury.',
  fields: (t) => ({
    mint: t.exposeString('mint'),
    network: t.expose('network', { type: NetworkEnum }),
    owner: t.exposeString('owner'),
    name: t.exposeString('name', { nullable: true }),
    uri: t.exposeString('uri', { nullable: true }),
    treasury: t.exposeString('treasury'),
    executive: t.exposeString('executive', { nullable: true }),
    delegations: t.expose('delegations', { type: [DelegationRef] }),
    source: t.expose('source', { type: AgentSourceEnum }),
    registeredAt: t.exposeString('registered_at'),
    provenAt: t.exposeString('proven_at', {
      nullable: true,
      description: 'When the ledger showed its Core asset with its owner; null: unproven, takes no payments',
    }),
    // Each calls the same procedure as its REST route (GET /v1/agents/{mint}/treasury/balances, …/pay-to).
    treasuryBalances: t.field({
      type: TreasuryBalancesRef,
      nullable: true,
      description: 'GET /v1/agents/{mint}/treasury/balances',
      resolve: (agent, _args, ctx) => ctx.api.agents.balances({ mint: agent.mint }),
    }),
    payTo: t.field({
      type: AgentPayToRef,
      nullable: true,
      description: 'GET /v1/agents/{mint}/pay-to',
      resolve: (agent, _args, ctx) => ctx.api.agents.payTo({ mint: agent.mint }),
    }),
  }),
});

const RecordAgentInputRef = builder.inputType('RecordAgentInput', {
  extensions: fromZod(RecordAgentInput),
  fields: (t) => ({
    mint: t.string({ required: true }),
    owner: t.string({ required: true }),
    name: t.string(),
    uri: t.string(),
  }),
});

export type RecordAgentInputInSync = Assert<SameKeys<typeof RecordAgentInputRef.$inferInput, RecordAgentInput>>;

builder.queryFields((t) => ({
  agent: t.field({
    extensions: procedure('agents.get'),
    type: AgentRef,
    nullable: true,
    args: { mint: t.arg.string({ required: true }) },
    resolve: (_root, { mint }, ctx) => ctx.api.agents.get({ mint }),
  }),
}));

builder.mutationFields((t) => ({
  recordAgent: t.field({
    extensions: procedure('agents.record'),
    type: AgentRef,
    nullable: true,
    args: { input: t.arg({ type: RecordAgentInputRef, required: true }) },
    // The procedure parses the input with RecordAgentInput (zod).
    resolve: (_root, { input }, ctx) => ctx.api.agents.record(toDomainInput(input) as RecordAgentInput),
  }),
}));
