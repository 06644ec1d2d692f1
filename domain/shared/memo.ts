/**
 * A bounded least-recently-used memo for pure functions of one string key. Program-address searches cost about
 * 0.2–1 ms each and hot paths (every 402 challenge, every verify) ask for the same few addresses again and again.
 */
export function memoize<T>(fn: (key: string) => T, maxEntries = 4096): (key: string) => T {
  const cache = new Map<string, T>();
  return (key) => {
    const hit = cache.get(key);
    if (hit !== undefined) {
      // Map iteration order is insertion order: re-inserting marks the entry most recent.
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
    const value = fn(key);
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
    cache.set(key, value);
    return value;
  };
}
