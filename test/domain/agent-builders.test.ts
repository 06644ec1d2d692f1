import test from 'ava';
import {
  ComputeBudgetInstruction,
  Keypair,
  PublicKey,
  SystemInstruction,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
import {
  AccountLayout,
  ASSOCIATED_TOKEN_PROGRAM_ID,
  decodeApproveInstruction,
  decodeRevokeInstruction,
  decodeTransferCheckedInstruction,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token';
import { createNoopSigner, publicKey } from '@metaplex-foundation/umi';
import { createUmi } from '@metaplex-foundation/umi-bundle-defaults';
import { toWeb3JsInstruction } from '@metaplex-foundation/umi-web3js-adapters';
import {
  createCollectionV1,
  createV1,
  deserializeAssetV1,
  getCreateV1InstructionDataSerializer,
  getExecuteV1InstructionDataSerializer,
  mplCore,
} from '@metaplex-foundation/mpl-core';
import {
  delegateExecutionV1,
  findAgentIdentityV1Pda,
  findExecutionDelegateRecordV1Pda,
  findExecutiveProfileV1Pda,
  getRegisterIdentityV1InstructionDataSerializer,
  getSetAgentTokenV1InstructionDataSerializer,
  mplAgentIdentity,
  mplAgentTools,
  registerExecutiveV1,
  registerIdentityV1,
  revokeExecutionV1,
  setAgentTokenV1,
} from '@metaplex-foundation/mpl-agent-registry';
import type { EmbeddedLedger } from '../../adapters/ledger/embedded/ledger.ts';
import {
  buildBuyerPayment,
  buildCreateAgent,
  buildDelegateExecution,
  buildDelegation,
  buildDelegationRevoke,
  buildProvision,
  buildRegisterExecutive,
  buildRegisterIdentity,
  buildRevokeExecution,
  buildTokenSet,
  buildWithdraw,
  buildWithdrawAll,
  buildWithdrawSol,
  buildWithdrawSolAll,
  directOffer,
  IDENTITY_PROGRAM_ID,
  PREPARE_ROUTES,
  RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS,
  TOOLS_PROGRAM_ID,
} from '../../domain/agents/build/index.ts';
import { executeInstructions } from '../../domain/agents/build/execute.ts';
import {
  Atomic,
  PositiveAtomic,
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
} from '../../domain/agents/prepare-schema.ts';
import type { AgentRecord } from '../../domain/agents/schema.ts';
import { checkEvent, PREPARED_KIND_NAMES } from '../../domain/events/kinds.ts';
import { MEMO_PROGRAM_ID } from '../../domain/facilitator/schema.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { feeFor } from '../../domain/shared/money.ts';
import { STABLES, findStable, type Network } from '../../domain/shared/network.ts';
import { MPL_CORE_PROGRAM_ID, associatedTokenAccount, treasuryOf } from '../../domain/treasury/derive.ts';
import { isNoOp, type AgentBuildContext, type PlanOutcome, type TransactionPlan } from '../../domain/transactions/plan.ts';
import { openTestLedger } from '../support/ledger.ts';
import { coreProgramsDir, metaplexTest } from '../support/programs.ts';
import { coreProgramBytes } from '../support/core-asset.ts';

// The prepare builders against real embedded ledgers (LiteSVM; no mock of the Ledger port). Every built
// instruction is read back with the official decoders (mpl-core's and the Agent Registry's serializers, spl-token's
// decoders, web3.js' SystemInstruction/ComputeBudgetInstruction); Agent Registry instructions are compared byte for
// byte with what the official client builds for the same inputs; and where the ledger runs Metaplex Core (the
// deployed binary of ../shared/programs), the built transactions are signed and executed.

const USDC = findStable('chain-devnet', 'USDC')!;
const FEE_AUTHORITY = Keypair.generate().publicKey.toBase58();
const address = () => Keypair.generate().publicKey.toBase58();

/** The Core binary (SVC_LEDGER_PROGRAMS, else ../shared/programs); tests that execute it are metaplexTest's. */
const CORE = coreProgramsDir() ? coreProgramBytes() : null;

const ledgers: EmbeddedLedger[] = [];
let plain: EmbeddedLedger; // devnet, no Agent Registry, with Core when the binary is here
let registry: EmbeddedLedger; // devnet where the identity and tools program ids hold deployed programs
let mainnet: EmbeddedLedger; // mainnet, with Core when the binary is here (Execute-based builders need it)

test.before(async () => {
  const core = CORE ? [{ id: MPL_CORE_PROGRAM_ID, elf: CORE }] : [];
  // The registry's binaries are not available: a deployed program at their ids (Core's ELF as a stand-in) is what the
  // builders look for — whether the network's ledger runs a program there.
  const standIns = CORE ? [IDENTITY_PROGRAM_ID, TOOLS_PROGRAM_ID].map((id) => ({ id, elf: CORE })) : [];
  [plain, registry, mainnet] = await Promise.all([
    openTestLedger({ programs: core }),
    openTestLedger({ programs: [...core, ...standIns] }),
    openTestLedger({ network: 'chain-mainnet', programs: core }),
  ]);
  ledgers.push(plain, registry, mainnet);
});
test.after.always(async () => {
  await Promise.all(ledgers.map((l) => l.close()));
});

function ctxOf(ledger: EmbeddedLedger, agent: AgentRecord, overrides: Partial<AgentBuildContext> = {}): AgentBuildContext {
  const network: Network = agent.network;
  return {
    network,
    reads: ledger,
    stables: STABLES[network],
    fee: { bps: 100, enforcement: 'enforce', authorities: { 'chain-devnet': FEE_AUTHORITY, 'chain-mainnet': FEE_AUTHORITY } },
    agent,
    ...overrides,
  };
}

interface Agent {
  record: AgentRecord;
  owner: Keypair;
  mint: string;
  treasury: string;
}

function agentOn(network: Network = 'chain-devnet', mint = address()): Agent {
  const owner = Keypair.generate();
  const record: AgentRecord = {
    mint,
    network,
    owner: owner.publicKey.toBase58(),
    name: null,
    uri: null,
    treasury: treasuryOf(mint),
    executive: null,
    source: 'prepared',
    ownerPrincipal: null,
    registeredAt: new Date(),
    provenAt: new Date(),
  };
  return { record, owner, mint, treasury: record.treasury };
}

function plan(outcome: PlanOutcome): TransactionPlan {
  if (isNoOp(outcome)) throw new Error(`expected a transaction, got a no-op of ${outcome.kind}`);
  return outcome;
}

/** Every prepared event's metadata must pass the catalogue (kinds.ts) in phase `prepared`. */
function assertCatalogued(t: { is: (a: unknown, b: unknown, m?: string) => void }, p: TransactionPlan): void {
  t.is(checkEvent({ kind: p.kind, phase: 'prepared', metadata: p.metadata }), null, `${p.kind} metadata`);
}

const keys = (ix: TransactionInstruction) => ix.keys.map((k) => ({ pubkey: k.pubkey.toBase58(), isSigner: k.isSigner, isWritable: k.isWritable }));

/** What mpl-core's executeV1 carries: its own accounts, then the inner program id, then the inner accounts. */
function decodeExecute(ix: TransactionInstruction) {
  if (ix.programId.toBase58() !== MPL_CORE_PROGRAM_ID) throw new Error(`not a Core instruction: ${ix.programId.toBase58()}`);
  const [data] = getExecuteV1InstructionDataSerializer().deserialize(ix.data);
  const [asset, collection, assetSigner, payer, authority, systemProgram, programId, ...inner] = ix.keys;
  return {
    discriminator: data.discriminator,
    asset: asset!.pubkey.toBase58(),
    collection: collection!.pubkey.toBase58(),
    assetSigner: assetSigner!,
    payer: payer!,
    authority: authority!,
    systemProgram: systemProgram!.pubkey.toBase58(),
    inner: new TransactionInstruction({ programId: programId!.pubkey, keys: inner, data: Buffer.from(data.instructionData) }),
  };
}

function assertExecute(t: any, ix: TransactionInstruction, a: { asset: string; owner: string; payer: string }) {
  const e = decodeExecute(ix);
  t.is(e.asset, a.asset, 'Execute names the asset');
  t.is(e.assetSigner.pubkey.toBase58(), treasuryOf(a.asset), 'the asset signer is the treasury PDA');
  t.false(e.assetSigner.isSigner, 'the PDA never signs the transaction: Core signs for it in the CPI');
  t.true(e.authority.isSigner, 'the owner signs Execute');
  t.is(e.authority.pubkey.toBase58(), a.owner);
  t.is(e.payer.pubkey.toBase58(), a.payer);
  t.false(
    e.inner.keys.some((k) => k.pubkey.toBase58() === treasuryOf(a.asset) && k.isSigner),
    'the treasury is carried as an unsigned remaining account',
  );
  return e;
}

/** The official client, used directly: what a Metaplex tutorial builds for the same inputs. */
const officialUmi = createUmi('http://127.0.0.1:1').use(mplCore()).use(mplAgentIdentity()).use(mplAgentTools());
const noop = (a: string) => createNoopSigner(publicKey(a));
const official = (b: { getInstructions(): Parameters<typeof toWeb3JsInstruction>[0][] }) => b.getInstructions().map(toWeb3JsInstruction);

function assertSameInstructions(t: any, built: TransactionInstruction[], expected: TransactionInstruction[]) {
  t.is(built.length, expected.length);
  built.forEach((ix, i) => {
    t.is(ix.programId.toBase58(), expected[i]!.programId.toBase58());
    t.deepEqual(keys(ix), keys(expected[i]!));
    t.deepEqual(Buffer.from(ix.data), Buffer.from(expected[i]!.data), 'byte-equal data');
  });
}

async function rejects(t: any, promise: Promise<unknown>, code: string, details?: Record<string, unknown>): Promise<DomainError> {
  const e = await t.throwsAsync(promise, { instanceOf: DomainError });
  t.is(e.code, code, e.message);
  if (details) t.like(e.details, details);
  return e;
}

/** Signs the plan's message with the given keys (and the presigners) and sends it to the ledger. */
async function run(ledger: EmbeddedLedger, p: TransactionPlan, signers: Keypair[]) {
  const { blockhash } = await ledger.getLatestBlockhash();
  const message = new TransactionMessage({
    payerKey: new PublicKey(p.feePayer),
    recentBlockhash: blockhash,
    instructions: p.instructions,
  }).compileToV0Message();
  const tx = new VersionedTransaction(message);
  const all = [...signers, ...(p.presigners ?? []).map((s) => Keypair.fromSecretKey(s))];
  const needed = message.staticAccountKeys.slice(0, message.header.numRequiredSignatures).map((k) => k.toBase58());
  tx.sign(all.filter((k) => needed.includes(k.publicKey.toBase58())));
  return ledger.sendTransaction(tx.serialize());
}

/**
 * Makes `delegate` the SPL delegate of the agent treasury's USDC account for `allowance`, writing the account as the
 * token program would (a real account of the ledger: minted to, then its delegate fields set), without needing Core.
 */
function approveOnLedger(ledger: EmbeddedLedger, treasury: string, approval: { delegate: string; allowance: bigint; balance: bigint }): void {
  const { delegate, allowance, balance } = approval;
  const minted = ledger.mintTo(treasury, USDC.mint, balance);
  const account = ledger.readAccount(minted.tokenAccount)!;
  const data = AccountLayout.decode(account.data);
  const out = Buffer.alloc(AccountLayout.span);
  AccountLayout.encode({ ...data, delegateOption: 1, delegate: new PublicKey(delegate), delegatedAmount: allowance }, out);
  ledger.setAccount(minted.tokenAccount, { lamports: account.lamports, data: out, owner: account.owner });
}

/** An account of a registry program on the `registry` ledger (profiles, identities, records the programs would write). */
function registryAccount(at: string, program: string): void {
  registry.setAccount(at, { lamports: 1_000_000n, data: new Uint8Array(104), owner: program });
}

// ---------- agents/prepare, identity, token set ----------

test('agents/prepare without the identity program: createV1 of a fresh asset (presigned), identity not_registered with a warning naming the program', async (t) => {
  const owner = address();
  const input = PrepareAgentInput.parse({ owner, name: 'Weather bot', uri: 'https://example.com/agent.json', description: 'forecasts' });
  const p = plan(await buildCreateAgent(input, { ...ctxOf(plain, agentOn().record) }));
  t.is(p.kind, 'agent.create');
  t.is(p.feePayer, owner, 'payer defaults to the owner');
  t.is(p.instructions.length, 1);
  const asset = Keypair.fromSecretKey(p.presigners![0]!).publicKey.toBase58();
  t.is(p.agent, asset);
  t.like(p.echo, { asset, treasury: treasuryOf(asset), owner, description: 'forecasts' });
  t.deepEqual(p.extras?.identity, 'not_registered');
  t.true(p.extras!.warnings!.some((w) => w.includes(IDENTITY_PROGRAM_ID)));

  const create = p.instructions[0]!;
  t.is(create.programId.toBase58(), MPL_CORE_PROGRAM_ID);
  const [data] = getCreateV1InstructionDataSerializer().deserialize(create.data);
  t.like(data, { name: 'Weather bot', uri: 'https://example.com/agent.json' });
  // createV1 accounts: asset, collection, authority, payer, owner, update authority, system program, log wrapper
  const k = keys(create);
  t.like(k[0], { pubkey: asset, isSigner: true, isWritable: true });
  t.like(k[3], { pubkey: owner, isSigner: true });
  t.is(k[4]!.pubkey, owner, 'owner');
  t.is(k[5]!.pubkey, owner, 'the owner is the update authority (the identity needs it), not the payer');
  assertCatalogued(t, p);
});

metaplexTest(test, 'agents/prepare with the identity program on the ledger: createV1 then registerIdentityV1, byte-equal to the official client', async (t) => {
  const owner = address();
  const payer = address();
  const input = PrepareAgentInput.parse({ owner, payer, name: 'A', uri: 'https://example.com/a.json' });
  const p = plan(await buildCreateAgent(input, ctxOf(registry, agentOn().record)));
  t.is(p.feePayer, payer);
  t.is(p.extras?.identity, 'registered');
  const asset = Keypair.fromSecretKey(p.presigners![0]!).publicKey.toBase58();
  t.is(p.echo.agent_identity, findAgentIdentityV1Pda(officialUmi, { asset: publicKey(asset) })[0]);
  const expected = official(
    registerIdentityV1(officialUmi, {
      asset: publicKey(asset),
      payer: noop(payer),
      authority: noop(owner),
      agentRegistrationUri: 'https://example.com/a.json',
    }),
  );
  assertSameInstructions(t, p.instructions.slice(1), expected);
  t.like(getRegisterIdentityV1InstructionDataSerializer().deserialize(p.instructions[1]!.data)[0], { agentRegistrationUri: 'https://example.com/a.json' });
});

test('identity, executive and token-set routes answer program_unavailable naming the program when the ledger lacks it', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  const executive = address();
  await rejects(t, buildRegisterIdentity(PrepareIdentityInput.parse({ mint: a.mint, uri: 'https://example.com/x.json' }), ctx), 'program_unavailable', {
    program: IDENTITY_PROGRAM_ID,
  });
  await rejects(t, buildTokenSet(PrepareTokenSetInput.parse({ mint: a.mint, genesis_account: address() }), ctx), 'program_unavailable', {
    program: IDENTITY_PROGRAM_ID,
  });
  await rejects(t, buildRegisterExecutive(PrepareExecutiveRegisterInput.parse({ mint: a.mint, authority: executive }), ctx), 'program_unavailable', {
    program: TOOLS_PROGRAM_ID,
  });
  await rejects(t, buildDelegateExecution(PrepareExecutiveInput.parse({ mint: a.mint, executive }), ctx), 'program_unavailable', { program: TOOLS_PROGRAM_ID });
  await rejects(t, buildRevokeExecution(PrepareExecutiveInput.parse({ mint: a.mint, executive }), ctx), 'program_unavailable', { program: TOOLS_PROGRAM_ID });
});

test('agents/prepare without uri: the gateway hosts the registration document — the asset’s uri is its registration.json URL', async (t) => {
  const owner = address();
  const input = PrepareAgentInput.parse({ owner, name: 'Hosted', description: 'here', services: [{ name: 'A2A', endpoint: 'https://agent.example/a2a' }] });
  const base = 'https://gw.example';
  const p = plan(await buildCreateAgent(input, { ...ctxOf(plain, agentOn().record), baseUrl: base }));
  const asset = Keypair.fromSecretKey(p.presigners![0]!).publicKey.toBase58();
  const uri = `${base}/v1/agents/${asset}/registration.json?network=chain-devnet`;
  t.like(p.echo, { asset, uri, registration_hosted: true });
  t.like(getCreateV1InstructionDataSerializer().deserialize(p.instructions[0]!.data)[0], { name: 'Hosted', uri });
  // no base URL to host at, or one too long for the asset's 200-character uri: the caller must give `uri`
  await rejects(t, buildCreateAgent(input, ctxOf(plain, agentOn().record)), 'invalid_request', { path: 'uri' });
  await rejects(t, buildCreateAgent(input, { ...ctxOf(plain, agentOn().record), baseUrl: `https://${'g'.repeat(120)}.example` }), 'invalid_request', {
    path: 'uri',
  });
  // a given uri is the caller's
  const own = plan(
    await buildCreateAgent(PrepareAgentInput.parse({ owner, name: 'Own', uri: 'https://example.com/own.json' }), {
      ...ctxOf(plain, agentOn().record),
      baseUrl: base,
    }),
  );
  t.like(own.echo, { uri: 'https://example.com/own.json', registration_hosted: false });
});

metaplexTest(test, 'identity/prepare without uri: registerIdentityV1 with the gateway-hosted registration.json URL', async (t) => {
  const a = agentOn();
  const base = 'https://gw.example';
  const p = plan(await buildRegisterIdentity(PrepareIdentityInput.parse({ mint: a.mint }), { ...ctxOf(registry, a.record), baseUrl: base }));
  const uri = `${base}/v1/agents/${a.mint}/registration.json?network=chain-devnet`;
  t.like(p.echo, { uri, registration_hosted: true });
  t.like(getRegisterIdentityV1InstructionDataSerializer().deserialize(p.instructions[0]!.data)[0], { agentRegistrationUri: uri });
});

metaplexTest(
  test,
  'identity/prepare: registerIdentityV1 authorised by the recorded owner, byte-equal to the official client; conflict once registered',
  async (t) => {
    const a = agentOn();
    const p = plan(await buildRegisterIdentity(PrepareIdentityInput.parse({ mint: a.mint, uri: 'https://example.com/id.json' }), ctxOf(registry, a.record)));
    t.is(p.feePayer, a.record.owner);
    const owner = a.record.owner;
    assertSameInstructions(
      t,
      p.instructions,
      official(
        registerIdentityV1(officialUmi, {
          asset: publicKey(a.mint),
          payer: noop(owner),
          authority: noop(owner),
          agentRegistrationUri: 'https://example.com/id.json',
        }),
      ),
    );
    assertCatalogued(t, p);
    registryAccount(p.echo.agent_identity as string, IDENTITY_PROGRAM_ID);
    await rejects(
      t,
      buildRegisterIdentity(PrepareIdentityInput.parse({ mint: a.mint, uri: 'https://example.com/id.json' }), ctxOf(registry, a.record)),
      'conflict',
    );
  },
);

metaplexTest(
  test,
  'executive register / delegate / revoke: byte-equal to the official tools client; refused (invalid_request, conflict) when the state each needs is missing or already there',
  async (t) => {
    const a = agentOn();
    const ctx = ctxOf(registry, a.record);
    const executive = address();
    const payer = address();
    const owner = a.record.owner;
    const profile = findExecutiveProfileV1Pda(officialUmi, { authority: publicKey(executive) })[0];

    const reg = plan(await buildRegisterExecutive(PrepareExecutiveRegisterInput.parse({ mint: a.mint, authority: executive }), ctx));
    t.is(reg.feePayer, executive, 'the executive pays by default');
    assertSameInstructions(t, reg.instructions, official(registerExecutiveV1(officialUmi, { payer: noop(executive), authority: noop(executive) })));
    t.is(reg.echo.executive_profile, profile);

    // never a transaction that must fail: each step needs the state the one before leaves
    const delegateInput = PrepareExecutiveInput.parse({ mint: a.mint, executive, payer });
    const issue = async (p: Promise<unknown>, code: string) => t.like((await rejects(t, p, 'invalid_request')).details, { issues: [{ code }] });
    await issue(buildDelegateExecution(delegateInput, ctx), 'executive_not_registered');
    registryAccount(profile, TOOLS_PROGRAM_ID);
    await rejects(t, buildRegisterExecutive(PrepareExecutiveRegisterInput.parse({ mint: a.mint, authority: executive }), ctx), 'conflict');
    await issue(buildDelegateExecution(delegateInput, ctx), 'identity_not_registered');
    registryAccount(findAgentIdentityV1Pda(officialUmi, { asset: publicKey(a.mint) })[0], IDENTITY_PROGRAM_ID);
    await issue(buildRevokeExecution(PrepareExecutiveInput.parse({ mint: a.mint, executive }), ctx), 'not_delegated');

    const del = plan(await buildDelegateExecution(PrepareExecutiveInput.parse({ mint: a.mint, executive, payer }), ctx));
    t.is(del.feePayer, payer);
    assertSameInstructions(
      t,
      del.instructions,
      official(
        delegateExecutionV1(officialUmi, {
          executiveProfile: publicKey(profile),
          agentAsset: publicKey(a.mint),
          agentIdentity: findAgentIdentityV1Pda(officialUmi, { asset: publicKey(a.mint) }),
          payer: noop(payer),
          authority: noop(owner),
        }),
      ),
    );
    t.like(del.metadata, { executive });
    registryAccount(del.echo.execution_delegate_record as string, TOOLS_PROGRAM_ID);
    await rejects(t, buildDelegateExecution(delegateInput, ctx), 'conflict');

    const rev = plan(await buildRevokeExecution(PrepareExecutiveInput.parse({ mint: a.mint, executive }), ctx));
    const record = findExecutionDelegateRecordV1Pda(officialUmi, { executiveProfile: publicKey(profile), agentAsset: publicKey(a.mint) })[0];
    assertSameInstructions(
      t,
      rev.instructions,
      official(
        revokeExecutionV1(officialUmi, {
          executionDelegateRecord: record,
          agentAsset: publicKey(a.mint),
          destination: publicKey(owner),
          payer: noop(owner),
          authority: noop(owner),
        }),
      ),
    );
    t.is(rev.echo.execution_delegate_record, record);
    for (const p of [reg, del, rev]) assertCatalogued(t, p);
  },
);

metaplexTest(
  test,
  'token/set: setAgentTokenV1 (authority = the asset signer) wrapped in Core execute signed by the owner; refused without an identity',
  async (t) => {
    const a = agentOn();
    const genesis = address();
    await rejects(t, buildTokenSet(PrepareTokenSetInput.parse({ mint: a.mint, genesis_account: genesis }), ctxOf(registry, a.record)), 'invalid_request');
    registryAccount(findAgentIdentityV1Pda(officialUmi, { asset: publicKey(a.mint) })[0], IDENTITY_PROGRAM_ID);
    const p = plan(await buildTokenSet(PrepareTokenSetInput.parse({ mint: a.mint, genesis_account: genesis }), ctxOf(registry, a.record)));
    t.is(p.instructions.length, 1);
    const e = assertExecute(t, p.instructions[0]!, { asset: a.mint, owner: a.record.owner, payer: a.record.owner });
    const [expected] = official(
      setAgentTokenV1(officialUmi, { asset: publicKey(a.mint), genesisAccount: publicKey(genesis), payer: noop(a.record.owner), authority: noop(a.treasury) }),
    );
    t.is(e.inner.programId.toBase58(), IDENTITY_PROGRAM_ID);
    t.deepEqual(Buffer.from(e.inner.data), Buffer.from(expected!.data));
    t.is(getSetAgentTokenV1InstructionDataSerializer().deserialize(e.inner.data)[0].discriminator, 1);
    t.deepEqual(
      e.inner.keys.map((k) => k.pubkey.toBase58()),
      expected!.keys.map((k) => k.pubkey.toBase58()),
      'execute carries every account of the inner instruction',
    );
    assertCatalogued(t, p);
  },
);

// ---------- delegation ----------

test('delegation: SPL Approve of the treasury token account to the executive through execute; pad_for_protocol_fee grosses up by ceil(amount × bps / 10000)', async (t) => {
  const a = agentOn();
  const executive = address();
  const ctx = ctxOf(plain, a.record);
  const account = associatedTokenAccount(a.treasury, USDC.mint, USDC.tokenProgramId);

  const padded = plan(
    await buildDelegation(PrepareDelegationInput.parse({ mint: a.mint, executive, stable_symbol: 'USDC', allowance: '12.5', pad_for_protocol_fee: true }), ctx),
  );
  t.is(padded.extras?.fee_padding_atoms, '125000');
  t.like(padded.metadata, { stable_symbol: 'USDC', allowance_atomic: '12625000', delegate: executive });
  // the treasury has no USDC account yet: an idempotent creation comes first, paid by the payer (the owner)
  t.is(padded.instructions.length, 2);
  t.is(padded.instructions[0]!.programId.toBase58(), ASSOCIATED_TOKEN_PROGRAM_ID.toBase58());
  t.is(padded.echo.will_create_token_account, true);
  const e = assertExecute(t, padded.instructions[1]!, { asset: a.mint, owner: a.record.owner, payer: a.record.owner });
  const approve = decodeApproveInstruction(e.inner, TOKEN_PROGRAM_ID);
  t.is(approve.keys.account.pubkey.toBase58(), account);
  t.is(approve.keys.delegate.pubkey.toBase58(), executive);
  t.is(approve.keys.owner.pubkey.toBase58(), a.treasury);
  t.is(approve.data.amount, 12_625_000n);
  assertCatalogued(t, padded);

  // ceil: one atom at 100 bps pads one atom (floor would give zero and the fee leg would run out)
  const tiny = plan(
    await buildDelegation(
      PrepareDelegationInput.parse({ mint: a.mint, executive, stable_symbol: 'USDC', allowance: '0.000001', pad_for_protocol_fee: true }),
      ctx,
    ),
  );
  t.is(tiny.extras?.fee_padding_atoms, '1');
  t.is(tiny.metadata.allowance_atomic, '2');
  for (const amount of [1n, 99n, 100n, 101n, 12_345_678n, 2n ** 63n]) t.is(feeFor(amount, 100), (amount * 100n + 9_999n) / 10_000n);

  const unpadded = plan(await buildDelegation(PrepareDelegationInput.parse({ mint: a.mint, executive, stable_symbol: 'USDC', allowance: '3' }), ctx));
  t.is(unpadded.metadata.allowance_atomic, '3000000');
  t.is(unpadded.extras?.fee_padding_atoms, undefined);

  await rejects(
    t,
    buildDelegation(PrepareDelegationInput.parse({ mint: a.mint, executive, stable_symbol: 'USDC', allowance: '1.0000001' }), ctx),
    'invalid_request',
  );
  await rejects(t, buildDelegation(PrepareDelegationInput.parse({ mint: a.mint, executive, stable_symbol: 'USDT', allowance: '1' }), ctx), 'invalid_request');
  t.false(PrepareDelegationInput.safeParse({ mint: a.mint, executive, stable_symbol: 'USDC', allowance: 12.5 }).success, 'money is never a JSON number');
});

test('delegation revoke: SPL Revoke through execute; a treasury without the token account is told so', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  await rejects(t, buildDelegationRevoke(PrepareDelegationRevokeInput.parse({ mint: a.mint, stable_symbol: 'USDC' }), ctx), 'invalid_request');
  plain.mintTo(a.treasury, USDC.mint, 1_000_000n);
  const p = plan(await buildDelegationRevoke(PrepareDelegationRevokeInput.parse({ mint: a.mint, stable_symbol: 'USDC' }), ctx));
  const e = assertExecute(t, p.instructions[0]!, { asset: a.mint, owner: a.record.owner, payer: a.record.owner });
  const revoke = decodeRevokeInstruction(e.inner, TOKEN_PROGRAM_ID);
  t.is(revoke.keys.account.pubkey.toBase58(), associatedTokenAccount(a.treasury, USDC.mint, USDC.tokenProgramId));
  t.is(revoke.keys.owner.pubkey.toBase58(), a.treasury);
  t.like(p.metadata, { stable_symbol: 'USDC', delegate: null, allowance_atomic: '0' });
  assertCatalogued(t, p);
  const executive = address();
  approveOnLedger(plain, a.treasury, { delegate: executive, allowance: 5n, balance: 1n });
  t.like(plan(await buildDelegationRevoke(PrepareDelegationRevokeInput.parse({ mint: a.mint, stable_symbol: 'USDC' }), ctx)).metadata, { delegate: executive });
});

