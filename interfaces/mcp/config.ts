import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { Keypair } from '@solana/web3.js';
import { z } from 'zod';
import { Address } from '../../domain/shared/address.ts';
import { decodeBase58, encodeBase58 } from '../../domain/shared/base58.ts';
import { KEY_PREFIX, Network, NETWORKS } from '../../domain/shared/network.ts';

// fee-facilitator-mpp-tools §2.8: the tool server's environment and its configuration file (owner-only permissions).
// The executive key lives here and in this process only: the gateway never sees it. Nothing in this module prints it.

/** A 64-byte secret as base58 or a JSON byte array (what `solana-keygen` writes). */
export function parseSecret(text: string): Keypair | null {
  const trimmed = text.trim();
  let bytes: Uint8Array | null = null;
  if (trimmed.startsWith('[')) {
    try {
      const parsed = z.array(z.number().int().min(0).max(255)).length(64).safeParse(JSON.parse(trimmed));
      bytes = parsed.success ? Uint8Array.from(parsed.data) : null;
    } catch {
      bytes = null;
    }
  } else {
    bytes = decodeBase58(trimmed);
  }
  if (bytes?.length !== 64) return null;
  try {
    return Keypair.fromSecretKey(bytes);
  } catch {
    return null;
  }
}

export const secretOf = (k: Keypair): string => encodeBase58(k.secretKey);

const ServiceEntry = z.strictObject({ name: z.string().min(1).max(64), endpoint: z.url().max(2048) });

/** Between the two steps of svc_register_agent (§4.4): the generated key, the profile, and how far step 2 got. */
export const PendingRegister = z.strictObject({
  executive_keypair: z.string().min(1),
  name: z.string().min(1).max(64),
  description: z.string().max(1000).optional(),
  image_url: z.url().max(2048).optional(),
  services: z.array(ServiceEntry).max(15).optional(),
  /** set once step 2 submitted the mint: a retry resumes from here instead of minting again */
  mint: Address.optional(),
  /** the registration document URL the gateway wrote into the asset (its hosted registration.json) */
  uri: z.url().max(200).optional(),
  create_event_id: z.string().optional(),
  create_signature: z.string().optional(),
  delegation_signature: z.string().optional(),
});
export type PendingRegister = z.infer<typeof PendingRegister>;

export const AgentConfigFile = z.strictObject({
  version: z.literal(1),
  agent_mint: Address.nullable().default(null),
  /** base58 (or a JSON byte array when imported so) */
  executive_keypair: z
    .union([z.string(), z.array(z.number().int().min(0).max(255)).length(64)])
    .nullable()
    .default(null),
  network: Network,
  rpc_url: z.string().nullable().default(null),
  pending_register: PendingRegister.nullable().default(null),
});
export type AgentConfigFile = z.output<typeof AgentConfigFile>;

export const DEFAULT_API_URL = 'http://localhost:8080';
export const DEFAULT_RPC_URL: Record<Network, string> = {
  'chain-mainnet': 'https://api.mainnet-beta.solana.com',
  'chain-devnet': 'https://api.devnet.solana.com',
};
export const DEFAULT_EXPLORER_URL = 'https://explorer.solana.com';

export interface ToolEnv {
  configPath: string;
  network: Network;
  apiUrl: string;
  apiKey: string | undefined;
  rpcUrl: string;
  explorerUrl: string;
  /** SVC_AGENT_MINT / SVC_EXECUTIVE_KEY: they win over the file */
  agentMint: string | undefined;
  executive: Keypair | undefined;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * Reads the environment. The network is the API key's (its prefix decides, hosted-api §5); SVC_NETWORK must agree
 * with it and is only the default when no key is set.
 */
export function loadToolEnv(env: NodeJS.ProcessEnv = process.env): ToolEnv {
  const apiKey = env.SVC_API_KEY?.trim() || undefined;
  const named = env.SVC_NETWORK?.trim() || undefined;
  if (named !== undefined && !(NETWORKS as readonly string[]).includes(named)) {
    throw new ConfigError(`SVC_NETWORK must be one of ${NETWORKS.join(', ')}, not ${JSON.stringify(named)}.`);
  }
  let network = (named as Network | undefined) ?? 'chain-mainnet';
  if (apiKey) {
    const byKey = NETWORKS.find((n) => apiKey.startsWith(KEY_PREFIX[n]));
    if (!byKey) throw new ConfigError(`SVC_API_KEY must start with ${Object.values(KEY_PREFIX).join(' or ')}.`);
    if (named !== undefined && named !== byKey) throw new ConfigError(`SVC_NETWORK is ${named} but SVC_API_KEY is a key of ${byKey}.`);
    network = byKey;
  }
  let executive: Keypair | undefined;
  if (env.SVC_EXECUTIVE_KEY?.trim()) {
    const parsed = parseSecret(env.SVC_EXECUTIVE_KEY);
    if (!parsed) throw new ConfigError('SVC_EXECUTIVE_KEY is not a 64-byte secret in base58 or a JSON byte array.');
    executive = parsed;
  }
  const agentMint = env.SVC_AGENT_MINT?.trim() || undefined;
  if (agentMint !== undefined && !Address.safeParse(agentMint).success) throw new ConfigError('SVC_AGENT_MINT is not a base58 address.');
  return {
    configPath: env.SVC_AGENT_CONFIG?.trim() || join(homedir(), '.config', 'svc', 'agent.json'),
    network,
    apiUrl: (env.SVC_API_URL?.trim() || DEFAULT_API_URL).replace(/\/+$/, ''),
    apiKey,
    rpcUrl: env.SVC_RPC_URL?.trim() || DEFAULT_RPC_URL[network],
    explorerUrl: env.SVC_EXPLORER_URL?.trim() || DEFAULT_EXPLORER_URL,
    agentMint,
    executive,
  };
}

/** The file, or null when it does not exist; a malformed file is an error naming the path (never its content). */
export async function readConfigFile(path: string): Promise<AgentConfigFile | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError(`${path} is not JSON.`);
  }
  const parsed = AgentConfigFile.safeParse(json);
  if (!parsed.success)
    throw new ConfigError(
      `${path} is not an agent configuration: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}.`,
    );
  return parsed.data;
}

/** Writes the file with mode 0600 (its directory 0700): written to a temporary file first, then renamed over. */
export async function writeConfigFile(path: string, config: AgentConfigFile): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(AgentConfigFile.parse(config), null, 2)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}
