// `npm run bench`: every `bench:*` script of package.json in turn (BENCH_ONLY=reads,paywall runs those only), their
// output streamed as it comes; each bench prints, per goal row, one line `RATIO|<path>|<gateway>|<baseline>|<ratio>|<goal>`
// (COMMON.md). The lines are collected and printed as one table at the end. A new `bench:<name>` script is
// picked up from package.json with no edit here. Exits non-zero when a bench failed (its rows are then missing).
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface RatioRow {
  bench: string;
  path: string;
  gateway: string;
  baseline: string;
  ratio: string;
  goal: string;
  /** true / false when both the ratio and the goal read as numbers; undefined otherwise */
  met: boolean | undefined;
}

/** A `RATIO|…` line as a row, or undefined for any other line. */
export function parseRatio(bench: string, line: string): RatioRow | undefined {
  if (!line.startsWith('RATIO|')) return undefined;
  const [, path = '', gateway = '', baseline = '', ratio = '', goal = ''] = line.trimEnd().split('|');
  return { bench, path, gateway, baseline, ratio, goal, met: meets(ratio, goal) };
}

/** "0.52×" against "≥ 0.5×" (also ">=", "≤", "<="); undefined when either is not a number. */
export function meets(ratio: string, goal: string): boolean | undefined {
  const value = Number.parseFloat(ratio.replace(/[^0-9.eE+-]/g, ''));
  const m = /^\s*(≥|>=|≤|<=)?\s*([0-9.]+)/.exec(goal);
  if (!Number.isFinite(value) || !m) return undefined;
  const target = Number(m[2]);
  return m[1] === '≤' || m[1] === '<=' ? value <= target : value >= target;
}

/** The table printed at the end. */
export function table(rows: RatioRow[]): string {
  const head = ['path', 'gateway', 'baseline', 'ratio', 'goal', 'met?'];
  const cells = rows.map((r) => [r.path, r.gateway, r.baseline, r.ratio, r.goal, r.met === undefined ? '?' : r.met ? 'yes' : 'NO']);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)].join('\n');
}

/** The `bench:*` scripts of package.json, in file order, filtered by BENCH_ONLY (names without the prefix). */
export function benchScripts(scripts: Record<string, string>, only: string | undefined): string[] {
  const wanted = only
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return Object.keys(scripts)
    .filter((name) => name.startsWith('bench:'))
    .filter((name) => !wanted?.length || wanted.includes(name.slice('bench:'.length)));
}

/** Runs one script with npm, streaming its output; answers its exit code and the RATIO rows it printed. */
function runScript(name: string): Promise<{ code: number; rows: RatioRow[] }> {
  return new Promise((resolve) => {
    const rows: RatioRow[] = [];
    const child = spawn('npm', ['run', '--silent', name], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    let rest = '';
    child.stdout.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      const text = rest + chunk.toString('utf8');
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) {
        const r = parseRatio(name.slice('bench:'.length), l);
        if (r) rows.push(r);
      }
    });
    child.once('close', (code) => {
      const r = parseRatio(name.slice('bench:'.length), rest);
      if (r) rows.push(r);
      resolve({ code: code ?? 1, rows });
    });
    child.once('error', () => resolve({ code: 1, rows }));
  });
}

async function main(): Promise<void> {
  const pkg = JSON.parse(await readFile(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string> };
  const scripts = benchScripts(pkg.scripts, process.env.BENCH_ONLY);
  if (!scripts.length) {
    console.error(`no bench:* script matches BENCH_ONLY=${process.env.BENCH_ONLY ?? ''}`);
    process.exit(2);
  }
  const rows: RatioRow[] = [];
  const failed: string[] = [];
  for (const name of scripts) {
    console.log(`\n===== npm run ${name} =====`);
    const started = Date.now();
    const { code, rows: got } = await runScript(name);
    rows.push(...got);
    console.log(`===== ${name}: exit ${code}, ${((Date.now() - started) / 1000).toFixed(0)} s, ${got.length} RATIO row(s) =====`);
    if (code !== 0) failed.push(`${name} (exit ${code})`);
  }
  console.log(
    `\nmachine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), node ${process.version}, load ${os
      .loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
  console.log(`benches run: ${scripts.join(', ')}`);
  console.log(rows.length ? table(rows) : '(no RATIO| rows were printed)');
  if (failed.length) {
    console.log(`FAILED: ${failed.join(', ')}`);
    process.exitCode = 1;
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
