import { Connection, type Keypair, Transaction } from '@solana/web3.js';
import { TRPCClientError } from '@trpc/client';
import type { z } from 'zod';
import type { PreparedEnvelope } from '../../domain/transactions/schema.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import { createClient, type Client } from '../client/index.ts';
import { parseSecret, readConfigFile, secretOf, writeConfigFile, type AgentConfigFile, type ToolEnv } from './config.ts';

// What every tool runs with: the environment, the configuration file (agent, executive key, pending registration), the
// typed API client, and prepare → sign locally → /v1/submit → track. The executive key never leaves this process.

/** A tool failure with a snake_case code the host can branch on (fee-facilitator-mpp-tools §7 names no_agent, …). */
export class ToolError extends Error {
  override readonly name = 'ToolError';
  constructor(
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | null = null,
  ) {
    super(message);
  }
}

/** An API failure as a ToolError with the API's own code and details. */
export function toToolError(err: unknown): ToolError {
  if (err instanceof ToolError) return err;
  if (err instanceof TRPCClientError) {
    const data = err.data as { code?: unknown; details?: unknown } | undefined;
    const code = typeof data?.code === 'string' ? data.code : 'api_error';
    const details = data?.details && typeof data.details === 'object' ? (data.details as Record<string, unknown>) : null;
    return new ToolError(code, err.message, details);
  }
  return new ToolError('internal_error', err instanceof Error ? err.message : String(err));
}

export interface ActiveAgent {
  mint: string;
  treasury: string;
  executive: Keypair;
}

export interface ToolContextOptions {
  fetch?: typeof fetch;
  /** how long a submitted transaction may take to confirm (default 60 s) */
  confirmTimeoutMs?: number;
  /** how long one HTTP request of a tool may take (default 60 s: a paid call waits for its settlement) */
  requestTimeoutMs?: number;
  /** how long step 2 of svc_register_agent waits for the minted asset on the node (§4.4: 20 s) */
  assetTimeoutMs?: number;
}

export class ToolContext {
  private file: AgentConfigFile | null = null;
  private clientInstance: Client | undefined;
  private publicClientInstance: Client | undefined;
  readonly fetch: typeof fetch;
  readonly confirmTimeoutMs: number;
  readonly assetTimeoutMs: number;

  constructor(
    readonly env: ToolEnv,
    options: ToolContextOptions = {},
  ) {
    const base = options.fetch ?? globalThis.fetch;
    const timeoutMs = options.requestTimeoutMs ?? 60_000;
    // no call of a tool waits on a silent peer forever: every request without its own signal gets a timeout
    this.fetch = ((input: RequestInfo | URL, init?: RequestInit) =>
      base(input, init?.signal ? init : { ...init, signal: AbortSignal.timeout(timeoutMs) })) as typeof fetch;
    this.confirmTimeoutMs = options.confirmTimeoutMs ?? 60_000;
    this.assetTimeoutMs = options.assetTimeoutMs ?? 20_000;
  }

  async load(): Promise<void> {
    this.file = await readConfigFile(this.env.configPath);
  }

  get config(): AgentConfigFile | null {
    return this.file;
  }

  get network() {
    return this.env.network;
  }

  get rpcUrl(): string {
    return this.file?.rpc_url ?? this.env.rpcUrl;
  }

  connection(): Connection {
    return new Connection(this.rpcUrl, 'confirmed');
  }

  /**
   * The hosted API's typed client with SVC_API_KEY (its prefix is the network). Without a key, a tool that needs it
   * answers `api_key_required`; the public reads (fee-facilitator-mpp-tools §4.3, §5: svc_discover) use `publicApi`.
   */
  get api(): Client {
    if (!this.env.apiKey) {
      throw new ToolError(
        'api_key_required',
        'This tool calls the hosted API with a key: set SVC_API_KEY (svc_test_… for chain-devnet, svc_live_… for chain-mainnet) in the tool server’s environment.',
        { env: 'SVC_API_KEY' },
      );
    }
    this.clientInstance ??= createClient({ url: this.env.apiUrl, apiKey: this.env.apiKey, fetch: this.fetch });
    return this.clientInstance;
  }

  get hasApiKey(): boolean {
    return this.env.apiKey !== undefined;
  }

  /** The API's public procedures, with no key (the network is SVC_NETWORK's, or the key's when one is set). */
  get publicApi(): Client {
    this.publicClientInstance ??= createClient({ url: this.env.apiUrl, fetch: this.fetch });
    return this.publicClientInstance;
  }

  /** The configured agent, or null. The environment (SVC_AGENT_MINT, SVC_EXECUTIVE_KEY) wins over the file. */
  agent(): ActiveAgent | null {
    const mint = this.env.agentMint ?? this.file?.agent_mint ?? null;
    const stored = this.file?.executive_keypair;
    const executive =
      this.env.executive ?? (stored == null ? undefined : (parseSecret(typeof stored === 'string' ? stored : JSON.stringify(stored)) ?? undefined));
    if (!mint || !executive) return null;
    return { mint, treasury: treasuryOf(mint), executive };
  }