// ---------- provision ----------

test('provision: idempotent creations of the missing curated stable accounts only; all present → no-op', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  const first = plan(await buildProvision(PrepareProvisionInput.parse({ mint: a.mint }), ctx));
  t.is(first.instructions.length, 1);
  const [create] = first.instructions;
  t.is(create!.programId.toBase58(), ASSOCIATED_TOKEN_PROGRAM_ID.toBase58());
  t.deepEqual(Buffer.from(create!.data), Buffer.from([1]), 'CreateIdempotent');
  t.deepEqual(
    create!.keys.slice(0, 4).map((k) => k.pubkey.toBase58()),
    [a.record.owner, associatedTokenAccount(a.treasury, USDC.mint, USDC.tokenProgramId), a.treasury, USDC.mint],
  );
  assertCatalogued(t, first);

  plain.mintTo(a.treasury, USDC.mint, 1n);
  const again = await buildProvision(PrepareProvisionInput.parse({ mint: a.mint }), ctx);
  t.true(isNoOp(again));
  t.is((again.echo.token_accounts as { exists: boolean }[])[0]!.exists, true, 'the no-op echo has the active shape');
});

test('provision on mainnet: USDC, USDT and USDG (Token-2022); a USDG entry naming spl is refused', async (t) => {
  const a = agentOn('chain-mainnet');
  const ctx = ctxOf(mainnet, a.record);
  const payer = address();
  const p = plan(await buildProvision(PrepareProvisionInput.parse({ mint: a.mint, payer }), ctx));
  t.is(p.feePayer, payer);
  t.deepEqual(
    p.instructions.map((ix) => ix.keys[5]!.pubkey.toBase58()),
    [TOKEN_PROGRAM_ID.toBase58(), TOKEN_PROGRAM_ID.toBase58(), TOKEN_2022_PROGRAM_ID.toBase58()],
  );
  const usdg = findStable('chain-mainnet', 'USDG')!;
  t.is(p.instructions[2]!.keys[1]!.pubkey.toBase58(), associatedTokenAccount(a.treasury, usdg.mint, usdg.tokenProgramId));
  await rejects(t, buildProvision(PrepareProvisionInput.parse({ mint: a.mint, mints: [{ mint: usdg.mint, token_program: 'spl' }] }), ctx), 'invalid_request');
  const only = plan(await buildProvision(PrepareProvisionInput.parse({ mint: a.mint, mints: [{ mint: usdg.mint }] }), ctx));
  t.is(only.instructions.length, 1, 'given mints replace the curated list; the stable’s own program is the default');
});

