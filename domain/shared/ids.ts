import { monotonicFactory } from 'ulid';

const next = monotonicFactory();

/** ULID: time-ordered, 26 characters, Crockford base32. */
export function newId(now: number = Date.now()): string {
  return next(now);
}

export const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;
