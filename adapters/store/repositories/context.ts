import { createHash } from 'node:crypto';
import { UniqueConstraintViolationException, type EntityManager, type Knex, type MikroORM } from '@mikro-orm/postgresql';
import { tagQuery } from '../request-scope.ts';
import type { ProcessOwner } from '../process-owner.ts';

// Repository style: one raw-SQL repository per file in this folder, its row type (the columns as
// PostgreSQL returns them) and its row→record mapper next to it; the migration SQL is the table's one definition.
// Statements run through the MikroORM connection with bound `?` parameters, never values spliced into the text.

/** What a repository runs on: the EntityManager of the call (a fresh fork) or of the open transaction. */
export interface RepoContext {
  readonly em: () => EntityManager;
  /** true inside store.transaction: reads that precede a write lock their row */
  readonly inTransaction: boolean;
  /** this process's liveness number for the claims it takes (none: claims are held by their lease only) */
  readonly owner: ProcessOwner | undefined;
  /**
   * The hot reads: one statement (`$n` parameters) on a pooled node-postgres connection of the pool `em()` would
   * use, without a fork or a query builder; tagged and refused after its request stopped as every statement is.
   * Absent in a transaction (its statements run on the transaction's connection).
   */
  readonly raw?: (<T>(text: string, values: unknown[]) => Promise<T[]>) | undefined;
}

interface PooledClient {
  query(text: string | { name?: string; text: string; values: readonly unknown[] }, values?: unknown[]): Promise<{ rows: unknown[] }>;
  __knex__disposed?: unknown;
}
interface KnexClient {
  acquireConnection(): Promise<PooledClient>;
  releaseConnection(connection: PooledClient): Promise<void>;
}

/** `raw` over a MikroORM's pool (its knex client's tarn pool: the same connections, settings and limits). */
export function rawOn(orm: () => MikroORM): <T>(text: string, values: unknown[]) => Promise<T[]> {
  return async <T>(text: string, values: unknown[]): Promise<T[]> => {
    const sql = tagQuery(text);
    const client = orm().em.getConnection().getKnex().client as unknown as KnexClient;
    const connection = await client.acquireConnection();
    try {
      return (await connection.query(sql, values)).rows as T[];
    } catch (e) {
      // not an answer of the server (the socket broke): the pool must not hand this connection out again (as knex does)
      if (!(e as { code?: unknown }).code) connection.__knex__disposed = e;
      throw e;
    } finally {
      await client.releaseConnection(connection);
    }
  };
}

/** `?` placeholders as `$n`, and a name per text: each connection parses and plans a hot statement once. */
const namedStatements = new Map<string, { name: string; text: string }>();
function namedOf(sql: string): { name: string; text: string } {
  let named = namedStatements.get(sql);
  if (!named) {
    let n = 0;
    const text = sql.replace(/\?/g, () => `$${++n}`);
    named = { name: `svc_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text };
    namedStatements.set(sql, named);
  }
  return named;
}

/**
 * A hot statement as a named prepared statement (PostgreSQL's extended protocol: parsed and planned once per
 * connection, its values bound, never in the text), on `em`'s transaction connection when it has one, else on a pooled
 * one — without MikroORM's formatting or knex's runner. `sql` uses `?` for its parameters and holds no other `?`.
 * Inside a request's scope the statement carries the request's tag (so it can be cancelled by it) and goes unnamed.
 */
export function prepared<T>(em: EntityManager, sql: string, values: readonly unknown[]): Promise<T[]> {
  const trx = em.getTransactionContext<Knex.Transaction>();
  return runNamed<T>((trx ?? em.getConnection().getKnex()).client as unknown as KnexClient, { inTransaction: trx !== undefined, sql, values });
}

/** `prepared` on a pooled connection of `orm`, never in a transaction (a statement that is its own unit of work). */
export function preparedOnPool<T>(orm: MikroORM, sql: string, values: readonly unknown[]): Promise<T[]> {
  return runNamed<T>(orm.em.getConnection().getKnex().client as unknown as KnexClient, { inTransaction: false, sql, values });
}

async function runNamed<T>(client: KnexClient, statement: { inTransaction: boolean; sql: string; values: readonly unknown[] }): Promise<T[]> {
  const { inTransaction, values } = statement;
  const { name, text } = namedOf(statement.sql);
  const tagged = tagQuery(text);
  const config = tagged === text ? { name, text, values } : { text: tagged, values };
  const connection = await client.acquireConnection();
  try {
    return (await connection.query(config)).rows as T[];
  } catch (e) {
    if (!inTransaction && !(e as { code?: unknown }).code) connection.__knex__disposed = e;
    throw e;
  } finally {
    await client.releaseConnection(connection);
  }
}

/** Runs one statement with bound parameters and answers its rows. */
export function query<T>(em: EntityManager, sql: string, params: readonly unknown[] = []): Promise<T[]> {
  return em.execute(sql, params as unknown[]) as Promise<T[]>;
}

/**
 * `query` with the parameters sent apart from the text (PostgreSQL's bind message), for statements with a large parameter
 * (a batch as one JSON document): MikroORM's `execute` writes every parameter into the text as an escaped literal, built
 * character by character (the per-request usage and rate-limit batches made ~11 kB of garbage per keyed read
 * that way). Tagged, and refused after its request stopped, as every statement is; in the em's transaction when it has one.
 */
export async function bound<T>(em: EntityManager, sql: string, params: readonly unknown[] = []): Promise<T[]> {
  const statement = em
    .getConnection()
    .getKnex()
    .raw(tagQuery(sql), params as readonly Knex.RawBinding[]);
  const trx = em.getTransactionContext();
  if (trx) statement.transacting(trx);
  return ((await statement) as { rows: T[] }).rows;
}

/** Runs a write; a unique-constraint violation becomes the error `conflict()` builds (a domain error). */
export async function uniqueOr<T>(write: Promise<T>, conflict: () => Error): Promise<T> {
  try {
    return await write;
  } catch (e) {
    // MikroORM's exception, or the driver's unique_violation from a `prepared` statement
    if (e instanceof UniqueConstraintViolationException || (e as { code?: unknown }).code === '23505') throw conflict();
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
