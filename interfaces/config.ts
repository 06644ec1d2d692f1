import { join, resolve } from 'node:path';
import { z } from 'zod';
import { Address } from '../domain/shared/address.ts';
import { RateLimitOverrides } from '../domain/policies/rate-limit.ts';
import { decodeBase58 } from '../domain/shared/base58.ts';
import type { Network } from '../domain/shared/network.ts';
import { FeeEnforcement } from '../domain/shared/settings.ts';
import { DEFAULT_REQUEST_BOUNDS, type RequestBounds } from '../domain/shared/request-bounds.ts';
import { parseOutboundTarget } from '../domain/ports/outbound-http.ts';

const JsonLimits = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object such as {"meta":5}' });
      return z.NEVER;
    }
  })
  .pipe(RateLimitOverrides);

// Every setting is an environment variable, validated once at start; a bad value stops start-up.

const Port = z.coerce.number().int().min(0).max(65_535);
/** "embedded" (LiteSVM under SVC_DATA_DIR) or the http(s) URL of a Solana JSON-RPC node */
const LedgerSource = z.union([z.literal('embedded'), z.url({ protocol: /^https?$/ })]);
const optionalString = z
  .string()
  .trim()
  .min(1)
  .optional()
  .or(z.literal('').transform(() => undefined));

/** fee-facilitator-mpp-tools §2.5: a 64-byte secret as a JSON byte array or base58. */
const SecretKey = z.string().transform((text, ctx) => {
  const bytes = parseSecretKey(text.trim());
  if (!bytes) {
    ctx.addIssue({ code: 'custom', message: 'must be a 64-byte secret key: a JSON byte array or a base58 string' });
    return z.NEVER;
  }
  return bytes;
});

function parseSecretKey(text: string): Uint8Array | null {
  try {
    if (text.startsWith('[')) {
      const arr = JSON.parse(text) as unknown;
      if (Array.isArray(arr) && arr.length === 64 && arr.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) return Uint8Array.from(arr as number[]);
      return null;
    }
    const bytes = decodeBase58(text);
    return bytes && bytes.length === 64 ? bytes : null;
  } catch {
    return null;
  }
}

/** §2.5 network names; testnet has no stables curated here, so it is refused with a clear message. */
const FacilitatorNetworks = z
  .string()
  .transform((text) =>
    text
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.enum(['devnet', 'mainnet'], { message: 'networks are devnet and mainnet (testnet is not served)' })).min(1))
  .transform((names) => [...new Set(names)].map((n) => (n === 'devnet' ? 'chain-devnet' : 'chain-mainnet') as Network));

/**
 * The development targets outbound calls may reach over plain http and on private addresses, as
 * "host:port,host:port" ("localhost:3000,127.0.0.1:8080,[::1]:4000"); normalised like URLs so an entry matches every
 * spelling of its own URL and nothing else. A bad entry stops start-up naming it.
 */
const OutboundAllow = z.string().transform((text, ctx) => {
  const entries: string[] = [];
  for (const entry of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const target = parseOutboundTarget(entry);
    if (typeof target === 'string') ctx.addIssue({ code: 'custom', message: target });
    else entries.push(`${target.host}:${target.port}`);
  }
  return [...new Set(entries)];
});

/** Removed: a blanket opening; only its harmless "off" is still accepted, so old env files keep starting. */
const RemovedAllowPrivate = z
  .enum(['false', '0', ''], {
    message: 'was removed: outbound calls reach only public https targets; name each development target in SVC_OUTBOUND_ALLOW=host:port',
  })
  .optional();

