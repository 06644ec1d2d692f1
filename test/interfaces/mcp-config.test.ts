import test from 'ava';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keypair } from '@solana/web3.js';
import { ConfigError, loadToolEnv, parseSecret, readConfigFile, writeConfigFile } from '../../interfaces/mcp/config.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';

// fee-facilitator-mpp-tools §2.8: the tool server's environment and configuration file.

test('the API key prefix decides the network; SVC_NETWORK must agree and is the default only without a key', (t) => {
  t.is(loadToolEnv({ SVC_API_KEY: 'svc_test_abc' }).network, 'chain-devnet');
  t.is(loadToolEnv({ SVC_API_KEY: 'svc_live_abc' }).network, 'chain-mainnet');
  t.is(loadToolEnv({}).network, 'chain-mainnet');
  t.is(loadToolEnv({ SVC_NETWORK: 'chain-devnet' }).network, 'chain-devnet');
  t.is(loadToolEnv({ SVC_NETWORK: 'chain-devnet', SVC_API_KEY: 'svc_test_abc' }).network, 'chain-devnet');
  t.throws(() => loadToolEnv({ SVC_NETWORK: 'chain-mainnet', SVC_API_KEY: 'svc_test_abc' }), {
    instanceOf: ConfigError,
    message: /SVC_NETWORK is chain-mainnet but SVC_API_KEY is a key of chain-devnet/,
  });
  t.throws(() => loadToolEnv({ SVC_API_KEY: 'sk_abc' }), { instanceOf: ConfigError });
  t.throws(() => loadToolEnv({ SVC_NETWORK: 'solana' }), { instanceOf: ConfigError });
  t.is(loadToolEnv({ SVC_API_KEY: 'svc_test_abc' }).rpcUrl, 'https://api.devnet.solana.com');
  t.is(loadToolEnv({ SVC_API_URL: 'http://gw.example/' }).apiUrl, 'http://gw.example');
});

test('an executive key is base58 or a JSON byte array; anything else is refused without echoing it', (t) => {
  const k = Keypair.generate();
  t.is(parseSecret(encodeBase58(k.secretKey))?.publicKey.toBase58(), k.publicKey.toBase58());
  t.is(parseSecret(JSON.stringify(Array.from(k.secretKey)))?.publicKey.toBase58(), k.publicKey.toBase58());
  t.is(parseSecret('[1,2,3]'), null);
  t.is(parseSecret(encodeBase58(k.secretKey.slice(0, 32))), null);
  const secret = `${encodeBase58(k.secretKey)}0`;
  const err = t.throws(() => loadToolEnv({ SVC_EXECUTIVE_KEY: secret }), { instanceOf: ConfigError });
  t.false(err!.message.includes(secret));
  t.is(loadToolEnv({ SVC_EXECUTIVE_KEY: encodeBase58(k.secretKey) }).executive?.publicKey.toBase58(), k.publicKey.toBase58());
});

test('the configuration file is written 0600 in a 0700 directory and read back; unknown fields are refused', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-mcp-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'svc', 'agent.json');
  t.is(await readConfigFile(path), null);
  const config = { version: 1 as const, agent_mint: null, executive_keypair: null, network: 'chain-devnet' as const, rpc_url: null, pending_register: null };
  await writeConfigFile(path, config);
  t.is((await stat(path)).mode & 0o777, 0o600);
  t.is((await stat(join(dir, 'svc'))).mode & 0o777, 0o700);
  t.deepEqual(await readConfigFile(path), config);
  await writeFile(path, JSON.stringify({ ...config, surprise: 1 }));
  await t.throwsAsync(readConfigFile(path), { instanceOf: ConfigError, message: /not an agent configuration/ });
  await writeFile(path, '{');
  await t.throwsAsync(readConfigFile(path), { instanceOf: ConfigError, message: /is not JSON/ });
});
