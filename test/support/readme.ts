// Reads the README the way test/readme.test.ts needs it: its fenced blocks with the marker that says what the suite
// does with each, and the relative links of any markdown file. STYLE habit 18: what the README shows is run by the
// suite, so every block is run, is an examples/ file, or says why not.

/** What the suite does with a fenced block. */
export type BlockRole =
  /** a shell block run against a real gateway; `expect`: text its output must hold */
  | { kind: 'run'; expect?: string }
  /** the verbatim text of a file (or of one `// #region NAME` … `// #endregion` of it) */
  | { kind: 'example'; path: string; region?: string }
  /** not run, for the stated reason */
  | { kind: 'skip'; reason: string }
  /** a block the suite cannot place: neither run nor marked */
  | { kind: 'unmarked' }
  | { kind: 'invalid'; problem: string };

export interface Block {
  /** 1-based line of the opening fence */
  line: number;
  lang: string;
  /** the text between the fences, without the final newline */
  text: string;
  /** 1-based lines of the first and last text line (text empty: start = end + 1) */
  textStart: number;
  textEnd: number;
  role: BlockRole;
}

const SHELL = new Set(['sh', 'bash', 'shell']);
export const MARKER = /^<!--\s*readme:\s*(\S+)\s*(.*?)\s*-->$/;

function roleOf(marker: string | undefined, lang: string): BlockRole {
  if (marker === undefined) return SHELL.has(lang) ? { kind: 'run' } : { kind: 'unmarked' };
  const m = MARKER.exec(marker)!;
  const [, verb, rest = ''] = m;
  switch (verb) {
    case 'skip':
      return rest ? { kind: 'skip', reason: rest } : { kind: 'invalid', problem: '`readme: skip` needs a reason' };
    case 'expect':
      if (!SHELL.has(lang)) return { kind: 'invalid', problem: '`readme: expect` marks a shell block' };
      return rest ? { kind: 'run', expect: rest } : { kind: 'invalid', problem: '`readme: expect` needs the text to find' };
    case 'example': {
      const [path, region] = rest.split('#');
      return path ? { kind: 'example', path, ...(region ? { region } : {}) } : { kind: 'invalid', problem: '`readme: example` needs a path' };
    }
    default:
      return { kind: 'invalid', problem: `unknown marker "readme: ${verb}" (run is the default for shell; skip, expect, example)` };
  }
}

/** The fenced blocks of a markdown text, each with its role from the `<!-- readme: … -->` line just above it. */
export function readBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(```+)\s*([\w-]*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[1]!;
    const lang = open[2] ?? '';
    let end = i + 1;
    while (end < lines.length && lines[end]!.trim() !== fence) end++;
    let above = i - 1;
    while (above >= 0 && lines[above]!.trim() === '') above--;
    const marker = above >= 0 && MARKER.test(lines[above]!.trim()) ? lines[above]!.trim() : undefined;
    blocks.push({ line: i + 1, lang, text: lines.slice(i + 1, end).join('\n'), textStart: i + 2, textEnd: end, role: roleOf(marker, lang) });
    i = end;
  }
  return blocks;
}

/** The text a marked example shows: the whole file, or the lines between `// #region NAME` and `// #endregion`. */
export function exampleText(file: string, region?: string): string | undefined {
  const text = file.replace(/\n$/, '');
  if (!region) return text;
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === `// #region ${region}`);
  if (start === -1) return undefined;
  const end = lines.findIndex((l, j) => j > start && /^\/\/ #endregion\b/.test(l.trim()));
  return end === -1 ? undefined : lines.slice(start + 1, end).join('\n');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let inFence = false;
  for (const line of markdown.split('\n')) {
    if (/^```/.test(line)) inFence = !inFence;
    if (inFence) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = h[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

export interface Link {
  line: number;
  target: string;
}

/** Relative links (`[text](target)`) outside code: not http(s), mailto or other schemes. */
export function relativeLinks(markdown: string): Link[] {
  const links: Link[] = [];
  let inFence = false;
  markdown.split('\n').forEach((line, i) => {
    if (/^```/.test(line)) inFence = !inFence;
    if (inFence) return;
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links.push({ line: i + 1, target });
    }
  });
  return links;
}
