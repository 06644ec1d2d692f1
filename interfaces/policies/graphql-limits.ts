import { createComplexityRule, type FieldComplexityValue } from '@pothos/plugin-complexity';
import {
  getNullableType,
  GraphQLError,
  isListType,
  Kind,
  parse,
  validate,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLSchema,
  type SelectionSetNode,
  type Source,
} from 'graphql';
import { DomainError } from '../../domain/shared/errors.ts';

// How much one GraphQL operation may ask for, checked before anything runs (over HTTP GET/POST, SSE and graphql-ws
// alike), and how much of the key's rate limit it takes. A document over a limit answers query_too_complex with
// details { limit, max, actual }.

export const GRAPHQL_LIMITS = {
  /** lexical tokens in a document: parsing stops there (a 1,000-alias document has about 14,000) */
  maxTokens: 5_000,
  /** aliased fields in the operation, fragments included */
  maxAliases: 20,
  /** nesting of selections, introspection included (GraphiQL's introspection query is 15 deep) */
  maxDepth: 16,
  /** estimated cost (fieldCost): a full page of 200 payment links with every field is about 11,800 */
  maxCost: 25_000,
  /** the answer itself: a result over this many bytes is replaced by query_too_complex, never sent */
  maxResponseBytes: 4 * 1024 * 1024,
  /** an operation takes ceil(cost / costPerHit) slots of the key's `graphql` rate-limit bucket */
  costPerHit: 500,
} as const;

/** DECISIONS "Wire conventions": list pages default to 50 items, at most 200 (domain/shared/pagination.ts). */
const PAGE_DEFAULT = 50;
const PAGE_MAX = 200;
/** other object lists are short (accepts: at most 3 currencies; an agent's delegations) */
const SHORT_LIST = 3;

/**
 * Cost of one field (the complexity plugin's `fieldComplexity`): 1 per field; a paged field's selection counts once
 * per requested item (`first`, default 50, at most 200); the page's `data` list is already counted by that multiplier;
 * another object list counts its selection 3 times.
 */
export function fieldCost<Ctx>(args: Record<string, unknown>, _ctx: Ctx, field: GraphQLField<unknown, Ctx, Record<string, unknown>>): FieldComplexityValue {
  if (field.args.some((a) => a.name === 'first')) {
    const first = typeof args.first === 'number' && Number.isFinite(args.first) ? args.first : PAGE_DEFAULT;
    return { field: 1, multiplier: Math.min(Math.max(Math.trunc(first), 1), PAGE_MAX) };
  }
  if (isListType(getNullableType(field.type))) return { field: 1, multiplier: field.name === 'data' ? 1 : SHORT_LIST };
  return 1;
}

function tooComplex(limit: string, max: number, actual: number | null, message: string): DomainError {
  return new DomainError('query_too_complex', message, { limit, max, actual });
}

/** graphql-js `parse` with the token limit; a document over it is query_too_complex, other syntax errors unchanged. */
export function parseLimited(source: string | Source): DocumentNode {
  try {
    return parse(source, { maxTokens: GRAPHQL_LIMITS.maxTokens });
  } catch (e) {
    // graphql-js 16 words it "contains more that N tokens"
    if (e instanceof Error && /contains more (?:than|that) \d+ tokens/.test(e.message)) {
      const error = tooComplex('tokens', GRAPHQL_LIMITS.maxTokens, null, `The document has more than ${GRAPHQL_LIMITS.maxTokens} tokens.`);
      // Yoga's HTTP status hint, as on its own request errors (the transports strip it): graphql-over-http's status
      // for a request error, as for every limit (graphql/yoga.ts refusal)
      throw new GraphQLError(error.message, { originalError: error, extensions: { http: { status: error.status, spec: true } } });
    }
    throw e;
  }
}

interface Shape {
  aliases: number;
  depth: number;
}

