import { ChainReport, ListReceiptsInput, receiptOf, StoredReceiptOutput, PushReceiptResult } from '../../../domain/receipts/schema.ts';
import { PullFormat, PullTarget } from '../../../domain/receipts/pull-targets.ts';
import { graphqlEnum, NetworkEnum, networkOf, VerificationStatusEnum } from '../enums.ts';
import { builder } from '../builder.ts';
import { fromZod, procedure } from '../describe.ts';
import { given, pageRef } from './common.ts';

// hosted-api §4.7 through the same procedures as REST (ctx.api). A receipt is a hashed document: it
// travels as JSON exactly as stored (its snake_case keys are what receipt_hash covers), with the index fields beside it.

const ReceiptKindEnum = graphqlEnum('ReceiptKind', ListReceiptsInput.shape.kind.unwrap());
const ReceiptDecisionEnum = graphqlEnum('ReceiptDecision', ListReceiptsInput.shape.decision.unwrap());
const ReceiptSourceEnum = graphqlEnum('ReceiptSource', StoredReceiptOutput.options[0].shape.source);
const ChainProblemEnum = graphqlEnum('ReceiptChainProblem', ChainReport.shape.first_break.unwrap().shape.problem);
const PullFormatEnum = graphqlEnum('PullFormat', PullFormat);
const PullStatusEnum = graphqlEnum('PullStatus', PullTarget.shape.last_status.unwrap());

const VerificationRef = builder.objectRef<StoredReceiptOutput['verification']>('ReceiptVerification').implement({
  extensions: fromZod(PushReceiptResult.shape.verification),
  description: 'The check of the receipt against its network’s ledger: VERIFIED, MISMATCH, PENDING or NOT_APPLICABLE.',
  fields: (t) => ({
    status: t.expose('status', { type: VerificationStatusEnum }),
    reason: t.exposeString('reason', { nullable: true }),
    checkedAt: t.exposeString('checked_at', { nullable: true }),
  }),
});

export const ReceiptRef = builder.objectRef<StoredReceiptOutput>('Receipt').implement({
  extensions: fromZod(StoredReceiptOutput.options[0]),
  description: 'A receipt on its agent’s hash chain (ReceiptV1 or v0.2), with its ledger check.',
  fields: (t) => ({
    receiptHash: t.exposeString('receipt_hash'),
    agent: t.exposeString('agent'),
    nonce: t.exposeInt('nonce'),
    kind: t.expose('kind', { type: ReceiptKindEnum }),
    decision: t.expose('decision', { type: ReceiptDecisionEnum }),
    txSig: t.string({ nullable: true, resolve: (r) => r.tx_sig ?? null }),
    network: t.field({ type: NetworkEnum, resolve: (r) => networkOf(r.network) }),
    source: t.expose('source', { type: ReceiptSourceEnum }),
    receivedAt: t.exposeString('received_at'),
    verification: t.expose('verification', { type: VerificationRef }),
    receipt: t.field({ type: 'JSON', description: 'The receipt document as pushed, snake_case (what receiptHash covers).', resolve: (r) => receiptOf(r) }),
  }),
});

const ReceiptPageRef = pageRef('ReceiptPage', ReceiptRef);

const PushResultRef = builder.objectRef<PushReceiptResult>('PushReceiptResult').implement({
  extensions: fromZod(PushReceiptResult),
  fields: (t) => ({
    ok: t.exposeBoolean('ok'),
    duplicate: t.exposeBoolean('duplicate'),
    eventId: t.exposeString('event_id', { nullable: true }),
    receiptHash: t.exposeString('receipt_hash'),
    nonce: t.exposeInt('nonce'),
    verification: t.expose('verification', { type: VerificationRef }),
  }),
});

const ChainBreakRef = builder.objectRef<NonNullable<ChainReport['first_break']>>('ReceiptChainBreak').implement({
  extensions: fromZod(ChainReport.shape.first_break),
  fields: (t) => ({
    nonce: t.exposeInt('nonce'),
    receiptHash: t.exposeString('receipt_hash'),
    problem: t.expose('problem', { type: ChainProblemEnum }),
    message: t.exposeString('message'),
  }),
});

const ChainReportRef = builder.objectRef<ChainReport>('ReceiptChainReport').implement({
  extensions: fromZod(ChainReport),
  fields: (t) => ({
    agent: t.exposeString('agent'),
    network: t.field({ type: NetworkEnum, resolve: (r) => networkOf(r.network) }),
    length: t.exposeInt('length'),
    ok: t.exposeBoolean('ok'),
    headNonce: t.int({ nullable: true, description: 'the latest receipt’s nonce; null for an empty chain', resolve: (r) => r.head?.nonce ?? null }),
    headReceiptHash: t.string({
      nullable: true,
      description: 'the latest receipt’s hash; null for an empty chain',
      resolve: (r) => r.head?.receipt_hash ?? null,
    }),
    firstBreak: t.expose('first_break', { type: ChainBreakRef, nullable: true }),
  }),
});