// ---------- withdraw ----------

test('withdraw: forbidden for anyone but the owner; TransferChecked from the treasury through execute; destination ATA created when missing', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  const destination = address();
  const payer = address();
  const body = { mint: a.mint, payer, authority: a.record.owner, spl_mint: USDC.mint, destination, amount: '2500000' };
  await rejects(t, buildWithdraw(PrepareWithdrawInput.parse({ ...body, authority: payer }), ctx), 'forbidden');
  await rejects(t, buildWithdraw(PrepareWithdrawInput.parse(body), ctx), 'invalid_request'); // no treasury token account yet
  plain.mintTo(a.treasury, USDC.mint, 5_000_000n);

  const p = plan(await buildWithdraw(PrepareWithdrawInput.parse(body), ctx));
  t.is(p.feePayer, payer);
  t.is(p.extras?.will_create_destination_ata, true);
  t.is(p.instructions.length, 2);
  const create = p.instructions[0]!;
  t.is(create.programId.toBase58(), ASSOCIATED_TOKEN_PROGRAM_ID.toBase58());
  t.is(create.keys[0]!.pubkey.toBase58(), payer, 'the payer pays the rent');
  const e = assertExecute(t, p.instructions[1]!, { asset: a.mint, owner: a.record.owner, payer });
  const transfer = decodeTransferCheckedInstruction(e.inner, TOKEN_PROGRAM_ID);
  t.is(transfer.keys.source.pubkey.toBase58(), associatedTokenAccount(a.treasury, USDC.mint, USDC.tokenProgramId));
  t.is(transfer.keys.destination.pubkey.toBase58(), associatedTokenAccount(destination, USDC.mint, USDC.tokenProgramId));
  t.is(transfer.keys.owner.pubkey.toBase58(), a.treasury);
  t.is(transfer.data.amount, 2_500_000n);
  t.is(transfer.data.decimals, 6, 'decimals read from the mint');
  t.like(p.metadata, { mint: USDC.mint, amount_atomic: '2500000', destination });
  assertCatalogued(t, p);

  await rejects(t, buildWithdraw(PrepareWithdrawInput.parse({ ...body, create_destination_ata_if_missing: false }), ctx), 'invalid_request');
  plain.mintTo(destination, USDC.mint, 1n);
  const existing = plan(await buildWithdraw(PrepareWithdrawInput.parse({ ...body, create_destination_ata_if_missing: false }), ctx));
  t.is(existing.extras?.will_create_destination_ata, false);
  t.is(existing.instructions.length, 1);
  await rejects(t, buildWithdraw(PrepareWithdrawInput.parse({ ...body, decimals: 9 }), ctx), 'invalid_request');
  const over = await rejects(t, buildWithdraw(PrepareWithdrawInput.parse({ ...body, amount: '5000001' }), ctx), 'invalid_request', {
    balance_atomic: '5000000',
  });
  t.true(over.message.includes('5000000'));
  await rejects(t, buildWithdraw(PrepareWithdrawInput.parse({ ...body, spl_mint: address() }), ctx), 'invalid_request');
  t.false(PrepareWithdrawInput.safeParse({ ...body, amount: '0' }).success);
  t.false(PrepareWithdrawInput.safeParse({ ...body, amount: '18446744073709551616' }).success, 'beyond u64');
});

