import test from 'ava';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { appRouter } from '../interfaces/trpc/router.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { coreProgramsDir, ENABLE_HINT } from './support/programs.ts';
import { anchorsOf, exampleText, readBlocks, relativeLinks, type Block } from './support/readme.ts';
import { spawnChild } from './support/children.ts';

// STYLE habit 18: what the README shows is run by the suite. Every fenced block of README.md is one of:
//   - a shell block, run here verbatim (but for SUBSTITUTIONS) against a real gateway started as `npm start` starts
//     it, in one shell session's worth of variables (a block sees what earlier blocks set, as in a terminal);
//   - `<!-- readme: example examples/x.ts[#region] -->`: the text of that file, which test/examples.test.ts runs;
//   - `<!-- readme: skip REASON -->`: not run, for the reason given (listed in this test's log).
// A block that is none of these fails the suite. README_UPDATE=1 rewrites the example blocks from their files and
// the procedure table of docs/client-package.md from the router, instead of failing on a difference.

const REPO = fileURLToPath(new URL('..', import.meta.url));
const README = join(REPO, 'README.md');
const UPDATE = process.env.README_UPDATE === '1';
const blocks = readBlocks(readFileSync(README, 'utf8'));
const runnable = blocks.filter((b) => b.role.kind === 'run');

const firstLine = (b: Block) =>
  b.text
    .split('\n')
    .find((l) => l.trim() !== '')
    ?.trim() ?? '';

test('every README block is run, is an examples/ file, or is marked skip with a reason', (t) => {
  const problems = blocks.flatMap((b) => {
    if (b.role.kind === 'unmarked')
      return [
        `README.md:${b.line}: a \`${b.lang || 'plain'}\` block is neither run (sh/bash) nor marked (<!-- readme: example PATH --> or <!-- readme: skip REASON -->)`,
      ];
    if (b.role.kind === 'invalid') return [`README.md:${b.line}: ${b.role.problem}`];
    return [];
  });
  t.deepEqual(problems, []);
  for (const b of blocks) if (b.role.kind === 'skip') t.log(`not run: README.md:${b.line} \`${firstLine(b)}\` — ${b.role.reason}`);
  t.true(runnable.length > 0);
});

test('README example blocks are the text of their examples/ files', (t) => {
  const examples = blocks.filter((b): b is Block & { role: { kind: 'example'; path: string; region?: string } } => b.role.kind === 'example');
  t.true(examples.length > 0);
  const problems: string[] = [];
  const lines = readFileSync(README, 'utf8').split('\n');
  // Last block first, so earlier line numbers stay valid while rewriting.
  for (const b of [...examples].reverse()) {
    const path = resolve(REPO, b.role.path);
    if (!existsSync(path)) {
      problems.push(`README.md:${b.line}: ${b.role.path} does not exist`);
      continue;
    }
    const want = exampleText(readFileSync(path, 'utf8'), b.role.region);
    if (want === undefined) {
      problems.push(`README.md:${b.line}: ${b.role.path} has no region "${b.role.region}" (// #region ${b.role.region} … // #endregion)`);
    } else if (want !== b.text) {
      if (UPDATE) lines.splice(b.textStart - 1, b.textEnd - b.textStart + 1, ...want.split('\n'));
      else
        problems.push(
          `README.md:${b.line}: the block differs from ${b.role.path}${b.role.region ? `#${b.role.region}` : ''} (README_UPDATE=1 npx ava test/readme.test.ts copies the file in)`,
        );
    }
  }
  if (UPDATE) writeFileSync(README, lines.join('\n'));
  t.deepEqual(problems, []);
});

test('every relative link in README.md and docs/*.md names an existing file and heading', (t) => {
  const files = [
    README,
    ...readdirSync(join(REPO, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => join(REPO, 'docs', f)),
  ];
  const problems: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const { line, target } of relativeLinks(text)) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const destination = path ? resolve(dirname(file), decodeURIComponent(path)) : file;
      const where = `${relative(REPO, file)}:${line} → ${target}`;
      if (!existsSync(destination)) {
        problems.push(`${where}: no such file`);
        continue;
      }
      if (anchor && destination.endsWith('.md') && !anchorsOf(readFileSync(destination, 'utf8')).has(anchor)) {
        problems.push(`${where}: no heading with that anchor`);
      }
    }
  }
  t.deepEqual(problems, []);
});

// docs/client-package.md lists every procedure of the router, generated from it: the table between the markers.
const PROCEDURES_START = '<!-- procedures:start (generated from the router by test/readme.test.ts) -->';
const PROCEDURES_END = '<!-- procedures:end -->';

