import { UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import type { ProcessOwner } from '../process-owner.ts';

// Repository style (issue 18 item 3): one raw-SQL repository per file in this folder, its row type (the columns as
// PostgreSQL returns them) and its row→record mapper next to it; the migration SQL is the table's one definition.
// Statements run through the MikroORM connection with bound `?` parameters, never values spliced into the text.

/** What a repository runs on: the EntityManager of the call (a fresh fork) or of the open transaction. */
export interface RepoContext {
  readonly em: () => EntityManager;
  /** true inside store.transaction: reads that precede a write lock their row */
  readonly inTransaction: boolean;
  /** this process's liveness number for the claims it takes (none: claims are held by their lease only) */
  readonly owner: ProcessOwner | undefined;
}

/** Runs one statement with bound parameters and answers its rows. */
export function query<T>(em: EntityManager, sql: string, params: readonly unknown[] = []): Promise<T[]> {
  return em.execute(sql, params as unknown[]) as Promise<T[]>;
}

/** Runs a write; a unique-constraint violation becomes the error `conflict()` builds (a domain error). */
export async function uniqueOr<T>(write: Promise<T>, conflict: () => Error): Promise<T> {
  try {
    return await write;
  } catch (e) {
    if (e instanceof UniqueConstraintViolationException) throw conflict();
    throw e;
  }
}

/** A timestamp column as a Date (the driver already answers Dates; this keeps the mappers independent of it). */
export const date = (v: Date | string): Date => (v instanceof Date ? v : new Date(v));
export const dateOrNull = (v: Date | string | null): Date | null => (v === null ? null : date(v));

/** A conjunction of predicates with their bound values, for queries whose filters are optional. */
export class Where {
  private readonly parts: string[] = [];
  readonly params: unknown[] = [];

  /** adds `sql` (with `?` for each of `values`) */
  and(sql: string, ...values: unknown[]): this {
    this.parts.push(sql);
    this.params.push(...values);
    return this;
  }

  get sql(): string {
    return this.parts.join(' and ');
  }
}

/** The first row of a query mapped to its record, or null when there is none. */
export async function one<R, T>(em: EntityManager, sql: string, params: readonly unknown[], map: (row: R) => T): Promise<T | null> {
  const rows = await query<R>(em, sql, params);
  return rows[0] ? map(rows[0]) : null;
}

/** How many rows a write (insert, update or delete, without `returning`) touched, counted in the database. */
export async function affected(em: EntityManager, sql: string, params: readonly unknown[]): Promise<number> {
  const rows = await query<{ n: number }>(em, `with w as (${sql} returning 1) select count(*)::int as n from w`, params);
  return rows[0]!.n;
}

/** The suffix that locks the rows a read selects when it runs inside a transaction (a write follows it there). */
export const lockedInTransaction = (ctx: RepoContext): string => (ctx.inTransaction ? ' for update' : '');
