// Waiting on a condition, never on the clock: under load (a 2-core machine running two test files and their apps)
// anything can take many times longer than on an idle one, so a test waits for what it needs however long that takes,
// and a condition that never comes true is AVA's own timeout to report (ava.config.mjs), not a deadline here.

/**
 * Polls `check` until it answers a value other than undefined or false, and answers that value. `what` names the wait
 * (for the reader; a hung wait shows in AVA's timeout report as the test that did not finish). `everyMs` spaces the
 * polls: HTTP polls of a rate-limited bucket want a longer one.
 */
export async function until<T>(
  _what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  options: { everyMs?: number } = {},
): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    await new Promise((r) => setTimeout(r, options.everyMs ?? 50));
  }
}

/**
 * Settles as `work` does, or fails if a timer of `laterMs` set now fires first. For "the short deadline fired, not the
 * long default" without a wall-clock bound: timers fire in the order they are due and the code's own rejection runs
 * before the next timer's callback, so a 200 ms deadline inside `work` always beats a 10 s timer set here, however late a
 * loaded machine runs both. `laterMs` is the default the test tells apart (it must be well above the deadline).
 */
export async function settlesBefore<T>(work: Promise<T>, laterMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const later = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: a ${laterMs} ms timer fired first`)), laterMs);
  });
  try {
    return await Promise.race([work, later]);
  } finally {
    clearTimeout(timer);
  }
}