test('withdraw of USDG (Token-2022) on mainnet: its program is inferred, a wrong token_program is refused', async (t) => {
  const a = agentOn('chain-mainnet');
  const ctx = ctxOf(mainnet, a.record);
  const usdg = findStable('chain-mainnet', 'USDG')!;
  mainnet.mintTo(a.treasury, usdg.mint, 3_000_000n);
  const body = { mint: a.mint, payer: a.record.owner, authority: a.record.owner, spl_mint: usdg.mint, destination: address(), amount: '1000000' };
  await rejects(t, buildWithdraw(PrepareWithdrawInput.parse({ ...body, token_program: 'spl' }), ctx), 'invalid_request');
  const p = plan(await buildWithdraw(PrepareWithdrawInput.parse(body), ctx));
  t.is(p.instructions[0]!.keys[5]!.pubkey.toBase58(), TOKEN_2022_PROGRAM_ID.toBase58(), 'the destination account is a Token-2022 account');
  const transfer = decodeTransferCheckedInstruction(decodeExecute(p.instructions[1]!).inner, TOKEN_2022_PROGRAM_ID);
  t.is(transfer.keys.source.pubkey.toBase58(), associatedTokenAccount(a.treasury, usdg.mint, usdg.tokenProgramId));
  t.is(transfer.data.amount, 1_000_000n);
});