function procedureTable(): string {
  const procedures = (
    appRouter as unknown as {
      _def: { procedures: Record<string, { _def: { type: string; meta?: { openapi?: { method: string; path: string; summary?: string } } } }> };
    }
  )._def.procedures;
  const rows = Object.entries(procedures).map(([name, p]) => {
    const openapi = p._def.meta?.openapi;
    // the one line is the procedure's summary, the same as the REST operation's in /openapi.json
    const line = (openapi?.summary ?? '').replaceAll('|', '\\|');
    return `| \`${name}\` | ${p._def.type} | ${openapi ? `\`${openapi.method} ${openapi.path}\`` : '(tRPC only)'} | ${line} |`;
  });
  return ['| procedure | kind | REST | what it does |', '|---|---|---|---|', ...rows].join('\n');
}

test('docs/client-package.md lists exactly the tRPC procedures of the router', (t) => {
  const path = join(REPO, 'docs', 'client-package.md');
  const text = readFileSync(path, 'utf8');
  const start = text.indexOf(PROCEDURES_START);
  const end = text.indexOf(PROCEDURES_END);
  t.true(start !== -1 && end > start, `docs/client-package.md needs the markers ${PROCEDURES_START} … ${PROCEDURES_END}`);
  const listed = text.slice(start + PROCEDURES_START.length, end).trim();
  const table = procedureTable();
  if (listed !== table && UPDATE) {
    writeFileSync(path, `${text.slice(0, start + PROCEDURES_START.length)}\n${table}\n${text.slice(end)}`);
    return t.pass();
  }
  t.is(listed, table, 'the procedure table is stale (README_UPDATE=1 npx ava test/readme.test.ts regenerates it)');
});

// ---- The runnable blocks, against a real gateway ----

// What a reader's machine has and the test's does not, replaced in the block text before it runs. Each must be used.
interface Substitution {
  why: string;
  from: RegExp;
  to: (app: TestApp) => string;
}
const SUBSTITUTIONS: Substitution[] = [
  { why: 'npm start listens on PORT 8080; the test gateway on a free port', from: /http:\/\/localhost:8080/g, to: (app) => app.url },
  {
    why: 'npm start serves the embedded devnet JSON-RPC on SVC_DEVNET_RPC_PORT 8899; the test gateway on a free port',
    from: /http:\/\/127\.0\.0\.1:8899/g,
    to: (app) => app.ledgers.rpcUrls['chain-devnet']!,
  },
  {
    why: 'npm run programs copies from Solana’s public devnet; the suite never calls a public address, so the source is the test gateway’s own devnet JSON-RPC, which loaded the programs from the shared directory — Metaplex Core only (the Agent Registry binaries are not there)',
    from: /^npm run programs$/gm,
    to: (app) => `npm run programs -- --from ${app.ledgers.rpcUrls['chain-devnet']} --program mpl-core`,
  },
];

let app: TestApp | undefined;
let session: string | undefined;

test.before(async () => {
  if (!runnable.length || !coreProgramsDir()) return;
  // The gateway as `npm start` runs it: its own embedded PostgreSQL in its data directory (npm run keys reaches it
  // there), both embedded ledgers, the job runner inline, Metaplex Core from the shared programs directory.
  app = await startTestApp({ embeddedPostgres: true });
  // `npm start` (interfaces/main.ts) announces the gateway in <data dir>/gateway.json for npm run demo / pay / keys;
  // startTestApp builds the app below main.ts, so announce it the same way unless the app already did.
  const announcement = join(app.dataDir, 'gateway.json');
  if (!existsSync(announcement))
    await writeFile(announcement, JSON.stringify({ pid: process.pid, url: app.url, started_at: new Date().toISOString(), rpc_urls: app.ledgers.rpcUrls }));
  session = await mkdtemp(join(tmpdir(), 'svc-readme-'));
});

test.after.always(async () => {
  if (session) await rm(session, { recursive: true, force: true });
});

test('each substitution the README test makes is used by a runnable block', (t) => {
  for (const s of SUBSTITUTIONS)
    t.true(
      runnable.some((b) => new RegExp(s.from.source, s.from.flags.replace('g', '')).test(b.text)),
      `unused substitution ${s.from} (${s.why})`,
    );
});

function substitute(text: string, gateway: TestApp): string {
  return SUBSTITUTIONS.reduce((out, s) => out.replace(s.from, s.to(gateway)), text);
}

/**
 * Runs one block in bash from the repository root, as a reader's terminal would, with the variables and functions
 * earlier blocks left (kept in a file between blocks: each block is its own process so one failure names its block).
 * `set -eo pipefail` so a failing command fails its block rather than passing an empty value on.
 */
function runBlock(text: string, state: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const script = [
    'set -eo pipefail',
    `if [ -f ${JSON.stringify(state)} ]; then source ${JSON.stringify(state)}; fi`,
    'set -a', // every variable a block sets is kept for the next ones (a reader's shell keeps them too)
    text,
    'set +a',
    `{ export -p; declare -f; } > ${JSON.stringify(`${state}.next`)}`,
    `mv ${JSON.stringify(`${state}.next`)} ${JSON.stringify(state)}`,
  ].join('\n');
  return new Promise((done, fail) => {
    const child = spawnChild('bash', ['-c', script], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, output }));
  });
}

for (const block of runnable) {
  const title = `README.md:${block.line} runs: ${firstLine(block)}`;
  if (!coreProgramsDir()) {
    if (process.env.SVC_REQUIRE_PROGRAMS === '1') test.serial(title, (t) => t.fail(`the Metaplex Core binary is missing: ${ENABLE_HINT}`));
    else test.serial.skip(`${title} [skipped: no Metaplex Core binary; ${ENABLE_HINT}]`, () => {});
    continue;
  }
  test.serial(title, async (t) => {
    // A bound for a stuck child only (npm run demo mints, funds and pays on a shared machine); nothing waits on it.
    t.timeout(10 * 60_000);
    const gateway = app!;
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, LANG: process.env.LANG ?? 'C.UTF-8', SVC_DATA_DIR: gateway.dataDir };
    const { code, output } = await runBlock(substitute(block.text, gateway), join(session!, 'shell-state'), env);
    t.log(output.trim().split('\n').slice(-15).join('\n'));
    t.is(code, 0, `README.md:${block.line} exited with ${code}`);
    if (block.role.kind === 'run' && block.role.expect)
      t.true(output.includes(block.role.expect), `README.md:${block.line}: the output lacks "${block.role.expect}"`);
  });
}
