import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';

/** `BENCH_CPU_PROF=dir`: where a bench writes the CPU profile of its server's measured round (unset: no profile). */
const PROFILE_DIR = process.env.BENCH_CPU_PROF;

/**
 * Runs `fn` (a round whose server lives in this process) under V8's profiler when `on` and BENCH_CPU_PROF is set, and
 * writes `<dir>/<name>-<time>.cpuprofile`; otherwise just runs it.
 */
export async function profiled<T>(on: boolean, name: string, fn: () => Promise<T>): Promise<T> {
  if (!on || !PROFILE_DIR) return fn();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    const file = `${PROFILE_DIR}/${name}-${Date.now()}.cpuprofile`;
    await mkdir(PROFILE_DIR, { recursive: true });
    await writeFile(file, JSON.stringify(profile));
    console.log(`  CPU profile of the ${name} round: ${file}`);
    session.disconnect();
  }
}
