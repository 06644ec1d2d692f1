import type { z } from 'zod';
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
  const where = first?.path.length ? ` at ${first.path.map(String).join('.')}` : '';
  return DomainError.invalid(toIssues(error), `Invalid request${where}: ${first?.message ?? 'schema mismatch'}`);
}

/** Parses with a schema and throws `invalid_request` on failure. */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw invalidFromZod(result.error);
  return result.data;
}

/** How deep any request value may nest (objects and arrays); deeper input is refused before anything walks it recursively. */
export const MAX_INPUT_DEPTH = 64;

/** A NUL (PostgreSQL text and jsonb refuse it) or an unpaired UTF-16 surrogate (not text in any encoding). */
const UNSAFE_TEXT = /[\0\p{Cs}]/u;

const unsafeTextMessage = (s: string) =>
  s.includes('\0') ? 'Text must not contain a NUL character (\\u0000)' : 'Text must be well-formed Unicode (no unpaired surrogate)';

/**
 * Issues for every string (and object key) holding a NUL or a lone surrogate, every non-finite number (JSON's 1e400
 * parses to Infinity) and nesting beyond MAX_INPUT_DEPTH, anywhere in a request value. Iterative, so hostile depth cannot overflow the stack.
 */
export function unsafeInputIssues(value: unknown, maxIssues = 20): Issue[] {
  const issues: Issue[] = [];
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path: '', depth: 0 }];
  const join = (path: string, key: string) => (path ? `${path}.${key}` : key);
  while (stack.length > 0 && issues.length < maxIssues) {
    const { value: v, path, depth } = stack.pop()!;
    if (typeof v === 'string') {
      if (UNSAFE_TEXT.test(v)) issues.push({ path, message: unsafeTextMessage(v), code: 'invalid_text' });
      continue;
    }
    if (typeof v === 'number' && !Number.isFinite(v)) {
      issues.push({ path, message: 'Numbers must be finite (this one is beyond a double)', code: 'invalid_number' });
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= MAX_INPUT_DEPTH) {
      issues.push({ path, message: `Values nest at most ${MAX_INPUT_DEPTH} levels deep`, code: 'too_deep' });
      continue;
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: join(path, String(i)), depth: depth + 1 });
      continue;
    }
    const entries = Object.entries(v);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!;
      if (UNSAFE_TEXT.test(key)) {
        issues.push({ path, message: `Key ${JSON.stringify(key)}: ${unsafeTextMessage(key)}`, code: 'invalid_text' });
        continue;
      }
      stack.push({ value: child, path: join(path, key), depth: depth + 1 });
    }
  }
  return issues;
}

/**
 * Refuses, as `invalid_request` with the paths, any request value holding text no store can keep (NUL, lone
 * surrogates), a number no JSON can carry back (Infinity) or nesting past MAX_INPUT_DEPTH. Applied once to every procedure's raw input (body, path and query
 * parameters alike) before its schema, service or repository sees it.
 */
export function refuseUnsafeInput(value: unknown): void {
  const issues = unsafeInputIssues(value);
  const first = issues[0];
  if (first) throw DomainError.invalid(issues, `Invalid request${first.path ? ` at ${first.path}` : ''}: ${first.message}`);
}