/** SVC_LOG_FORMAT (interfaces/log.ts): auto = readable lines on a terminal, JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const ConfigSchema = z
  .object({
    PORT: Port.default(8080),
    HOST: z.string().min(1).default('0.0.0.0'),
    SVC_DATA_DIR: z.string().min(1).default('.data'),
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
      .optional()
      .or(z.literal('').transform(() => undefined)),
    SVC_BASE_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .or(z.literal('').transform(() => undefined)),
    SVC_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    SVC_LOG_FORMAT: z.enum(LOG_FORMATS).default('auto'),
    SVC_FEE_BPS: z.coerce.number().int().min(0).max(10_000).default(100),
    SVC_FEE_ENFORCE: FeeEnforcement.default('enforce'),
    SVC_FEE_AUTHORITY_MAINNET: Address.optional().or(z.literal('').transform(() => undefined)),
    SVC_FEE_AUTHORITY_DEVNET: Address.optional().or(z.literal('').transform(() => undefined)),
    SVC_PAYWALL_FACILITATOR_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .or(z.literal('').transform(() => undefined)),
    SVC_COMMIT: optionalString,
    SVC_DB_POOL_MAX: z.coerce.number().int().min(1).max(100).default(10),
    SVC_DB_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
    SVC_DB_HEAVY_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
    SVC_DB_HEAVY_PER_PRINCIPAL: z.coerce.number().int().min(1).max(1000).default(6),
    SVC_DB_HEAVY_POOL: z.coerce.number().int().min(0).max(100).optional(),
    SVC_RATE_LIMITS: JsonLimits.optional().or(z.literal('').transform(() => undefined)),
    SVC_JOBS: z.enum(['inline', 'off']).default('inline'),
    SVC_DEVNET_LEDGER: LedgerSource.default('embedded'),
    SVC_MAINNET_LEDGER: LedgerSource.default('embedded'),
    SVC_DEVNET_RPC_PORT: Port.default(8899),
    // two apart: each JSON-RPC port also takes the next one for its WebSocket (devnet 8899 + 8900, mainnet 8901 + 8902)
    SVC_MAINNET_RPC_PORT: Port.default(8901),
    SVC_LEDGER_RPC_HOST: z.string().min(1).default('127.0.0.1'),
    /** A directory of <program-id>.so(.gz) files every embedded ledger loads (solana-test-validator --bpf-program) */
    SVC_LEDGER_PROGRAMS: optionalString,
    /** A Solana JSON-RPC the well-known programs missing from SVC_LEDGER_PROGRAMS are cloned from at first start */
    SVC_LEDGER_CLONE_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .or(z.literal('').transform(() => undefined)),
    /** DECISIONS "MPP rail": the HMAC key of MPP challenge ids; every instance behind one base URL needs the same */
    SVC_MPP_SECRET: z
      .string()
      .min(32, 'must be at least 32 characters')
      .optional()
      .or(z.literal('').transform(() => undefined)),
    /**
     * x402 offer-receipt: the file of the Ed25519 keys that sign offers and receipts (created when missing; rotated with
     * `npm run keys -- rotate-signing`). Every instance behind one base URL reads the same file.
     */
    SVC_SIGNING_KEYS_FILE: optionalString,
    SVC_FACILITATOR_SECRET_KEY: SecretKey.optional().or(z.literal('').transform(() => undefined)),
    SVC_FACILITATOR_NETWORKS: FacilitatorNetworks.optional().or(z.literal('').transform(() => undefined)),
    SVC_FACILITATOR_PORT: Port.default(8787),
    SVC_FACILITATOR_HOST: z.string().min(1).default('0.0.0.0'),
    SVC_FACILITATOR_RPC_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .or(z.literal('').transform(() => undefined)),
    /** lamports of token-account rent the facilitator sponsors per network per UTC day (default 1 SOL ≈ 490 accounts) */
    SVC_FACILITATOR_RENT_BUDGET_LAMPORTS: z.coerce.bigint().min(0n).default(1_000_000_000n),
    SVC_FACILITATOR_CONFIRM_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(30_000),
    /** DECISIONS "Webhooks": host:port targets outbound calls may reach over http / on private addresses */
    SVC_OUTBOUND_ALLOW: OutboundAllow.optional(),
    SVC_OUTBOUND_ALLOW_PRIVATE: RemovedAllowPrivate,
    /** PEM certificate authorities outbound https trusts beside the system roots (development CAs, tests) */
    SVC_OUTBOUND_CA: z
      .string()
      .refine((s) => s === '' || /-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/.test(s), 'must be PEM text: -----BEGIN CERTIFICATE----- …')
      .optional()
      .transform((s) => (s ? s : undefined)),
    /** The bearer of the facilitator's POST /accounts (it spends rent); set the same on the gateway and `npm run facilitator` */
    SVC_FACILITATOR_ACCOUNTS_SECRET: z
      .string()
      .min(16)
      .max(256)
      .optional()
      .or(z.literal('').transform(() => undefined)),
    /** every listener: a request whose line and headers have not all arrived by then is closed (slow clients hold no socket) */
    SVC_HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(DEFAULT_REQUEST_BOUNDS.headersMs),
    /** every listener: a request (headers and body) not complete by then answers 408 request_timeout and is closed */
    SVC_HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(DEFAULT_REQUEST_BOUNDS.requestMs),
  })
  .refine((e) => e.SVC_HTTP_HEADERS_TIMEOUT_MS <= e.SVC_HTTP_REQUEST_TIMEOUT_MS, {
    // the headers are part of the request: Node refuses a headers bound past the whole request's
    path: ['SVC_HTTP_HEADERS_TIMEOUT_MS'],
    message: 'must not exceed SVC_HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)',
  });

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  baseUrl: string | undefined;
  logLevel: z.infer<typeof ConfigSchema>['SVC_LOG_LEVEL'];
  /** auto: readable lines when standard output is a terminal, JSON lines otherwise (interfaces/log.ts) */
  logFormat: LogFormat;
  feeBps: number;
  feeEnforce: FeeEnforcement;
  feeAuthorityMainnet: string | undefined;
  feeAuthorityDevnet: string | undefined;
  facilitatorUrl: string | undefined;
  commit: string | undefined;
  dbPoolMax: number;
  /** Request classes (docs/policies.md "Request policies") */
  db: { timeoutMs: number; heavyTimeoutMs: number; heavyPerPrincipal: number; heavyPool: number };
  rateLimits: RateLimitOverrides;
  jobs: 'inline' | 'off';
  ledgers: {
    devnet: string;
    mainnet: string;
    devnetRpcPort: number;
    mainnetRpcPort: number;
    rpcHost: string;
    /** SVC_LEDGER_PROGRAMS, made absolute */
    programsDir: string | undefined;
    /** SVC_LEDGER_CLONE_URL */
    cloneUrl: string | undefined;
  };
  /** SVC_MPP_SECRET (UTF-8 bytes); unset: a key generated once under the data directory */
  mppSecret: Uint8Array | undefined;
  /** SVC_SIGNING_KEYS_FILE: the offer-receipt signing key ring; default keys/receipt-signing.json under the data directory */
  signingKeysFile: string;
  facilitator: {
    secretKey: Uint8Array | undefined;
    /** the standalone service's networks (default devnet); the gateway's in-process facilitator serves both */
    networks: Network[];
    port: number;
    host: string;
    rpcUrl: string | undefined;
    rentBudgetLamports: bigint;
    confirmTimeoutMs: number;
    /** bearer of POST /accounts, sent by the HTTP adapter and required by the route; unset: the route is closed */
    accountsSecret: string | undefined;
  };
  outbound: {
    /**
     * normalised "host:port" development targets (SVC_OUTBOUND_ALLOW) that may be plain http and private; every other
     * target is https to public addresses only, and the gateway's own listeners are refused even when listed
     */
    allow: string[];
    /** PEM certificate authorities trusted beside the system roots (SVC_OUTBOUND_CA) */
    ca: string | undefined;
  };
  /** bounds on slow clients, the same for every listener (gateway, embedded ledgers' JSON-RPC, facilitator) */
  http: RequestBounds;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const key = i.path.join('.');
      // A secret's value is never echoed, not even a malformed one (it may be a real key with a typo).
      const shown = /SECRET|DATABASE_URL|CLONE_URL/.test(key) ? '(hidden)' : JSON.stringify(env[key] ?? '');
      return `  ${key}=${shown}: ${i.message}`;
    });
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const collisions = listenerCollisions(e);
  if (collisions.length) throw new ConfigError(`Invalid configuration: two listeners on one port\n${collisions.map((c) => `  ${c}`).join('\n')}`);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.SVC_DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    baseUrl: e.SVC_BASE_URL?.replace(/\/+$/, ''),
    logLevel: e.SVC_LOG_LEVEL,
    logFormat: e.SVC_LOG_FORMAT,
    feeBps: e.SVC_FEE_BPS,
    feeEnforce: e.SVC_FEE_ENFORCE,
    feeAuthorityMainnet: e.SVC_FEE_AUTHORITY_MAINNET,
    feeAuthorityDevnet: e.SVC_FEE_AUTHORITY_DEVNET,
    facilitatorUrl: e.SVC_PAYWALL_FACILITATOR_URL?.replace(/\/+$/, ''),
    commit: e.SVC_COMMIT,
    dbPoolMax: e.SVC_DB_POOL_MAX,
    db: {
      timeoutMs: e.SVC_DB_TIMEOUT_MS,
      heavyTimeoutMs: e.SVC_DB_HEAVY_TIMEOUT_MS,
      heavyPerPrincipal: e.SVC_DB_HEAVY_PER_PRINCIPAL,
      // connections of their own beside the main pool's, so the hot paths keep all of SVC_DB_POOL_MAX; more than one
      // principal may hold at once, so another principal's heavy read still finds one during a flood
      heavyPool: e.SVC_DB_HEAVY_POOL ?? 8,
    },
    rateLimits: e.SVC_RATE_LIMITS ?? {},
    jobs: e.SVC_JOBS,
    ledgers: {
      devnet: e.SVC_DEVNET_LEDGER,
      mainnet: e.SVC_MAINNET_LEDGER,
      devnetRpcPort: e.SVC_DEVNET_RPC_PORT,
      mainnetRpcPort: e.SVC_MAINNET_RPC_PORT,
      rpcHost: e.SVC_LEDGER_RPC_HOST,
      programsDir: e.SVC_LEDGER_PROGRAMS === undefined ? undefined : resolve(e.SVC_LEDGER_PROGRAMS),
      cloneUrl: e.SVC_LEDGER_CLONE_URL,
    },
    mppSecret: e.SVC_MPP_SECRET === undefined ? undefined : new TextEncoder().encode(e.SVC_MPP_SECRET),
    signingKeysFile: e.SVC_SIGNING_KEYS_FILE ?? join(e.SVC_DATA_DIR, 'keys', 'receipt-signing.json'),
    facilitator: {
      secretKey: e.SVC_FACILITATOR_SECRET_KEY,
      networks: e.SVC_FACILITATOR_NETWORKS ?? ['chain-devnet'],
      port: e.SVC_FACILITATOR_PORT,
      host: e.SVC_FACILITATOR_HOST,
      rpcUrl: e.SVC_FACILITATOR_RPC_URL,
      rentBudgetLamports: e.SVC_FACILITATOR_RENT_BUDGET_LAMPORTS,
      confirmTimeoutMs: e.SVC_FACILITATOR_CONFIRM_TIMEOUT_MS,
      accountsSecret: e.SVC_FACILITATOR_ACCOUNTS_SECRET,
    },
    outbound: { allow: e.SVC_OUTBOUND_ALLOW ?? [], ca: e.SVC_OUTBOUND_CA },
    http: { headersMs: e.SVC_HTTP_HEADERS_TIMEOUT_MS, requestMs: e.SVC_HTTP_REQUEST_TIMEOUT_MS },
  };
}