test('withdraw-all: the whole treasury balance; zero → no-op', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  const body = { mint: a.mint, payer: a.record.owner, authority: a.record.owner, spl_mint: USDC.mint, destination: address() };
  const none = await buildWithdrawAll(PrepareWithdrawAllInput.parse(body), ctx);
  t.true(isNoOp(none));
  t.is(none.kind, 'agent.treasury.withdraw');
  t.is(none.echo.amount_atomic, '0');
  plain.mintTo(a.treasury, USDC.mint, 7_654_321n);
  const p = plan(await buildWithdrawAll(PrepareWithdrawAllInput.parse(body), ctx));
  const transfer = decodeTransferCheckedInstruction(decodeExecute(p.instructions.at(-1)!).inner, TOKEN_PROGRAM_ID);
  t.is(transfer.data.amount, 7_654_321n);
  t.is(p.metadata.amount_atomic, '7654321');
  await rejects(t, buildWithdrawAll(PrepareWithdrawAllInput.parse({ ...body, authority: address() }), ctx), 'forbidden');
});

test('withdraw-sol: System transfer from the treasury through execute; more than the spendable balance is refused naming it', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  const destination = address();
  plain.airdrop(a.treasury, 2_000_000_000n);
  const body = { mint: a.mint, payer: a.record.owner, authority: a.record.owner, destination };
  const spendable = 2_000_000_000n - RENT_EXEMPT_EMPTY_ACCOUNT_LAMPORTS;
  const e = await rejects(t, buildWithdrawSol(PrepareWithdrawSolInput.parse({ ...body, lamports: (spendable + 1n).toString() }), ctx), 'invalid_request', {
    spendable_lamports: spendable.toString(),
  });
  t.true(e.message.includes(spendable.toString()));
  await rejects(t, buildWithdrawSol(PrepareWithdrawSolInput.parse({ ...body, lamports: '1', authority: destination }), ctx), 'forbidden');

  const p = plan(await buildWithdrawSol(PrepareWithdrawSolInput.parse({ ...body, lamports: spendable.toString() }), ctx));
  const x = assertExecute(t, p.instructions[0]!, { asset: a.mint, owner: a.record.owner, payer: a.record.owner });
  t.is(SystemInstruction.decodeInstructionType(x.inner), 'Transfer');
  const transfer = SystemInstruction.decodeTransfer(x.inner);
  t.is(transfer.fromPubkey.toBase58(), a.treasury);
  t.is(transfer.toPubkey.toBase58(), destination);
  t.is(transfer.lamports, spendable);
  t.like(p.metadata, { lamports: spendable.toString(), destination });
  assertCatalogued(t, p);
  t.false(PrepareWithdrawSolInput.safeParse({ ...body, lamports: 1000 }).success, 'lamports are a decimal string');
});