/** Aliases and depth of a selection set, each fragment measured once (a fragment spread many times is no shortcut). */
function shapeOf(selectionSet: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, memo: Map<string, Shape>, active: Set<string>): Shape {
  let aliases = 0;
  let depth = 0;
  for (const s of selectionSet.selections) {
    let inner: Shape;
    if (s.kind === Kind.FIELD) {
      const sub = s.selectionSet ? shapeOf(s.selectionSet, fragments, memo, active) : { aliases: 0, depth: 0 };
      inner = { aliases: sub.aliases + (s.alias ? 1 : 0), depth: sub.depth + 1 };
    } else if (s.kind === Kind.INLINE_FRAGMENT) {
      inner = shapeOf(s.selectionSet, fragments, memo, active);
    } else {
      const name = s.name.value;
      const known = memo.get(name);
      const fragment = fragments.get(name);
      // Unknown or cyclic fragments are validation errors, reported by GraphQL's own rules.
      if (known) inner = known;
      else if (!fragment || active.has(name)) inner = { aliases: 0, depth: 0 };
      else {
        active.add(name);
        inner = shapeOf(fragment.selectionSet, fragments, memo, active);
        active.delete(name);
        memo.set(name, inner);
      }
    }
    aliases += inner.aliases;
    depth = Math.max(depth, inner.depth);
  }
  return { aliases, depth };
}

export interface OperationMeasure {
  aliases: number;
  depth: number;
  cost: number;
}

/**
 * Measures the operation a request runs and throws query_too_complex when it is over a limit. Runs after GraphQL's
 * validation (the document is known to be valid against the schema) and before execution. Variables that do not
 * coerce leave the cost at 0: execution then refuses them with its own error.
 */
export function checkOperation(input: {
  schema: GraphQLSchema;
  document: DocumentNode;
  variables: Record<string, unknown> | null | undefined;
  operationName: string | null | undefined;
  context: object;
}): OperationMeasure {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of input.document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const operations = input.document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  const operation = input.operationName ? operations.find((o) => o.name?.value === input.operationName) : operations[0];
  if (!operation) return { aliases: 0, depth: 0, cost: 0 };

  const { aliases, depth } = shapeOf(operation.selectionSet, fragments, new Map(), new Set());
  if (aliases > GRAPHQL_LIMITS.maxAliases) {
    throw tooComplex('aliases', GRAPHQL_LIMITS.maxAliases, aliases, `The operation uses ${aliases} aliases; at most ${GRAPHQL_LIMITS.maxAliases} are allowed.`);
  }
  if (depth > GRAPHQL_LIMITS.maxDepth) {
    throw tooComplex('depth', GRAPHQL_LIMITS.maxDepth, depth, `The operation is ${depth} levels deep; at most ${GRAPHQL_LIMITS.maxDepth} are allowed.`);
  }

  let cost = 0;
  // The complexity plugin's own rule, run alone: it coerces the variables and applies fieldCost to every field.
  const rule = createComplexityRule({
    context: input.context,
    variableValues: input.variables ?? {},
    operationName: operation.name?.value ?? null,
    validate: (result) => {
      cost = Math.max(cost, result.complexity);
    },
  });
  validate(input.schema, input.document, [rule]);
  if (cost > GRAPHQL_LIMITS.maxCost) {
    throw tooComplex(
      'cost',
      GRAPHQL_LIMITS.maxCost,
      cost,
      `The operation's estimated cost is ${cost}; at most ${GRAPHQL_LIMITS.maxCost} is allowed. Ask for fewer items (first) or fewer fields.`,
    );
  }
  return { aliases, depth, cost };
}

/** Slots of the key's `graphql` bucket an operation of this cost takes: one per started unit, at least one. */
export function hitsForCost(cost: number): number {
  return Math.max(1, Math.ceil(cost / GRAPHQL_LIMITS.costPerHit));
}

/** The response cap's refusal, for a result already computed (the backstop behind the cost estimate). */
export function responseTooLarge(bytes: number): DomainError {
  return tooComplex(
    'response_bytes',
    GRAPHQL_LIMITS.maxResponseBytes,
    bytes,
    `The answer would be ${bytes} bytes; at most ${GRAPHQL_LIMITS.maxResponseBytes} are sent. Ask for fewer items (first) or fewer fields.`,
  );
}
