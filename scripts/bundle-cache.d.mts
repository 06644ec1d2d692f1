// Types of scripts/bundle-cache.mjs (plain JavaScript: run.mjs loads it before any TypeScript can run).

/** Builds, in one run, those of `entries` (paths from the repository's root, or absolute) whose bundle is missing or stale. */
export function prepareBundles(entries: readonly string[]): Promise<void>;
/** The path of `entry`'s bundle (an absolute path), built first if missing or stale. */
export function bundleOf(entry: string): Promise<string>;
/** Every entry the npm scripts run through scripts/run.mjs, read from package.json, as paths from the repository's root. */
export function scriptEntries(): Promise<string[]>;