  requireAgent(): ActiveAgent {
    const agent = this.agent();
    if (!agent) {
      throw new ToolError('no_agent', 'No agent is configured: run svc_register_agent (or set SVC_AGENT_MINT and SVC_EXECUTIVE_KEY).', {
        config_path: this.env.configPath,
        pending_register: this.file?.pending_register != null,
      });
    }
    return agent;
  }

  /** Writes the file (mode 0600) and keeps it as the in-memory state, so later tools work without a restart. */
  async save(next: AgentConfigFile): Promise<void> {
    await writeConfigFile(this.env.configPath, next);
    this.file = next;
  }

  emptyConfig(): AgentConfigFile {
    return { version: 1, agent_mint: null, executive_keypair: null, network: this.network, rpc_url: null, pending_register: null };
  }

  /** The agent's configuration after step 2 of the onboarding. */
  registeredConfig(mint: string, executive: Keypair): AgentConfigFile {
    return {
      ...(this.file ?? this.emptyConfig()),
      version: 1,
      agent_mint: mint,
      executive_keypair: secretOf(executive),
      network: this.network,
      pending_register: null,
    };
  }

  /** Runs an API call, turning its failure into a ToolError with the API's code. */
  async call<T>(work: (api: Client) => Promise<T>): Promise<T> {
    try {
      return await work(this.api);
    } catch (e) {
      throw toToolError(e);
    }
  }

  /** A public API call (no key needed), its failure a ToolError with the API's code. */
  async callPublic<T>(work: (api: Client) => Promise<T>): Promise<T> {
    try {
      return await work(this.publicApi);
    } catch (e) {
      throw toToolError(e);
    }
  }

  /**
   * prepare → sign locally → POST /v1/submit → track: signs the envelope's transaction with `signers`, submits it and
   * waits until its event is confirmed (failed: ToolError `transaction_failed`). Returns null for a no-op envelope.
   */
  async signSubmitTrack(
    envelope: PreparedEnvelope,
    signers: Keypair[],
    onSubmitted?: (signature: string) => Promise<void>,
  ): Promise<{ event_id: string; signature: string } | null> {
    if (!envelope.transaction || !envelope.event_id) return null;
    // An executive that is not the asset's owner may not authorise Core execute (fee-facilitator-mpp-tools §5: withdrawals
    // and delegations need the owner): say so, rather than fail inside the signing library.
    const tx = Transaction.from(Buffer.from(envelope.transaction.base64, 'base64'));
    // signatures the gateway added itself (agents/prepare: the new asset's key) count as held
    const held = new Set([
      ...signers.map((k) => k.publicKey.toBase58()),
      ...tx.signatures.filter((s) => s.signature !== null).map((s) => s.publicKey.toBase58()),
    ]);
    const missing = envelope.transaction.signers.filter((s) => !held.has(s));
    if (missing.length > 0) {
      throw new ToolError(
        'forbidden',
        `This action needs the signature of ${missing.join(', ')} (the agent's owner), which this tool server does not hold: the configured executive ${signers.map((k) => k.publicKey.toBase58()).join(', ')} is not the agent's owner.`,
        { required_signers: envelope.transaction.signers, missing_signers: missing, event_id: envelope.event_id },
      );
    }
    tx.partialSign(...signers);
    const signed = tx.serialize({ requireAllSignatures: true }).toString('base64');
    const submitted = await this.call((api) => api.transactions.submit.mutate({ event_id: envelope.event_id!, transaction_base64: signed }));
    await onSubmitted?.(submitted.signature);
    await this.track(envelope.event_id, submitted.signature);
    return { event_id: envelope.event_id, signature: submitted.signature };
  }

  async track(eventId: string, signature: string): Promise<void> {
    const deadline = Date.now() + this.confirmTimeoutMs;
    for (;;) {
      const event = await this.call((api) => api.events.get.query({ id: eventId }));
      if (event.phase === 'confirmed') return;
      if (event.phase === 'failed') {
        throw new ToolError('transaction_failed', `The transaction ${signature} ${event.phase}${event.error_code ? `: ${event.error_code}` : ''}.`, {
          event_id: eventId,
          signature,
          phase: event.phase,
          error_code: event.error_code,
          error_logs: event.error_logs,
        });
      }
      if (Date.now() > deadline) {
        throw new ToolError(
          'confirmation_timeout',
          `The transaction ${signature} was not confirmed within ${this.confirmTimeoutMs / 1000} s; see GET /v1/events/${eventId}.`,
          { event_id: eventId, signature },
        );
      }
      await new Promise((r) => setTimeout(r, 400));
    }
  }

  explorerTx(signature: string): string {
    const cluster = this.network === 'chain-devnet' ? '?cluster=devnet' : '';
    return `${this.env.explorerUrl.replace(/\/+$/, '')}/tx/${signature}${cluster}`;
  }
}

/** One tool: its name, its input as one zod object (the JSON Schema the host sees is generated from it) and its work. */
export interface ToolDef<S extends z.ZodObject = z.ZodObject> {
  name: `svc_${string}`;
  title: string;
  description: string;
  input: S;
  run(ctx: ToolContext, input: z.output<S>): Promise<unknown>;
}

export const defineTool = <S extends z.ZodObject>(def: ToolDef<S>): ToolDef<S> => def;
