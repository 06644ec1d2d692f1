/**
 * A bounded memo for pure functions of one string key. Program-address searches cost about 0.2–1 ms each and hot paths
 * (every 402 challenge, every verify, every read of a link) ask for the same few addresses again and again, so a hit
 * must cost one lookup and no write: two generations, the recent one and the one before it. A hit in the recent one is
 * returned as it is; a hit in the older one is copied up; when the recent one holds half the bound it becomes the older
 * one, and what the previous older one held and nobody asked for since is dropped. At most `maxEntries` entries.
 */
export function memoize<T>(fn: (key: string) => T, maxEntries = 4096): (key: string) => T {
  const half = Math.max(1, Math.floor(maxEntries / 2));
  let recent = new Map<string, T>();
  let older = new Map<string, T>();
  return (key) => {
    let value = recent.get(key);
    if (value !== undefined) return value;
    value = older.get(key);
    if (value === undefined) value = fn(key);
    if (recent.size >= half) {
      older = recent;
      recent = new Map();
    }
    recent.set(key, value);
    return value;
  };
}
