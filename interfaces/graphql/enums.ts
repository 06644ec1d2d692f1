import type { EnumRef } from '@pothos/core';
import type { z } from 'zod';
import { EventPhase } from '../../domain/events/schema.ts';
import { Verdict } from '../../domain/identity/schema.ts';
import { HttpMethod, Protocol } from '../../domain/payment-links/schema.ts';
import { VerificationStatus } from '../../domain/receipts/schema.ts';
import { Network, StableSymbol, type Network as NetworkName } from '../../domain/shared/network.ts';
import { TokenProgram } from '../../domain/treasury/schema.ts';
import { builder } from './builder.ts';

// GraphQL conventions: every GraphQL enum is built here from the domain's one zod enum. Its values are
// UPPER_CASE names (GraphQL convention: `chain-devnet` → CHAIN_DEVNET, `before_forward` → BEFORE_FORWARD,
// `agentCreate` → AGENT_CREATE); each maps to the domain's wire value (Pothos `value:`), so resolvers and the
// procedures they call see exactly what REST and tRPC see, and a value outside the enum is a GraphQL validation error
// before any resolver runs. One GraphQL enum per domain union, shared by inputs and outputs: any schema module (a new
// field too) asking for a name with its domain enum gets the same type back.

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

/** A zod enum or the tuple behind it. */
type EnumSource<V extends string> = z.ZodEnum<{ [K in V]: K }> | readonly V[];

/** The GraphQL name of a wire value: words split at `-`, `_`, `.`, spaces and camelCase humps, UPPER_SNAKE_CASE. */
export function graphqlEnumName(value: string): string {
  const name = value
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toUpperCase();
  return /^[A-Z_]/.test(name) ? name : `_${name}`;
}

interface Registered {
  ref: EnumRef<Types, string, string>;
  values: readonly string[];
}

const registry = new Map<string, Registered>();

export interface EnumOptions<V extends string> {
  description?: string;
  /** per wire value */
  valueDescriptions?: Partial<Record<V, string>>;
}

/**
 * The GraphQL enum `name` for a domain union: made on first use, the same type on every later use. Asking for a name
 * already made with other values is a programming error (two unions under one name) and throws at schema build.
 */
export function graphqlEnum<const V extends string>(name: string, source: EnumSource<V>, options: EnumOptions<V> = {}): EnumRef<Types, V, V> {
  const values: readonly V[] = Array.isArray(source) ? (source as readonly V[]) : ((source as z.ZodEnum<{ [K in V]: K }>).options as readonly V[]);
  const known = registry.get(name);
  if (known) {
    if (known.values.length !== values.length || known.values.some((v, i) => v !== values[i])) {
      throw new Error(`GraphQL enum ${name} is already defined with other values: ${known.values.join(', ')} ≠ ${values.join(', ')}`);
    }
    return known.ref as unknown as EnumRef<Types, V, V>;
  }
  const config: Record<string, { value: V; description?: string }> = {};
  for (const value of values) {
    const key = graphqlEnumName(value);
    if (key in config) throw new Error(`GraphQL enum ${name}: ${value} and ${config[key]!.value} both map to ${key}`);
    const description = options.valueDescriptions?.[value];
    config[key] = description === undefined ? { value } : { value, description };
  }
  const ref = builder.enumType(name, {
    ...(options.description === undefined ? {} : { description: options.description }),
    values: config,
  }) as unknown as EnumRef<Types, V, V>;
  registry.set(name, { ref: ref as unknown as EnumRef<Types, string, string>, values });
  return ref;
}

// ---- the domain unions more than one schema module uses -----------------------------------------------------------

export const NetworkEnum = graphqlEnum('Network', Network, { description: 'The network a key, and everything it owns, lives on.' });
export const StableSymbolEnum = graphqlEnum('StableSymbol', StableSymbol, { description: 'A curated stablecoin.' });
export const HttpMethodEnum = graphqlEnum('HttpMethod', HttpMethod);
export const ProtocolEnum = graphqlEnum('Protocol', Protocol, { description: 'The payment protocol a link answers with.' });
export const EventPhaseEnum = graphqlEnum('EventPhase', EventPhase);
export const TokenProgramEnum = graphqlEnum('TokenProgram', TokenProgram, { description: 'SPL Token (SPL) or Token-2022 (TOKEN_2022).' });
export const VerificationStatusEnum = graphqlEnum('VerificationStatus', VerificationStatus, {
  description: 'The check of a receipt against its network’s ledger.',
});
export const IdentityVerdictEnum = graphqlEnum('IdentityVerdict', Verdict);

/**
 * A `network` that a wire type declares as a string (receipts, pull targets, discovery, daily totals) but that always
 * holds the owner's Network: checked with the domain's zod enum, so a value outside it is a fault, not a guess.
 */
export function networkOf(value: string): NetworkName {
  return Network.parse(value);
}

/** The same for any domain enum: a wire string a wire type leaves untyped, checked against the enum it always holds. */
export function wireValue<const V extends string>(source: z.ZodEnum<{ [K in V]: K }>, value: string): V {
  return source.parse(value) as V;
}
