import { publicKey } from '@metaplex-foundation/umi';
import {
  delegateExecutionV1,
  findExecutionDelegateRecordV1Pda,
  findExecutiveProfileV1Pda,
  registerExecutiveV1,
  revokeExecutionV1,
} from '@metaplex-foundation/mpl-agent-registry';
import { DomainError } from '../../shared/errors.ts';
import type { AgentBuildContext, PlanOutcome } from '../../transactions/plan.ts';
import type { PrepareExecutiveInput, PrepareExecutiveRegisterInput } from '../prepare-schema.ts';
import { agentIdentityOf } from './agent.ts';
import { IDENTITY_PROGRAM_ID, requireLedgerOwner, requireProgram, signer, toInstructions, TOOLS_PROGRAM_ID, umi } from './execute.ts';

// executive/register, executive/delegate, executive/revoke: the Agent Registry tools program (Metaplex "Run an Agent").

/** ["executive_profile", authority] under the tools program. */
export const executiveProfileOf = (authority: string): string => findExecutiveProfileV1Pda(umi(), { authority: publicKey(authority) })[0];

/** ["execution_delegate_record", executive profile, asset] under the tools program. */
export const executionDelegateRecordOf = (executive: string, asset: string): string =>
  findExecutionDelegateRecordV1Pda(umi(), { executiveProfile: publicKey(executiveProfileOf(executive)), agentAsset: publicKey(asset) })[0];

/** executive/register: the wallet `authority` creates its executive profile (once per wallet); it signs. */
export async function buildRegisterExecutive(input: PrepareExecutiveRegisterInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  await requireProgram(ctx, TOOLS_PROGRAM_ID);
  const payer = input.payer ?? input.authority;
  const profile = executiveProfileOf(input.authority);
  if (await ctx.reads.getAccount(profile)) {
    throw new DomainError('conflict', `${input.authority} is already registered as an executive (profile ${profile})`, { executive_profile: profile });
  }
  const instructions = toInstructions(registerExecutiveV1(umi(), { payer: signer(payer), authority: signer(input.authority) }));
  const echo = { asset: input.mint, executive: input.authority, executive_profile: executiveProfileOf(input.authority) };
  return { kind: 'agent.executive.register', agent: input.mint, feePayer: payer, instructions, echo, metadata: { echo } };
}

/** executive/delegate: the owner lets the executive sign Execute for the asset (a delegation record). */
export async function buildDelegateExecution(input: PrepareExecutiveInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  await requireProgram(ctx, TOOLS_PROGRAM_ID);
  // the record names the agent identity: without the identity program the asset has none
  await requireProgram(ctx, IDENTITY_PROGRAM_ID);
  const owner = ctx.agent.owner;
  const payer = input.payer ?? owner;
  await requireLedgerOwner(ctx.reads, input.mint, owner);
  const [profile, identity, record] = await ctx.reads.getMultipleAccounts([
    executiveProfileOf(input.executive),
    agentIdentityOf(input.mint),
    executionDelegateRecordOf(input.executive, input.mint),
  ]);
  if (!profile)
    throw refuse('executive', 'executive_not_registered', `${input.executive} has no executive profile: it registers first (executive/register/prepare)`);
  if (!identity) throw refuse('mint', 'identity_not_registered', `Agent ${input.mint} has no registered identity: register it first (identity/prepare)`);
  if (record) {
    throw new DomainError('conflict', `Execution of ${input.mint} is already delegated to ${input.executive}`, {
      execution_delegate_record: executionDelegateRecordOf(input.executive, input.mint),
    });
  }
  const instructions = toInstructions(
    delegateExecutionV1(umi(), {
      executiveProfile: publicKey(executiveProfileOf(input.executive)),
      agentAsset: publicKey(input.mint),
      agentIdentity: publicKey(agentIdentityOf(input.mint)),
      payer: signer(payer),
      authority: signer(owner),
    }),
  );
  const echo = {
    asset: input.mint,
    executive: input.executive,
    executive_profile: executiveProfileOf(input.executive),
    execution_delegate_record: executionDelegateRecordOf(input.executive, input.mint),
  };
  return { kind: 'agent.executive.delegate', agent: input.mint, feePayer: payer, instructions, echo, metadata: { echo, executive: input.executive } };
}

/** executive/revoke: the owner closes the delegation record (RevokeExecutionV1); its rent goes back to the owner. */
export async function buildRevokeExecution(input: PrepareExecutiveInput, ctx: AgentBuildContext): Promise<PlanOutcome> {
  await requireProgram(ctx, TOOLS_PROGRAM_ID);
  const owner = ctx.agent.owner;
  const payer = input.payer ?? owner;
  const record = executionDelegateRecordOf(input.executive, input.mint);
  await requireLedgerOwner(ctx.reads, input.mint, owner);
  if (!(await ctx.reads.getAccount(record))) {
    throw refuse('executive', 'not_delegated', `Execution of ${input.mint} is not delegated to ${input.executive}: nothing to revoke`);
  }
  const instructions = toInstructions(
    revokeExecutionV1(umi(), {
      executionDelegateRecord: publicKey(record),
      agentAsset: publicKey(input.mint),
      destination: publicKey(owner),
      payer: signer(payer),
      authority: signer(owner),
    }),
  );
  const echo = { asset: input.mint, executive: input.executive, execution_delegate_record: record };
  return { kind: 'agent.executive.revoke', agent: input.mint, feePayer: payer, instructions, echo, metadata: { echo, executive: input.executive } };
}

const refuse = (path: string, code: string, message: string): DomainError => new DomainError('invalid_request', message, { issues: [{ path, message, code }] });
