import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext, TestFn } from 'ava';
import { MPL_CORE_PROGRAM_ID } from '../../domain/treasury/derive.ts';

// The real Metaplex Core binary is third-party compiled code kept outside the repository (../shared/programs,
// see its README). Tests that execute it ask for it here: on a machine without it they are registered as skipped with
// a title saying how to enable them — unless SVC_REQUIRE_PROGRAMS=1 (.ci/run), where a missing binary FAILS them.

const REPO = fileURLToPath(new URL('../..', import.meta.url));
/** where the binaries are kept next to the repository: ../shared/programs */
export const DEFAULT_PROGRAMS_DIR = resolve(REPO, '..', 'shared', 'programs');

/** a directory holds Core as <id>.so or <id>.so.gz */
export function holdsCore(dir: string): boolean {
  return existsSync(resolve(dir, `${MPL_CORE_PROGRAM_ID}.so.gz`)) || existsSync(resolve(dir, `${MPL_CORE_PROGRAM_ID}.so`));
}

/**
 * The directory of program binaries for the embedded ledgers: SVC_LEDGER_PROGRAMS when set (made absolute), else
 * ../shared/programs next to the repository when it holds the Core file, else null.
 */
export function programsDir(): string | null {
  const env = process.env.SVC_LEDGER_PROGRAMS?.trim();
  if (env) return resolve(REPO, env);
  return holdsCore(DEFAULT_PROGRAMS_DIR) ? DEFAULT_PROGRAMS_DIR : null;
}

/** the directory only when it really holds Core (SVC_LEDGER_PROGRAMS may name one that does not) */
export function coreProgramsDir(): string | null {
  const dir = programsDir();
  return dir && holdsCore(dir) ? dir : null;
}

export const ENABLE_HINT = `set SVC_LEDGER_PROGRAMS to a directory holding ${MPL_CORE_PROGRAM_ID}.so(.gz), e.g. ../shared/programs`;

/**
 * A test that runs the Metaplex Core binary: `fn` gets the programs directory. Without the binary it FAILS when
 * SVC_REQUIRE_PROGRAMS=1, else it is registered as skipped with a title saying how to enable it.
 */
export function metaplexTest<C = unknown>(test: TestFn<C>, title: string, fn: (t: ExecutionContext<C>, dir: string) => Promise<void> | void): void {
  const dir = coreProgramsDir();
  if (dir) {
    test(title, (t) => fn(t, dir));
    return;
  }
  if (process.env.SVC_REQUIRE_PROGRAMS === '1') {
    test(title, (t) => {
      t.fail(
        `SVC_REQUIRE_PROGRAMS=1 but the Metaplex Core binary is missing: ${ENABLE_HINT} (SVC_LEDGER_PROGRAMS=${process.env.SVC_LEDGER_PROGRAMS ?? '(unset)'})`,
      );
    });
    return;
  }
  test.skip(`${title} [skipped: no Metaplex Core binary; ${ENABLE_HINT}]`, () => {});
}
