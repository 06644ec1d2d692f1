import { z } from 'zod';
import { DomainError } from './errors.ts';

// DECISIONS "Wire conventions": limit default 50, max 200; opaque base64url cursors.
export const Limit = z.coerce.number().int().min(1).max(200).default(50).describe('page size: default 50, at most 200');
export const Cursor = z.string().max(512).describe('the next_cursor of the previous page (opaque); omitted for the first page');

export function listEnvelope<T extends z.ZodType>(item: T) {
  return z.object({
    data: z.array(item).describe('the items of this page'),
    next_cursor: z.string().nullable().describe('pass as cursor for the next page; null on the last page'),
    has_more: z.boolean().describe('whether another page follows'),
  });
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
  has_more: boolean;
}

export function encodeCursor(value: Record<string, string | number>): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

export function decodeCursor<T extends z.ZodType>(schema: T, cursor: string): z.output<T> {
  try {
    return schema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    throw DomainError.invalid([{ path: 'cursor', message: 'Malformed cursor', code: 'invalid_cursor' }], 'Malformed cursor.');
  }
}

/** Given `limit + 1` rows, builds the envelope; `cursorOf` encodes the last row returned. */
export function toPage<R, T>(rows: R[], limit: number, map: (row: R) => T, cursorOf: (row: R) => string): Page<T> {
  const has_more = rows.length > limit;
  const kept = has_more ? rows.slice(0, limit) : rows;
  const last = kept[kept.length - 1];
  return { data: kept.map(map), next_cursor: has_more && last ? cursorOf(last) : null, has_more };
}

/**
 * DECISIONS "Wire conventions": every list route answers the list envelope. A list the gateway bounds itself (the
 * networks, the stables, the event kinds, an agent's capability cards) is one complete page.
 */
export function bounded<T>(data: T[]): Page<T> {
  return { data, next_cursor: null, has_more: false };
}
