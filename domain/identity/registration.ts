import { z } from 'zod';
import { IDENTITY_PROGRAM_ID } from '../agents/build/execute.ts';
import { Address } from '../shared/address.ts';
import { CAIP2, Network } from '../shared/network.ts';

// fee-facilitator-mpp-tools §2.7 (registration-v1) and DECISIONS "Identity": the one schema of an agent's registration
// document. The gateway validates with it the document it serves (GET /v1/agents/{mint}/registration.json), the one
// agents/prepare describes when the gateway hosts it, and any document read back from an agent's uri (verify/resolve).

/** The registration-v1 type URI of EIP-8004 (DECISIONS "Identity"). */
export const REGISTRATION_TYPE = 'https://eips.ethereum.org/EIPS/eip-8004#registration-v1';

/** "A URI or a string matching the ipfs:// prefix followed by at least one character" (§2.7 svc.rulesUri). */
const UriOrIpfs = z.union([z.url(), z.string().regex(/^ipfs:\/\/.+/)]);

/** §2.7: "no properties beyond those listed are allowed at any level" — every object is strict. */
export const RegistrationService = z
  .strictObject({
    name: z.string().describe('service name, e.g. receipts'),
    endpoint: z.string().describe('the service’s URL'),
    version: z.string().describe('service version').optional(),
    skills: z.array(z.unknown()).describe('skills the service offers').optional(),
    domains: z.array(z.string()).describe('domains the service serves').optional(),
  })
  .describe('A service the agent advertises.');
export type RegistrationService = z.infer<typeof RegistrationService>;

export const RegistrationV1 = z.strictObject({
  type: z.literal(REGISTRATION_TYPE).describe('the EIP-8004 registration-v1 type URI'),
  name: z.string().describe('the agent’s name'),
  description: z.string().describe('free text'),
  image: z.string().describe('image URL'),
  services: z.array(RegistrationService).describe('advertised services (receipts points at GET /v1/receipts/{agent})').optional(),
  active: z.boolean().describe('whether the agent is active').optional(),
  registrations: z
    .array(z.strictObject({ agentId: z.string().describe('the agent id in that registry'), agentRegistry: z.string().describe('the registry') }))
    .describe('the agent’s entries in identity registries')
    .optional(),
  supportedTrust: z.array(z.string()).describe('trust models the agent supports').optional(),
  svc: z
    .strictObject({
      v: z.literal('0.1').describe("extension version '0.1'"),
      rulesUri: UriOrIpfs.describe('URI (or ipfs://) of the agent’s rules'),
      receiptsFeed: z.string().describe('URL of the agent’s receipts feed'),
      anchor: z
        .strictObject({ program: z.string().describe('anchor program address'), merkleAccount: z.string().describe('merkle account address') })
        .describe('where receipts are anchored on chain'),
      killSwitch: z
        .strictObject({
          onchain: z.string().describe('on-chain kill switch address').optional(),
          endpoint: z.url().describe('kill switch endpoint').optional(),
        })
        .describe('how to stop the agent')
        .optional(),
    })
    .describe('the svc extension block (fee-facilitator-mpp-tools §2.7)')
    .optional(),
});
export type RegistrationV1 = z.infer<typeof RegistrationV1>;

/** GET /v1/agents/{mint}/registration.json?network= (chain-mainnet unless named, as the paywall's share URLs). */
export const RegistrationInput = z.object({
  mint: Address.describe('the agent’s mint'),
  network: Network.default('chain-mainnet').describe('the agent’s network; default chain-mainnet'),
});
export type RegistrationInput = z.input<typeof RegistrationInput>;

/**
 * The URL at which the gateway serves an agent's registration document; a devnet agent's names its network (the
 * route reads chain-mainnet otherwise), so it works as written into the asset.
 */
export function registrationUrl(baseUrl: string, network: Network, mint: string): string {
  const url = `${baseUrl}/v1/agents/${mint}/registration.json`;
  return network === 'chain-mainnet' ? url : `${url}?network=${network}`;
}

/** Whether `uri` is the gateway's own registration URL of the agent, however its network is spelt (named or defaulted). */
export function isOwnRegistrationUrl(uri: string, baseUrl: string, network: Network, mint: string): boolean {
  let url: URL;
  let base: URL;
  try {
    url = new URL(uri);
    base = new URL(`${baseUrl}/v1/agents/${mint}/registration.json`);
  } catch {
    return false;
  }
  if (url.origin !== base.origin || url.pathname !== base.pathname || url.hash) return false;
  const keys = [...url.searchParams.keys()];
  if (keys.some((k) => k !== 'network') || keys.length > 1) return false;
  return (url.searchParams.get('network') ?? 'chain-mainnet') === network;
}

/** The agentRegistry of the registrations entry: the CAIP-2 chain and the Metaplex Agent Registry identity program. */
export function agentRegistryOf(network: Network): string {
  return `${CAIP2[network]}:${IDENTITY_PROGRAM_ID}`;
}

/** What the gateway knows of an agent when it writes its registration document. */
export interface RegistrationFacts {
  network: Network;
  mint: string;
  name: string;
  description: string;
  image: string;
  /** the agent's paid endpoints: enabled payment links' share URLs and the rail each answers on */
  paidEndpoints: { endpoint: string; protocol: 'x402' | 'mpp' }[];
  /** services the owner listed at agents/prepare */
  listed: { name: string; endpoint: string }[];
  /** verified domains */
  domains: string[];
  /** public capability names (cards and profile) */
  skills: string[];
  /** {base_url}/v1/receipts/{agent} (§2.7: the receipts service by default) */
  receiptsUrl: string;
}

/**
 * The registration-v1 document of an agent: its paid endpoints as services named by their rail, `x402` or `mpp`
 * (fee-facilitator-mpp-tools §4.2: a client classifies the 402 it will get by it), with its public capabilities as
 * skills and verified domains as domains; each verified domain as a `web` service, the services listed at prepare,
 * the `receipts` service, and its registration in the Metaplex Agent Registry. Parsed by RegistrationV1 before it is
 * answered, so a document the gateway serves is always valid.
 */
export function buildRegistration(f: RegistrationFacts): RegistrationV1 {
  return RegistrationV1.parse(registrationDocument(f));
}

/** The document of `buildRegistration` before it is checked (agents/prepare checks it itself to answer 400). */
export function registrationDocument(f: RegistrationFacts): unknown {
  const skills = f.skills.length ? { skills: [...f.skills] } : {};
  const domains = f.domains.length ? { domains: [...f.domains] } : {};
  const services: RegistrationService[] = [
    ...f.paidEndpoints.map((p) => ({ name: p.protocol, endpoint: p.endpoint, ...skills, ...domains })),
    ...f.domains.map((d) => ({ name: 'web', endpoint: `https://${d}/` })),
    ...f.listed.map((s) => ({ name: s.name, endpoint: s.endpoint })),
    { name: 'receipts', endpoint: f.receiptsUrl },
  ];
  return {
    type: REGISTRATION_TYPE,
    name: f.name,
    description: f.description,
    image: f.image,
    services,
    active: true,
    registrations: [{ agentId: f.mint, agentRegistry: agentRegistryOf(f.network) }],
  };
}
