import type { AnyProcedure } from '@trpc/server';
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputField,
  type GraphQLSchema,
  getNamedType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
} from 'graphql';
import type { z } from 'zod';
import type { Meta } from '../trpc/init.ts';
import { appRouter } from '../trpc/router.ts';

// Descriptions are written once, on the domain's zod schemas (`.describe()`), and /openapi.json, the MCP tools and
// this GraphQL schema all show them. A GraphQL type names its zod schema (`extensions: fromZod(Schema)`), a root
// field names the procedure it calls (`extensions: procedure('paymentLinks.list')`); this pass fills every field,
// argument and type description that the Pothos definition does not write itself.

interface Extensions {
  zod?: z.ZodType;
  procedure?: string;
}

/** `extensions` of a Pothos object or input type whose fields mirror a domain schema (camelCase ↔ snake_case). */
export function fromZod(schema: z.ZodType): { zod: z.ZodType } {
  return { zod: schema };
}

/** `extensions` of a root field that calls one tRPC procedure: its summary describes the field, its input the args. */
export function procedure(path: string): { procedure: string } {
  if (!(path in appRouter._def.procedures)) throw new Error(`GraphQL: no procedure ${path}`);
  return { procedure: path };
}

/** GraphQL's pagination words for the list inputs' fields. */
const ARG_ALIASES: Record<string, string> = { first: 'limit', after: 'cursor', kinds: 'kind' };

const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The description of a schema, looking through the wrappers (optional, nullable, default, pipe) zod adds around it. */
export function zodDescription(schema: z.ZodType | undefined): string | undefined {
  let current = schema as { description?: string; _zod?: { def: Record<string, unknown> } } | undefined;
  for (let depth = 0; current && depth < 16; depth++) {
    if (current.description) return current.description;
    const def = current._zod?.def;
    const inner = (def?.innerType ?? def?.in ?? def?.schema) as typeof current | undefined;
    if (!inner) {
      // a transform's output is not the client's view: the pipe's input side above said what the field is
      return undefined;
    }
    current = inner;
  }
  return undefined;
}

function unwrapObject(schema: z.ZodType | undefined): Record<string, z.ZodType> | undefined {
  let current = schema as { _zod?: { def: Record<string, unknown> }; shape?: Record<string, z.ZodType> } | undefined;
  for (let depth = 0; current && depth < 16; depth++) {
    if (current.shape) return current.shape;
    const def = current._zod?.def;
    current = (def?.innerType ?? def?.in ?? def?.schema) as typeof current | undefined;
  }
  return undefined;
}

function fieldDescription(schema: z.ZodType | undefined, name: string): string | undefined {
  const shape = unwrapObject(schema);
  if (!shape) return undefined;
  const key = [name, snake(name), ARG_ALIASES[name]].find((k) => k !== undefined && k in shape);
  return key === undefined ? undefined : zodDescription(shape[key]);
}

function procedureOf(path: string | undefined): { meta: Meta | undefined; input: z.ZodType | undefined } | undefined {
  if (path === undefined) return undefined;
  const proc = (appRouter._def.procedures as unknown as Record<string, AnyProcedure>)[path];
  if (!proc) throw new Error(`GraphQL: no procedure ${path}`);
  const inputs = (proc._def as unknown as { inputs?: z.ZodType[] }).inputs ?? [];
  return { meta: proc._def.meta as Meta | undefined, input: inputs[0] };
}

function describeArgs(args: readonly GraphQLArgument[], input: z.ZodType | undefined): void {
  for (const arg of args) {
    arg.description ??= fieldDescription(input, arg.name) ?? getNamedType(arg.type).description ?? undefined;
  }
}

/** Fills the descriptions the Pothos definitions leave out, from the zod schemas and procedures they name. */
export function describeSchema(schema: GraphQLSchema): GraphQLSchema {
  const types = Object.values(schema.getTypeMap()).filter((type) => !type.name.startsWith('__'));
  // types first: an argument without a description of its own shows its input type's
  for (const type of types) type.description ??= zodDescription((type.extensions as Extensions).zod);
  for (const type of types) {
    if (!isObjectType(type) && !isInterfaceType(type) && !isInputObjectType(type)) continue;
    const typeZod = (type.extensions as Extensions).zod;
    for (const field of Object.values(type.getFields()) as (GraphQLField<unknown, unknown> | GraphQLInputField)[]) {
      const proc = procedureOf((field.extensions as Extensions).procedure);
      field.description ??= proc?.meta?.openapi?.description ?? proc?.meta?.openapi?.summary ?? fieldDescription(typeZod, field.name);
      if ('args' in field) describeArgs(field.args, proc?.input);
    }
  }
  return schema;
}