test('withdraw-sol-all: everything above the reserve (default 1,000,000); at or below it → no-op', async (t) => {
  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  const body = { mint: a.mint, payer: a.record.owner, authority: a.record.owner, destination: address() };
  t.true(isNoOp(await buildWithdrawSolAll(PrepareWithdrawSolAllInput.parse(body), ctx)), 'an empty treasury');
  plain.airdrop(a.treasury, 1_000_000n);
  const atReserve = await buildWithdrawSolAll(PrepareWithdrawSolAllInput.parse(body), ctx);
  t.true(isNoOp(atReserve));
  t.is(atReserve.kind, 'agent.treasury.withdraw_sol');
  plain.airdrop(a.treasury, 3_000_000n);
  const p = plan(await buildWithdrawSolAll(PrepareWithdrawSolAllInput.parse(body), ctx));
  t.is(SystemInstruction.decodeTransfer(decodeExecute(p.instructions[0]!).inner).lamports, 3_000_000n);
  const drain = plan(await buildWithdrawSolAll(PrepareWithdrawSolAllInput.parse({ ...body, reserve_lamports: '0' }), ctx));
  t.is(drain.metadata.lamports, '4000000');
  await rejects(t, buildWithdrawSolAll(PrepareWithdrawSolAllInput.parse({ ...body, reserve_lamports: '5000' }), ctx), 'invalid_request');
});

// ---------- buyer payment ----------

test('buyer/payment: the §2.3 settlement layout from the buyer treasury, the executive signing as delegate', async (t) => {
  const buyer = agentOn();
  const seller = agentOn();
  const executive = address();
  const ctx = ctxOf(plain, buyer.record);
  const input = PrepareBuyerPaymentInput.parse({ pay_to: seller.treasury, amount: '0.25', currency: 'USDC', buyer_agent: buyer.mint, executive });
  const offer = directOffer(input, ctx);
  t.is(offer.amount, 250_000n);
  // never a transaction that must fail: no account, another delegate, an allowance or a balance below the gross
  await rejects(t, buildBuyerPayment(input, offer, ctx), 'invalid_request');
  approveOnLedger(plain, buyer.treasury, { delegate: address(), allowance: 1_000_000n, balance: 1_000_000n });
  t.like((await rejects(t, buildBuyerPayment(input, offer, ctx), 'invalid_request')).details, { issues: [{ code: 'not_delegate' }] });
  approveOnLedger(plain, buyer.treasury, { delegate: executive, allowance: 252_499n, balance: 1n });
  t.like((await rejects(t, buildBuyerPayment(input, offer, ctx), 'insufficient_allowance')).details, { gross_atomic: '252500', allowance_atomic: '252499' });
  const poor = agentOn();
  approveOnLedger(plain, poor.treasury, { delegate: executive, allowance: 1_000_000n, balance: 252_499n });
  const poorInput = { ...input, buyer_agent: poor.mint };
  t.like((await rejects(t, buildBuyerPayment(poorInput, offer, ctxOf(plain, poor.record)), 'invalid_request')).details, { balance_atomic: '252499' });
  approveOnLedger(plain, buyer.treasury, { delegate: executive, allowance: 252_500n, balance: 1n }); // exactly the gross: enough
  const p = plan(await buildBuyerPayment(input, { ...offer, memo: 'order-7' }, ctx));
  t.is(p.feePayer, executive, 'the executive pays when no payer is given');
  const ix = p.instructions;
  t.is(ix.length, 7);
  t.is(ComputeBudgetInstruction.decodeInstructionType(ix[0]!), 'SetComputeUnitLimit');
  t.is(ComputeBudgetInstruction.decodeInstructionType(ix[1]!), 'SetComputeUnitPrice');
  const sellerAccount = associatedTokenAccount(seller.treasury, USDC.mint, USDC.tokenProgramId);
  const feeAccount = associatedTokenAccount(FEE_AUTHORITY, USDC.mint, USDC.tokenProgramId);
  t.deepEqual(
    [ix[2]!, ix[3]!].map((c) => [c.programId.toBase58(), c.keys[1]!.pubkey.toBase58()]),
    [
      [ASSOCIATED_TOKEN_PROGRAM_ID.toBase58(), sellerAccount],
      [ASSOCIATED_TOKEN_PROGRAM_ID.toBase58(), feeAccount],
    ],
  );
  const source = associatedTokenAccount(buyer.treasury, USDC.mint, USDC.tokenProgramId);
  const sellerLeg = decodeTransferCheckedInstruction(ix[4]!, TOKEN_PROGRAM_ID);
  const feeLeg = decodeTransferCheckedInstruction(ix[5]!, TOKEN_PROGRAM_ID);
  for (const leg of [sellerLeg, feeLeg]) {
    t.is(leg.keys.source.pubkey.toBase58(), source, 'debits the buyer treasury token account');
    t.is(leg.keys.owner.pubkey.toBase58(), executive, 'the delegate signs');
    t.true(leg.keys.owner.isSigner);
  }
  t.is(sellerLeg.keys.destination.pubkey.toBase58(), sellerAccount);
  t.is(sellerLeg.data.amount, 250_000n);
  t.is(feeLeg.keys.destination.pubkey.toBase58(), feeAccount);
  t.is(feeLeg.data.amount, 2_500n);
  t.is(ix[6]!.programId.toBase58(), MEMO_PROGRAM_ID);
  t.is(Buffer.from(ix[6]!.data).toString('utf8'), 'order-7');
  t.like(p.metadata, { pay_to: seller.treasury, amount_atomic: '250000', currency: 'USDC' });
  t.like(p.echo, { gross_atomic: '252500', fee_atomic: '2500' });
  assertCatalogued(t, p);

  const free = plan(await buildBuyerPayment(input, directOffer(input, ctxOf(plain, buyer.record, { fee: { ...ctx.fee, bps: 0 } })), ctx));
  t.is(free.instructions.length, 5, 'no fee leg and no fee vault creation when the fee is off');
  const payer = address();
  t.is(plan(await buildBuyerPayment({ ...input, payer }, offer, ctx)).feePayer, payer);
  t.throws(() => directOffer({ ...input, currency: 'USDT' }, ctx), { instanceOf: DomainError, message: /USDT is not available on chain-devnet/ });
  t.throws(() => directOffer({ ...input, amount: '0.0000001' }, ctx), { instanceOf: DomainError, message: /at most 6 decimal places/ });
  t.false(PrepareBuyerPaymentInput.safeParse({ buyer_agent: buyer.mint, executive }).success, 'a link or (pay_to, amount, currency)');
  t.false(PrepareBuyerPaymentInput.safeParse({ ...input, payment_link: 'x' }).success, 'not both');
  t.true(PrepareBuyerPaymentInput.safeParse({ payment_link: 'weather', buyer_agent: buyer.mint, executive }).success);
});

