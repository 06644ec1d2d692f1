import { randomBytes } from 'node:crypto';
import { monotonicFactory } from 'ulid';

const next = monotonicFactory();

/** ULID: time-ordered, 26 characters, Crockford base32. Fresh randomness each millisecond (ids of stored things). */
export function newId(now: number = Date.now()): string {
  return next(now);
}

export const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** the 80-bit random part as 16 base-32 digits, drawn once per process and then counted up */
const counter: number[] = [...randomBytes(16)].map((b) => b & 31);
let lastTime = -1;
let timePart = '';
let randomPart = counter.map((d) => CROCKFORD[d]).join('');

/**
 * A cheap ULID for request ids and usage records (per-character randomness made id generation a visible part of a read's CPU): the
 * random part is drawn once per process and incremented for each id, so ids are unique in the process (and ordered while
 * the clock does not step back), and two processes collide only if their 80-bit seeds do. Predictable from one another — never use it for anything
 * secret or for an id that must not be guessed.
 */
export function newRequestId(now: number = Date.now()): string {
  if (now !== lastTime) {
    lastTime = now;
    let t = now;
    let s = '';
    for (let i = 0; i < 10; i++) {
      s = CROCKFORD[t % 32]! + s;
      t = Math.floor(t / 32);
    }
    timePart = s;
  }
  let i = 15;
  for (; i >= 0; i--) {
    if (counter[i]! < 31) {
      counter[i]!++;
      break;
    }
    counter[i] = 0;
  }
  // only the digits from the one that moved on are written again (usually just the last one)
  const from = Math.max(i, 0);
  let tail = '';
  for (let j = from; j < 16; j++) tail += CROCKFORD[counter[j]!];
  randomPart = randomPart.slice(0, from) + tail;
  return timePart + randomPart;
}
