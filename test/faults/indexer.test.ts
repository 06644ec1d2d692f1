import test from 'ava';
import { Connection, Keypair, PublicKey, Transaction } from '@solana/web3.js';
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync, TOKEN_PROGRAM_ID } from '@solana/spl-token';
import { http, recordAgent, removeDataDir, startTestApp } from '../support/app.ts';
import { until } from '../support/until.ts';
import { startJobsProcess } from '../support/jobs.ts';
import { STABLES } from '../../domain/shared/network.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';

// The indexer run by `npm run jobs` as its own process (the gateway runs no jobs, SVC_JOBS=off). Deposits
// made with plain web3.js while the runner is up, and while it is kill -9'd, each become exactly one
// agent.treasury.fund once it runs again: nothing lost, nothing twice.

const NET = 'chain-devnet' as const;
const USDC = STABLES[NET][0]!;

test('indexer in `npm run jobs`: deposits before and during a kill -9 are each reported once after the restart', async (t) => {
  const gateway = await startTestApp({ env: { SVC_JOBS: 'off' } });
  t.teardown(async () => {
    await gateway.close();
    await removeDataDir(gateway.dataDir);
  });
  const env = { DATABASE_URL: gateway.database.url, SVC_DATA_DIR: gateway.dataDir, SVC_LOG_LEVEL: 'warn' };
  let runner = startJobsProcess(env);
  t.teardown(() => {
    runner.child.kill('SIGKILL');
  });
  const key = (await gateway.services.access.issueKey({ network: NET, role: 'user' })).key;
  const { mint } = await recordAgent(gateway, key); // watched from here on; its USDC account made by the facilitator
  const treasuryUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), new PublicKey(treasuryOf(mint)), true, TOKEN_PROGRAM_ID);
  const donor = Keypair.generate();
  await gateway.services.dev.fund(NET, { address: donor.publicKey.toBase58(), sol: '1', token: 'USDC', amount: '10' });
  const donorUsdc = getAssociatedTokenAddressSync(new PublicKey(USDC.mint), donor.publicKey, false, TOKEN_PROGRAM_ID);
  const connection = new Connection(gateway.ledgers.rpcUrls[NET]!, 'confirmed');

  const deposit = async (atomic: bigint): Promise<string> => {
    const { blockhash } = await connection.getLatestBlockhash();
    const tx = new Transaction({ feePayer: donor.publicKey, recentBlockhash: blockhash }).add(
      createTransferCheckedInstruction(donorUsdc, new PublicKey(USDC.mint), treasuryUsdc, donor.publicKey, atomic, USDC.decimals),
    );
    tx.sign(donor);
    const signature = await connection.sendRawTransaction(tx.serialize());
    await until(`status of ${signature}`, async () => (await connection.getSignatureStatuses([signature])).value[0] ?? undefined);
    return signature;
  };
  const funds = async () => {
    const res = await http(gateway, 'GET', `/v1/events?agent=${mint}&kind=agent.treasury.fund&limit=200`, { key });
    if (res.status !== 200) throw new Error(`events: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data as { signature: string; metadata: { amount_atomic: string } }[];
  };

  const first = await deposit(1_000_000n);
  await until('the first deposit reported by the runner process', async () => (await funds()).some((e) => e.signature === first) || undefined, {
    everyMs: 250,
  });

  runner.child.kill('SIGKILL');
  await runner.exited;
  const during = [await deposit(2_000_000n), await deposit(3_000_000n)];
  runner = startJobsProcess(env);
  await until(
    'the deposits made while it was down reported after the restart',
    async () => {
      const seen = await funds();
      return during.every((s) => seen.some((e) => e.signature === s)) || undefined;
    },
    { everyMs: 250 },
  );

  const all = await funds();
  for (const signature of [first, ...during]) t.is(all.filter((e) => e.signature === signature).length, 1, `${signature} once`);
  t.is(all.length, 3, JSON.stringify(all.map((e) => e.signature)));
  t.deepEqual(all.map((e) => e.metadata.amount_atomic).sort(), ['1000000', '2000000', '3000000']);
  const status = await http(gateway, 'GET', '/v1/indexer/status', { key });
  t.is(status.status, 200, runner.output());
});
