/**
 * The npm run commands' argument handling: the parsed arguments, or the exit code when there is nothing to run —
 * 2 with the parser's message and the usage on stderr for arguments it refuses, 0 with the usage on stdout for --help.
 */
export function commandArgs<T extends { values: { help?: boolean | undefined } }>(parse: () => T, usage: string): T | number {
  let parsed: T;
  try {
    parsed = parse();
  } catch (e) {
    console.error(`${(e as Error).message}\n${usage}`);
    return 2;
  }
  if (parsed.values.help) {
    console.log(usage);
    return 0;
  }
  return parsed;
}