/**
 * The ports this installation listens on, by the variable that sets each: the gateway's HTTP port, each embedded
 * ledger's JSON-RPC port and the next one (its WebSocket, where Solana clients look for it), and `npm run
 * facilitator`'s port (it runs beside the gateway with the same settings). 0 is any free port and never collides.
 * Hosts are not compared: a wildcard bind (0.0.0.0, the default) overlaps every address of the machine.
 */
function listenerCollisions(e: z.output<typeof ConfigSchema>): string[] {
  const listeners: { port: number; what: string }[] = [{ port: e.PORT, what: `PORT=${e.PORT}` }];
  for (const [ledger, variable, port] of [
    [e.SVC_DEVNET_LEDGER, 'SVC_DEVNET_RPC_PORT', e.SVC_DEVNET_RPC_PORT],
    [e.SVC_MAINNET_LEDGER, 'SVC_MAINNET_RPC_PORT', e.SVC_MAINNET_RPC_PORT],
  ] as const) {
    if (ledger !== 'embedded' || port === 0) continue;
    listeners.push({ port, what: `${variable}=${port}` }, { port: port + 1, what: `${variable}=${port} (its WebSocket on ${port + 1})` });
  }
  listeners.push({ port: e.SVC_FACILITATOR_PORT, what: `SVC_FACILITATOR_PORT=${e.SVC_FACILITATOR_PORT}` });
  const problems: string[] = [];
  listeners.forEach((a, i) => {
    if (a.port === 0) return;
    const b = listeners.slice(0, i).find((earlier) => earlier.port === a.port);
    if (b) problems.push(`${b.what} and ${a.what} both listen on port ${a.port}: give each its own port (or 0 for any)`);
  });
  return problems;
}

/** `npm run programs` as this installation runs it: the data directory named when it is not the default one. */
export function programsCommand(config: Pick<Config, 'dataDir'>): string {
  if (config.dataDir === ConfigSchema.shape.SVC_DATA_DIR.parse(undefined)) return 'npm run programs';
  const dir = /^[\w./@%+=:,-]+$/.test(config.dataDir) ? config.dataDir : `'${config.dataDir.replaceAll("'", "'\\''")}'`;
  return `npm run programs -- --data-dir ${dir}`;
}

/** For the commands' entry points: the configuration, or the ConfigError's message on stderr and exit code 1. */
export function loadConfigOrExit(env: Record<string, string | undefined> = process.env): Config {
  try {
    return loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(e.message);
      process.exit(1);
    }
    throw e;
  }
}