// ---------- the table ----------

test('PREPARE_ROUTES: the 14 routes, each path once, every prepared kind covered, buyerPayment marked', (t) => {
  const routes = Object.entries(PREPARE_ROUTES);
  t.is(routes.length, 14);
  t.is(new Set(routes.map(([, r]) => r.path)).size, 14);
  t.deepEqual(new Set(routes.map(([, r]) => r.kind)), new Set(PREPARED_KIND_NAMES));
  t.is(PREPARE_ROUTES.buyerPayment.context, 'buyer');
  t.is(PREPARE_ROUTES.agentCreate.context, 'network');
  for (const [name, r] of routes) {
    if (r.path.includes('{mint}')) t.is(r.context, 'agent', name);
    t.true(r.path.startsWith('/v1/') && r.path.endsWith('/prepare'), name);
  }
});

// ---------- executed on the ledger running Metaplex Core ----------

metaplexTest(test, 'on Metaplex Core: the minted asset, a funded treasury, a delegation, a token withdrawal and a SOL withdrawal all execute', async (t) => {
  const owner = Keypair.generate();
  plain.airdrop(owner.publicKey.toBase58(), 10_000_000_000n);
  const base = agentOn();
  const created = plan(
    await buildCreateAgent(
      PrepareAgentInput.parse({ owner: owner.publicKey.toBase58(), name: 'Runner', uri: 'https://example.com/r.json' }),
      ctxOf(plain, base.record),
    ),
  );
  const sent = await run(plain, created, [owner]);
  t.true(sent.ok, JSON.stringify(sent));
  const mint = created.agent;
  const asset = await plain.getAccount(mint);
  t.is(asset?.owner, MPL_CORE_PROGRAM_ID);

  const a: Agent = { ...agentOn('chain-devnet', mint), owner };
  a.record.owner = owner.publicKey.toBase58();
  const ctx = ctxOf(plain, a.record);
  const o = a.record.owner;

  const prov = plan(await buildProvision(PrepareProvisionInput.parse({ mint }), ctx));
  t.true((await run(plain, prov, [owner])).ok);
  t.true(isNoOp(await buildProvision(PrepareProvisionInput.parse({ mint }), ctx)), 'provisioned');
  plain.mintTo(a.treasury, USDC.mint, 10_000_000n);
  plain.airdrop(a.treasury, 1_000_000_000n);

  const executive = Keypair.generate();
  const del = plan(
    await buildDelegation(
      PrepareDelegationInput.parse({ mint, executive: executive.publicKey.toBase58(), stable_symbol: 'USDC', allowance: '1', pad_for_protocol_fee: true }),
      ctx,
    ),
  );
  const delSent = await run(plain, del, [owner]);
  t.true(delSent.ok, JSON.stringify(delSent));
  const tokenAccount = await plain.getAccount(associatedTokenAccount(a.treasury, USDC.mint, USDC.tokenProgramId));
  const decoded = AccountLayout.decode(tokenAccount!.data);
  t.is(new PublicKey(decoded.delegate).toBase58(), executive.publicKey.toBase58());
  t.is(decoded.delegatedAmount, 1_010_000n);

  // the executive pays a seller from the treasury as delegate
  plain.airdrop(executive.publicKey.toBase58(), 1_000_000_000n);
  const seller = agentOn();
  const buyInput = PrepareBuyerPaymentInput.parse({
    pay_to: seller.treasury,
    amount: '1',
    currency: 'USDC',
    buyer_agent: mint,
    executive: executive.publicKey.toBase58(),
  });
  const pay = plan(await buildBuyerPayment(buyInput, directOffer(buyInput, ctx), ctx));
  const paySent = await run(plain, pay, [executive]);
  t.true(paySent.ok, JSON.stringify(paySent));
  t.is((await plain.getTokenBalances(seller.treasury))[0]?.amount, 1_000_000n);

  const wallet = address();
  const wd = plan(
    await buildWithdraw(PrepareWithdrawInput.parse({ mint, payer: o, authority: o, spl_mint: USDC.mint, destination: wallet, amount: '4000000' }), ctx),
  );
  const wdSent = await run(plain, wd, [owner]);
  t.true(wdSent.ok, JSON.stringify(wdSent));
  t.is((await plain.getTokenBalances(wallet))[0]?.amount, 4_000_000n);
  t.is((await plain.getTokenBalances(a.treasury))[0]?.amount, 10_000_000n - 1_010_000n - 4_000_000n);

  const rev = plan(await buildDelegationRevoke(PrepareDelegationRevokeInput.parse({ mint, stable_symbol: 'USDC' }), ctx));
  t.true((await run(plain, rev, [owner])).ok);
  const after = AccountLayout.decode((await plain.getAccount(associatedTokenAccount(a.treasury, USDC.mint, USDC.tokenProgramId)))!.data);
  t.is(after.delegateOption, 0, 'no delegate after the revoke');

  const sol = plan(await buildWithdrawSolAll(PrepareWithdrawSolAllInput.parse({ mint, payer: o, authority: o, destination: wallet }), ctx));
  const solSent = await run(plain, sol, [owner]);
  t.true(solSent.ok, JSON.stringify(solSent));
  t.is(await plain.getBalance(a.treasury), 1_000_000n, 'the reserve stays');
  t.is(await plain.getBalance(wallet), 999_000_000n, 'the wallet got everything above the reserve');

  const rest = await buildWithdrawAll(PrepareWithdrawAllInput.parse({ mint, payer: o, authority: o, spl_mint: USDC.mint, destination: wallet }), ctx);
  t.true((await run(plain, plan(rest), [owner])).ok);
  t.true(
    isNoOp(await buildWithdrawAll(PrepareWithdrawAllInput.parse({ mint, payer: o, authority: o, spl_mint: USDC.mint, destination: wallet }), ctx)),
    'drained',
  );
});