const PullTargetRef = builder.objectRef<PullTarget>('PullTarget').implement({
  extensions: fromZod(PullTarget),
  description: 'A URL the pull worker fetches for an agent’s receipts (hosted-api §2.9).',
  fields: (t) => ({
    id: t.exposeID('id'),
    network: t.field({ type: NetworkEnum, resolve: (r) => networkOf(r.network) }),
    agent: t.exposeString('agent'),
    url: t.exposeString('url'),
    format: t.expose('format', { type: PullFormatEnum }),
    intervalSeconds: t.exposeInt('interval_seconds'),
    nextRunAt: t.exposeString('next_run_at'),
    lastRunAt: t.exposeString('last_run_at', { nullable: true }),
    lastStatus: t.expose('last_status', { type: PullStatusEnum, nullable: true }),
    lastError: t.exposeString('last_error', { nullable: true }),
    consecutiveFailures: t.exposeInt('consecutive_failures'),
    acceptedTotal: t.exposeInt('accepted_total'),
    rejectedTotal: t.exposeInt('rejected_total'),
    createdAt: t.exposeString('created_at'),
  }),
});

builder.queryFields((t) => ({
  receipts: t.field({
    extensions: procedure('receipts.list'),
    type: ReceiptPageRef,
    nullable: true,
    description: 'An agent’s receipts, nonce descending; `after` is the nextCursor of the previous page.',
    args: {
      agent: t.arg.string({ required: true }),
      kind: t.arg({ type: ReceiptKindEnum }),
      decision: t.arg({ type: ReceiptDecisionEnum }),
      since: t.arg.string(),
      after: t.arg.string(),
      first: t.arg.int(),
    },
    // The procedure parses the arguments with ListReceiptsInput (zod).
    resolve: (_root, a, ctx) =>
      ctx.api.receipts.list({
        agent: a.agent,
        kind: given(a.kind),
        decision: given(a.decision),
        since: given(a.since),
        cursor: given(a.after),
        limit: given(a.first),
      }),
  }),
  receipt: t.field({
    extensions: procedure('receipts.byHash'),
    type: ReceiptRef,
    nullable: true,
    args: { hash: t.arg.string({ required: true }) },
    resolve: (_root, { hash }, ctx) => ctx.api.receipts.byHash({ hash }),
  }),
  receiptChain: t.field({
    extensions: procedure('receipts.verifyChain'),
    type: ChainReportRef,
    nullable: true,
    description: 'Walks the agent’s stored chain and reports the first break.',
    args: { agent: t.arg.string({ required: true }) },
    resolve: (_root, { agent }, ctx) => ctx.api.receipts.verifyChain({ agent }),
  }),
  pullTargets: t.field({
    extensions: procedure('receipts.listPullTargets'),
    type: [PullTargetRef],
    nullable: true,
    args: { mint: t.arg.string({ required: true }) },
    resolve: async (_root, { mint }, ctx) => (await ctx.api.receipts.listPullTargets({ mint })).data,
  }),
}));

builder.mutationFields((t) => ({
  pushReceipt: t.field({
    extensions: procedure('receipts.push'),
    type: PushResultRef,
    nullable: true,
    description: 'Pushes a receipt (ReceiptV1 or v0.2, as JSON) onto the chain of `agent`.',
    args: { agent: t.arg.string({ required: true }), receipt: t.arg({ type: 'JSON', required: true }) },
    resolve: (_root, { agent, receipt }, ctx) =>
      ctx.api.receipts.push({ ...(typeof receipt === 'object' && receipt !== null && !Array.isArray(receipt) ? receipt : { receipt }), agent_mint: agent }),
  }),
  createPullTarget: t.field({
    extensions: procedure('receipts.createPullTarget'),
    type: PullTargetRef,
    nullable: true,
    args: {
      mint: t.arg.string({ required: true }),
      url: t.arg.string({ required: true }),
      format: t.arg({ type: PullFormatEnum }),
      intervalSeconds: t.arg.int(),
    },
    resolve: (_root, a, ctx) =>
      ctx.api.receipts.createPullTarget({
        mint: a.mint,
        url: a.url,
        ...(a.format ? { format: a.format } : {}),
        ...(a.intervalSeconds !== null && a.intervalSeconds !== undefined ? { interval_seconds: a.intervalSeconds } : {}),
      }),
  }),
  deletePullTarget: t.boolean({
    extensions: procedure('receipts.deletePullTarget'),
    args: { mint: t.arg.string({ required: true }), id: t.arg.id({ required: true }) },
    resolve: async (_root, { mint, id }, ctx) => {
      await ctx.api.receipts.deletePullTarget({ mint, id: String(id) });
      return true;
    },
  }),
}));
