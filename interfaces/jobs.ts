import { ConfigError, loadConfig } from './config.ts';
import { openCore, startJobRunner } from './core.ts';
import { onShutdownSignal } from './shutdown.ts';

// npm run jobs: the job runner on its own (npm start runs it in-process unless SVC_JOBS=off). Several runners on one
// database share the work: each job runs once.

async function main(): Promise<void> {
  const config = loadConfig();
  // No ledger files are held here (the gateway holds them): ledgers are reached through its JSON-RPC, so every job
  // registered — resolve_paid_calls included — can run, and the indexer follows the ledgers' notifications through
  // its PubSub WebSocket (adapters/ledger/joined.ts), polling only while they are interrupted.
  const core = await openCore(config, { ledgers: 'join' });
  const runner = await startJobRunner(core.database.url, core.services, core.log);
  console.log(`svc job runner started on ${core.database.embedded ? `embedded PostgreSQL in ${config.dataDir}/pg` : 'DATABASE_URL'}`);
  onShutdownSignal(async () => {
    await runner.stop();
    await core.close();
  });
}

main().catch((e) => {
  console.error(e instanceof ConfigError ? e.message : `svc job runner failed: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
});
