// The webhook bench's receiver, run in its own process (receiver-child.ts) so it does not share an event loop with the
// app whose deliveries it counts.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./receiver-child.ts', import.meta.url));

/** Epoch milliseconds with sub-millisecond precision, the receiver's clock too. */
export const epochNow = () => performance.timeOrigin + performance.now();

export interface ReceiverProcess {
  port: number;
  /** deliveries received so far */
  count(): Promise<number>;
  /** event id → arrival times (epochNow clock) */
  arrivals(): Promise<Map<string, number[]>>;
  close(): Promise<void>;
}

export async function startReceiverProcess(): Promise<ReceiverProcess> {
  const child = fork(CHILD, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
  let seq = 0;
  const pending = new Map<number, (m: Record<string, unknown>) => void>();
  child.on('message', (m: { id?: number }) => {
    if (m.id === undefined) return;
    pending.get(m.id)?.(m as Record<string, unknown>);
    pending.delete(m.id);
  });
  const ask = (cmd: string) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const id = ++seq;
      pending.set(id, resolve);
      child.send({ id, cmd });
    });
  return {
    port,
    count: async () => (await ask('count')).count as number,
    arrivals: async () => new Map(Object.entries((await ask('arrivals')).arrivals as Record<string, number[]>)),
    close: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      await ask('close');
      await exited;
    },
  };
}
