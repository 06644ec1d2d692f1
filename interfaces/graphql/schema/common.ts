import type { ObjectRef } from '@pothos/core';
import { Kind, type ValueNode } from 'graphql';
import { z } from 'zod';
import type { Page } from '../../../domain/shared/pagination.ts';
import { listEnvelope } from '../../../domain/shared/pagination.ts';
import { builder } from '../builder.ts';
import { fromZod } from '../describe.ts';

// Shared by the schema modules: the JSON scalar, the list envelope and the camelCase → snake_case input mapping.

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

function literal(node: ValueNode, variables: Record<string, unknown> | null | undefined): unknown {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
    case Kind.ENUM:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map((v) => literal(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(node.fields.map((f) => [f.name.value, literal(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[node.name.value];
  }
}

/** Free-form JSON (response bodies, metadata); the domain schemas check its shape. */
export const JsonScalar = builder.scalarType('JSON', {
  description: 'Any JSON value.',
  serialize: (value) => value,
  // GraphQL handles a null before it reaches a scalar's parser: what arrives here is never null
  parseValue: (value) => value as NonNullable<unknown>,
  parseLiteral: (node, variables) => literal(node, variables) as NonNullable<unknown>,
});

/** The list envelope of DECISIONS "Wire conventions" (`{data, next_cursor, has_more}`) in camelCase. */
export function pageRef<T>(name: string, item: ObjectRef<Types, T>) {
  return builder.objectRef<Page<T>>(name).implement({
    description: `A page of ${item.name}, newest first. Pass nextCursor as \`after\` for the next page.`,
    extensions: fromZod(listEnvelope(z.unknown())),
    fields: (t) => ({
      data: t.field({ type: [item], resolve: (page) => page.data }),
      nextCursor: t.exposeString('next_cursor', { nullable: true }),
      hasMore: t.exposeBoolean('has_more'),
    }),
  });
}

type SnakeKey<S extends string> = S extends `${infer H}${infer T}` ? `${H extends Lowercase<H> ? H : `_${Lowercase<H>}`}${SnakeKey<T>}` : S;

/** `{ ownerAgent: … }` → `{ owner_agent: … }` at the type level. */
export type SnakeKeys<T> = { [K in keyof T as K extends string ? SnakeKey<K> : K]: T[K] };

/** The keys a value must carry (GraphQL `required: true`; a zod field that is neither optional nor defaulted). */
// biome-ignore lint/complexity/noBannedTypes: `{} extends Pick<T, K>` is the test for an optional key K
type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T];

/**
 * `true` when A and B have the same keys and the same of them are required, otherwise an object naming the difference
 * (so `Assert<…>` fails): a GraphQL input declares no requiredness of its own that the zod schema does not.
 */
export type KeysMatch<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never]
  ? [Exclude<RequiredKeys<A>, RequiredKeys<B>>, Exclude<RequiredKeys<B>, RequiredKeys<A>>] extends [never, never]
    ? true
    : { requiredInGraphqlOnly: Exclude<RequiredKeys<A>, RequiredKeys<B>>; requiredInDomainOnly: Exclude<RequiredKeys<B>, RequiredKeys<A>> }
  : { onlyInGraphql: Exclude<keyof A, keyof B>; onlyInDomain: Exclude<keyof B, keyof A> };

/** Compile-time drift check between a GraphQL input (camelCase) and the domain input (snake_case). */
export type SameKeys<Gql, Domain> = KeysMatch<SnakeKeys<Gql>, Domain>;

export function snakeKey(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A GraphQL input → the domain's snake_case input: top-level keys renamed and GraphQL `null`s dropped (the domain reads
 * an absent optional field as "not given"), except for `keepNull` keys where null means "clear". Objects named in
 * `stripNested` (e.g. `response`) lose their nulls too; JSON values (metadata, bodies) pass unchanged. The service then
 * parses the result with the shared zod schema: no validation happens here.
 */
export function toDomainInput(input: object, options: { keepNull?: readonly string[]; stripNested?: readonly string[] } = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (value === undefined || (value === null && !options.keepNull?.includes(key))) continue;
    out[snakeKey(key)] =
      options.stripNested?.includes(key) && isPlainObject(value)
        ? Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null && v !== undefined))
        : value;
  }
  return out;
}

/** `null | undefined` → `undefined`: GraphQL's "not given" in the domain's terms. */
export function given<T>(value: T | null | undefined): T | undefined {
  return value ?? undefined;
}

/** Type-level assertion: `Assert<SameKeys<…>>` fails to compile when the two inputs drift apart. */
export type Assert<T extends true> = T;

// The GraphQL enums live in ../enums.ts (one per domain union); re-exported for the modules that import it from here.
export { StableSymbolEnum } from '../enums.ts';
