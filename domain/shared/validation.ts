import { z } from 'zod';
import { DomainError, type Issue } from './errors.ts';

/** zod issues → the `details.issues` of an `invalid_request` (hosted-api §7). */
export function toIssues(error: z.ZodError): Issue[] {
  return error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
    code: issue.code,
  }));
}

export function invalidFromZod(error: z.ZodError): DomainError {
  const first = error.issues[0];
  const where = first && first.path.length ? ` at ${first.path.map(String).join('.')}` : '';
  return DomainError.invalid(toIssues(error), `Invalid request${where}: ${first?.message ?? 'schema mismatch'}`);
}

/** Parses with a schema and throws `invalid_request` on failure. */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw invalidFromZod(result.error);
  return result.data;
}
