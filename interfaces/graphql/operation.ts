import type { DocumentNode, ExecutionArgs, GraphQLError, GraphQLSchema } from 'graphql';

/** What a socket transport hands its executor as the root value: the operation's own envelope functions. */
export interface Enveloped {
  execute(args: ExecutionArgs): unknown;
  subscribe(args: ExecutionArgs): unknown;
}

/** What a socket transport (graphql-ws, graphql-sse) uses of Yoga's envelope to prepare one operation. */
interface Envelope<C> {
  schema: GraphQLSchema;
  parse(source: string): DocumentNode;
  validate(schema: GraphQLSchema, document: DocumentNode): readonly GraphQLError[];
  contextFactory(): C | Promise<C>;
}

/**
 * One operation of a socket transport, prepared through Yoga's envelope as the HTTP transport prepares it (its plugins:
 * cost limits, error masking): parsed, validated, then its context built. Refused: the errors to answer with.
 */
export async function prepareOperation<C>(
  enveloped: Envelope<C>,
  query: string,
): Promise<{ document: DocumentNode; contextValue: C; errors?: undefined } | { errors: readonly unknown[] }> {
  let document: DocumentNode;
  try {
    document = enveloped.parse(query);
  } catch (err) {
    return { errors: [err] };
  }
  const errors = enveloped.validate(enveloped.schema, document);
  if (errors.length) return { errors };
  return { document, contextValue: await enveloped.contextFactory() };
}
