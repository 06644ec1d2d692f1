// The top frames of a V8 .cpuprofile (as BENCH_CPU_PROF writes them): self time per function and time in its subtree
// (inclusive), each as a share of the samples; idle and GC listed apart.
// Usage: node --import tsx test/bench/support/profile-top.ts <file.cpuprofile> [rows=30] [filter]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, rowsArg, filter] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-top.ts <file.cpuprofile> [rows] [filter]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const rows = Number(rowsArg ?? 30);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const hits = new Map<number, number>();
for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
const total = profile.samples.length;
const label = (n: Node) => {
  const url = n.callFrame.url.replace(/^.*\/(node_modules\/)/, '$1').replace(/^file:\/\/.*?\/(domain|adapters|interfaces|test)\//, '$1/');
  return `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
};
const self = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, count] of hits) {
  const node = byId.get(id)!;
  self.set(label(node), (self.get(label(node)) ?? 0) + count);
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const l = label(byId.get(at)!);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusive.set(l, (inclusive.get(l) ?? 0) + count);
  }
}
const ms = profile.timeDeltas.reduce((a, b) => a + b, 0) / 1000;
const pct = (n: number) => `${((n / total) * 100).toFixed(1).padStart(5)}%`;
const idle = self.get('(idle)') ?? 0;
console.log(
  `${file}: ${total} samples over ${ms.toFixed(0)} ms; idle ${pct(idle)}, GC ${pct(self.get('(garbage collector)') ?? 0)}, program ${pct(self.get('(program)') ?? 0)}`,
);
const top = (m: Map<string, number>, title: string) => {
  console.log(`\n${title}`);
  for (const [l, n] of [...m]
    .filter(([l]) => !filter || l.includes(filter))
    .sort((a, b) => b[1] - a[1])
    .slice(0, rows))
    console.log(`  ${pct(n)}  ${l}`);
};
top(self, 'self time');
top(inclusive, 'inclusive (the function and what it calls)');

// self time by package or source folder (where the CPU goes, coarsely)
const byPlace = new Map<string, number>();
for (const [id, count] of hits) {
  const url = byId.get(id)!.callFrame.url;
  const place = url.includes('node_modules/')
    ? url.replace(/^.*node_modules\/((@[^/]+\/)?[^/]+).*$/, '$1')
    : url.startsWith('node:')
      ? url.replace(/^node:(internal\/)?([^/]+).*$/, 'node:$2')
      : url
        ? url.replace(/^file:\/\/.*?\/(domain|adapters|interfaces|test)\/([^/]+).*$/, '$1/$2')
        : label(byId.get(id)!);
  byPlace.set(place, (byPlace.get(place) ?? 0) + count);
}
top(byPlace, 'self time by package / folder');
