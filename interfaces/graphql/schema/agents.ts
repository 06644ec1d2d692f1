import type { Agent, RecordAgentInput } from '../../../domain/agents/schema.ts';
import { builder } from '../builder.ts';
import { StableSymbolEnum, toDomainInput, type Assert, type SameKeys } from './common.ts';

// hosted-api §4.4: agent records, through the same procedures as REST (ctx.api).

const DelegationRef = builder.objectRef<Agent['delegations'][number]>('Delegation').implement({
  fields: (t) => ({
    stableSymbol: t.expose('stable_symbol', { type: StableSymbolEnum }),
    delegate: t.exposeString('delegate'),
    allowanceAtomic: t.exposeString('allowance_atomic'),
  }),
});

const AgentSourceEnum = builder.enumType('AgentSource', { values: ['recorded', 'prepared'] as const satisfies readonly Agent['source'][] });

export const AgentRef = builder.objectRef<Agent>('Agent').implement({
  description: 'An agent (an MPL Core asset) and its treasury.',
  fields: (t) => ({
    mint: t.exposeString('mint'),
    network: t.exposeString('network'),
    owner: t.exposeString('owner'),
    name: t.exposeString('name', { nullable: true }),
    uri: t.exposeString('uri', { nullable: true }),
    treasury: t.exposeString('treasury'),
    executive: t.exposeString('executive', { nullable: true }),
    delegations: t.expose('delegations', { type: [DelegationRef] }),
    source: t.expose('source', { type: AgentSourceEnum }),
    registeredAt: t.exposeString('registered_at'),
  }),
});

const RecordAgentInputRef = builder.inputType('RecordAgentInput', {
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
    type: AgentRef,
    nullable: true,
    args: { mint: t.arg.string({ required: true }) },
    resolve: (_root, { mint }, ctx) => ctx.api.agents.get({ mint }),
  }),
}));

builder.mutationFields((t) => ({
  recordAgent: t.field({
    type: AgentRef,
    nullable: true,
    args: { input: t.arg({ type: RecordAgentInputRef, required: true }) },
    // The procedure parses the input with RecordAgentInput (zod).
    resolve: (_root, { input }, ctx) => ctx.api.agents.record(toDomainInput(input) as RecordAgentInput),
  }),
}));
