import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';

// The explorer's browser test drives Chromium through playwright-core, which downloads no browser of its own (the
// machines reach package registries only): it runs Debian's `chromium` package. One lookup serves the test and
// `npm test`'s pretest step (scripts/ensure-chromium.ts), so both agree on which binary "is installed".

/** what a person does when Chromium is missing and the pretest step cannot install it */
export const CHROMIUM_HELP = "install Debian's package (`sudo apt-get update && sudo apt-get install chromium`), or set SVC_CHROMIUM=/path/to/chrome";

export type ChromiumLookup =
  | { found: true; path: string }
  /** `overridden`: SVC_CHROMIUM is set, so nothing else is looked for (a wrong override is never silently replaced) */
  | { found: false; overridden: boolean; problem: string };

/** an executable regular file (a directory named `chromium` on PATH is not one) */
export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** the first executable `name` in the PATH of `env`, as the shell would find it; null when there is none */
export function onPath(name: string, env: NodeJS.ProcessEnv = process.env): string | null {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const file = join(dir, name);
    if (isExecutable(file)) return file;
  }
  return null;
}

/** SVC_CHROMIUM when set (made absolute), else `chromium` on PATH */
export function findChromium(env: NodeJS.ProcessEnv = process.env): ChromiumLookup {
  const override = env.SVC_CHROMIUM?.trim();
  if (override) {
    const path = resolve(override);
    return isExecutable(path) ? { found: true, path } : { found: false, overridden: true, problem: `SVC_CHROMIUM=${override} is not an executable file` };
  }
  const path = onPath('chromium', env);
  return path ? { found: true, path } : { found: false, overridden: false, problem: 'chromium is not on PATH' };
}

/** the browser for a test, or an error saying what to do */
export function chromiumOrThrow(env: NodeJS.ProcessEnv = process.env): string {
  const lookup = findChromium(env);
  if (lookup.found) return lookup.path;
  throw new Error(
    `The explorer's browser test needs Chromium: ${lookup.problem}. ${CHROMIUM_HELP} (\`npm test\` installs it itself when run as root on Debian).`,
  );
}