metaplexTest(
  test,
  'on Metaplex Core: agents/prepare with a separate payer mints an asset owned and updated by the owner, signed by the payer alone',
  async (t) => {
    const payer = Keypair.generate();
    plain.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
    const owner = address();
    const p = plan(
      await buildCreateAgent(
        PrepareAgentInput.parse({ owner, payer: payer.publicKey.toBase58(), name: 'Paid for', uri: 'https://example.com/p.json' }),
        ctxOf(plain, agentOn().record),
      ),
    );
    const sent = await run(plain, p, [payer]);
    t.true(sent.ok, JSON.stringify(sent));
    const account = (await plain.getAccount(p.agent))!;
    const asset = deserializeAssetV1({
      publicKey: publicKey(p.agent),
      data: account.data,
      executable: account.executable,
      owner: publicKey(account.owner),
      lamports: { basisPoints: account.lamports, identifier: 'SOL', decimals: 9 },
    });
    t.is(asset.owner, publicKey(owner));
    t.deepEqual(asset.updateAuthority, { type: 'Address', address: publicKey(owner) });
    t.like(asset, { name: 'Paid for', uri: 'https://example.com/p.json' });
  },
);

metaplexTest(
  test,
  'on Metaplex Core: an agent asset in a collection (minted elsewhere) — Execute names the collection, read from the ledger, and runs; the ledger’s owner must authorise',
  async (t) => {
    const owner = Keypair.generate();
    const o = owner.publicKey.toBase58();
    plain.airdrop(o, 1_000_000_000n);
    const collection = Keypair.generate();
    const asset = Keypair.generate();
    // minted with the official client directly, as another tool would
    const mintIxs = official(
      createCollectionV1(officialUmi, {
        collection: noop(collection.publicKey.toBase58()),
        payer: noop(o),
        updateAuthority: publicKey(o),
        name: 'Fleet',
        uri: 'https://example.com/c.json',
      }),
    ).concat(
      official(
        createV1(officialUmi, {
          asset: noop(asset.publicKey.toBase58()),
          collection: publicKey(collection.publicKey.toBase58()),
          authority: noop(o),
          payer: noop(o),
          owner: publicKey(o),
          name: 'In fleet',
          uri: 'https://example.com/f.json',
        }),
      ),
    );
    const mint = asset.publicKey.toBase58();
    const minted = await run(plain, { kind: 'agent.create', agent: mint, feePayer: o, instructions: mintIxs, echo: {}, metadata: {} }, [
      owner,
      collection,
      asset,
    ]);
    t.true(minted.ok, JSON.stringify(minted));
    plain.airdrop(treasuryOf(mint), 500_000_000n);

    const a = agentOn('chain-devnet', mint);
    a.record.owner = o;
    const ctx = ctxOf(plain, a.record);
    const destination = address();
    const body = PrepareWithdrawSolInput.parse({ mint, payer: o, authority: o, destination, lamports: '100000000' });
    const p = plan(await buildWithdrawSol(body, ctx));
    t.is(decodeExecute(p.instructions[0]!).collection, collection.publicKey.toBase58(), 'Execute names the collection');

    // without it Core refuses the Execute: the read is what makes the transaction land
    const bare = { ...p, instructions: executeInstructions({ asset: mint, authority: o, payer: o, inner: [decodeExecute(p.instructions[0]!).inner] }) };
    const refused = await run(plain, bare, [owner]);
    t.false(refused.ok, 'an Execute without the collection fails on Core');
    if (!refused.ok)
      t.true(
        refused.logs.some((l) => /collection/i.test(l)),
        refused.logs.join('\n'),
      );
    const sent = await run(plain, p, [owner]);
    t.true(sent.ok, JSON.stringify(sent));
    t.is(await plain.getBalance(destination), 100_000_000n);

    // a record that lags the ledger (the asset changed hands): the ledger's owner decides, before anything is built
    const stale = agentOn('chain-devnet', mint);
    await rejects(
      t,
      buildWithdrawSol(PrepareWithdrawSolInput.parse({ ...body, payer: stale.record.owner, authority: stale.record.owner }), ctxOf(plain, stale.record)),
      'forbidden',
      {
        owner: o,
      },
    );
  },
);

metaplexTest(test, 'executive delegate / revoke: a recorded owner who no longer owns the asset on the ledger is forbidden', async (t) => {
  const holder = Keypair.generate();
  const h = holder.publicKey.toBase58();
  registry.airdrop(h, 1_000_000_000n);
  const asset = Keypair.generate();
  const mint = asset.publicKey.toBase58();
  const ixs = official(createV1(officialUmi, { asset: noop(mint), payer: noop(h), owner: publicKey(h), name: 'Moved', uri: 'https://example.com/m.json' }));
  t.true((await run(registry, { kind: 'agent.create', agent: mint, feePayer: h, instructions: ixs, echo: {}, metadata: {} }, [holder, asset])).ok);
  const stale = agentOn('chain-devnet', mint); // recorded with another owner
  const input = PrepareExecutiveInput.parse({ mint, executive: address() });
  await rejects(t, buildDelegateExecution(input, ctxOf(registry, stale.record)), 'forbidden', { owner: h });
  await rejects(t, buildRevokeExecution(input, ctxOf(registry, stale.record)), 'forbidden', { owner: h });
});

test('amounts: text that is not digits is a schema failure, not a thrown BigInt error; a padded allowance above u64 is refused, never wrapped', async (t) => {
  for (const text of ['abc', 'x1', '1e3', '-5', '']) {
    t.false(PositiveAtomic.safeParse(text).success, text);
    t.false(Atomic.safeParse(text).success, text);
  }
  t.true(PositiveAtomic.safeParse('5').success);
  t.false(PositiveAtomic.safeParse('0').success);
  t.false(Atomic.safeParse('18446744073709551616').success, 'u64 + 1');

  const a = agentOn();
  const ctx = ctxOf(plain, a.record);
  // 18,446,744,073,709.551615 USDC is u64::MAX atomic units: fits alone, not with its fee padding.
  const input = { mint: a.mint, executive: address(), stable_symbol: 'USDC', allowance: '18446744073709.551615' };
  const error = await t.throwsAsync(buildDelegation(PrepareDelegationInput.parse({ ...input, pad_for_protocol_fee: true }), ctx), { instanceOf: DomainError });
  t.is(error!.code, 'invalid_request');
  t.is((error!.details as { issues: { path: string }[] }).issues[0]!.path, 'allowance');
  const unpadded = plan(await buildDelegation(PrepareDelegationInput.parse(input), ctx));
  t.is(unpadded.metadata.allowance_atomic, '18446744073709551615');
});
