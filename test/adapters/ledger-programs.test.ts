import test from 'ava';
import pino from 'pino';
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js';
import { createV1, execute, mplCore } from '@metaplex-foundation/mpl-core';
import { createNoopSigner, publicKey, signerIdentity } from '@metaplex-foundation/umi';
import { createUmi } from '@metaplex-foundation/umi-bundle-defaults';
import { fromWeb3JsInstruction, toWeb3JsInstruction } from '@metaplex-foundation/umi-web3js-adapters';
import { joinLedgers, openLedgers, ProgramsError } from '../../adapters/ledger/index.ts';
import { resolvePrograms } from '../../adapters/ledger/embedded/programs.ts';
import type { LedgerThread } from '../../adapters/ledger/embedded/ledger-thread.ts';
import { ConfigError } from '../../interfaces/config.ts';
import { AGENT_REGISTRY_IDENTITY_PROGRAM_ID, AGENT_REGISTRY_TOOLS_PROGRAM_ID } from '../../domain/ledger/programs.ts';
import { MPL_CORE_PROGRAM_ID, treasuryOf } from '../../domain/treasury/derive.ts';
import { http, issueKey, makeDataDir, removeDataDir, startTestApp, testConfig } from '../support/app.ts';
import { metaplexTest } from '../support/programs.ts';

// The ledger runs Metaplex Core: the embedded ledgers load real programs from SVC_LEDGER_PROGRAMS (a
// directory of <id>.so / <id>.so.gz, as ../shared/programs keeps Core) or clone the well-known ones from
// SVC_LEDGER_CLONE_URL; the official mpl-core client's createV1 and execute run on them.

/** sha256 of the unpacked Core .so (../shared/programs/README.md) */
const CORE_SHA256 = '0d3ac8cce3d6158924313a697c2c53fdb06b5882f6c07601c8ad7604cb1964d5';
/** name + uri of 25 bytes: AssetV1 = 75 + name + uri = the 100-byte account of the programs README */
const NAME = 'Agent';
const URI = 'https://x.example/a1';

/**
 * On `ledger`: createV1 of a fresh asset (owner = a real keypair paying the fees), then an Execute moving 0.25 SOL
 * out of the asset-signer PDA (treasuryOf) signed by the owner alone; both built offline through umi.
 */
async function createAndExecute(t: import('ava').ExecutionContext, ledger: LedgerThread): Promise<string> {
  const owner = Keypair.generate();
  const asset = Keypair.generate();
  const recipient = Keypair.generate().publicKey;
  await ledger.airdrop(owner.publicKey.toBase58(), 2_000_000_000n);
  // umi only builds here: its RPC is never called
  const umi = createUmi('http://127.0.0.1:9')
    .use(mplCore())
    .use(signerIdentity(createNoopSigner(publicKey(owner.publicKey.toBase58()))));
  const send = async (ixs: ReturnType<typeof toWeb3JsInstruction>[], signers: Keypair[]) => {
    const { blockhash } = await ledger.getLatestBlockhash();
    const tx = new Transaction({ feePayer: owner.publicKey, recentBlockhash: blockhash }).add(...ixs);
    tx.sign(...signers);
    const sent = await ledger.sendTransaction(tx.serialize());
    if (!sent.ok) return { landed: false, detail: sent };
    const [status] = await ledger.getSignatureStatuses([sent.signature]);
    return { landed: status != null && status.err === null, detail: status };
  };

  const created = createV1(umi, { asset: createNoopSigner(publicKey(asset.publicKey.toBase58())), name: NAME, uri: URI })
    .getInstructions()
    .map(toWeb3JsInstruction);
  const first = await send(created, [owner, asset]);
  t.true(first.landed, `createV1 landed: ${JSON.stringify(first.detail)}`);
  const account = await ledger.getAccount(asset.publicKey.toBase58());
  t.truthy(account, 'the asset account exists');
  t.is(account!.owner, MPL_CORE_PROGRAM_ID, 'owned by Metaplex Core');
  t.is(account!.data.length, 100, 'a 100-byte AssetV1');

  const treasury = treasuryOf(asset.publicKey.toBase58());
  await ledger.airdrop(treasury, 1_000_000_000n);
  const inner = fromWeb3JsInstruction(SystemProgram.transfer({ fromPubkey: new PublicKey(treasury), toPubkey: recipient, lamports: 250_000_000 }));
  const executed = execute(umi, { asset: { publicKey: publicKey(asset.publicKey.toBase58()) }, instructions: [inner] })
    .getInstructions()
    .map(toWeb3JsInstruction);
  const second = await send(executed, [owner]);
  t.true(second.landed, `execute landed with only the owner's signature: ${JSON.stringify(second.detail)}`);
  const signers = new Set(executed.flatMap((ix) => ix.keys.filter((k) => k.isSigner).map((k) => k.pubkey.toBase58())));
  t.deepEqual([...signers], [owner.publicKey.toBase58()], 'the owner is the one signer of the Execute');
  t.is(await ledger.getBalance(recipient.toBase58()), 250_000_000n, 'the lamports left the asset-signer PDA');
  t.is(await ledger.getBalance(treasury), 750_000_000n);
  return asset.publicKey.toBase58();
}

/** A fresh directory holding only Core, gzip-compressed (`<id>.so.gz`) or plain (`<id>.so`), made from the binary at hand. */
async function coreDirOf(dir: string, kind: 'so.gz' | 'so'): Promise<string> {
  const elf = await readFile(join(dir, `${MPL_CORE_PROGRAM_ID}.so`)).catch(async () => gunzipSync(await readFile(join(dir, `${MPL_CORE_PROGRAM_ID}.so.gz`))));
  const out = await makeDataDir();
  await writeFile(join(out, `${MPL_CORE_PROGRAM_ID}.${kind}`), kind === 'so.gz' ? gzipSync(elf) : elf);
  await writeFile(join(out, 'README.md'), 'not a program: ignored');
  return out;
}

metaplexTest(
  test,
  'programs: Core from the .so.gz directory runs createV1 (100-byte asset) and an owner-signed execute on the app devnet; health lists it',
  async (t, dir) => {
    const gz = await coreDirOf(dir, 'so.gz');
    t.teardown(() => removeDataDir(gz));
    const logs: { msg: string; network?: string; programs?: unknown }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
    const app = await startTestApp({ env: { SVC_LEDGER_PROGRAMS: gz }, appOptions: { logger } });
    t.teardown(async () => {
      await app.close();
      await removeDataDir(app.dataDir);
    });
    for (const network of ['chain-devnet', 'chain-mainnet']) {
      const line = logs.find((l) => l.network === network && l.programs);
      t.is(
        line?.msg,
        `${network} ledger programs: mpl-core (directory); missing: mpl-agent-registry-identity, mpl-agent-registry-tools`,
        'start-up logs the programs at info',
      );
    }
    const devnet = app.ledgers.embedded['chain-devnet']!;
    await createAndExecute(t, devnet);

    const key = await issueKey(app);
    const health = await http(app, 'GET', '/v1/health', { key });
    t.is(health.status, 200);
    for (const network of ['chain-devnet', 'chain-mainnet']) {
      t.deepEqual(health.body.ledger[network].programs, [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', source: 'directory' }], network);
      t.deepEqual(
        health.body.ledger[network].missing,
        [
          { id: AGENT_REGISTRY_IDENTITY_PROGRAM_ID, name: 'mpl-agent-registry-identity' },
          { id: AGENT_REGISTRY_TOOLS_PROGRAM_ID, name: 'mpl-agent-registry-tools' },
        ],
        'the registry programs are not available as binaries: reported, not fatal',
      );
    }
  },
);

metaplexTest(
  test,
  "programs: ledger B clones Core from ledger A's JSON-RPC, caches the ELF, runs createV1 + execute; the next start uses the cache without the network",
  async (t, dir) => {
    const a = await startTestApp({ env: { SVC_LEDGER_PROGRAMS: dir } });
    let aClosed = false;
    t.teardown(async () => {
      if (!aClosed) await a.close();
      await removeDataDir(a.dataDir);
    });
    const aUrl = a.ledgers.rpcUrls['chain-devnet']!;
    t.regex(aUrl, /^http:\/\/127\.0\.0\.1:\d+/);
    // A's JSON-RPC serves the program as the upgradeable loader keeps it: a 36-byte program account naming its programdata.
    const info = async (address: string, encoding = 'base64') => {
      const res = await fetch(aUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getAccountInfo', params: [address, { encoding }] }),
      });
      return ((await res.json()) as { result: { value: { owner: string; executable: boolean; space: number; data: any } } }).result.value;
    };
    const program = await info(MPL_CORE_PROGRAM_ID);
    t.like(program, { owner: 'BPFLoaderUpgradeab1e11111111111111111111111', executable: true, space: 36 });
    const programDataAddress = new PublicKey(Buffer.from(program.data[0], 'base64').subarray(4, 36)).toBase58();
    const programData = await info(programDataAddress);
    t.like(programData, { owner: 'BPFLoaderUpgradeab1e11111111111111111111111', space: 45 + 848_320 }, 'programdata: the 45-byte header and the ELF');
    // jsonParsed as agave's decoder writes it (bpf-upgradeable-loader)
    t.deepEqual((await info(MPL_CORE_PROGRAM_ID, 'jsonParsed')).data, {
      program: 'bpf-upgradeable-loader',
      parsed: { type: 'program', info: { programData: programDataAddress } },
      space: 36,
    });
    const parsedData = (await info(programDataAddress, 'jsonParsed')).data;
    t.like(parsedData, { program: 'bpf-upgradeable-loader', parsed: { type: 'programData', info: { authority: null } }, space: 45 + 848_320 });
    t.is(Buffer.from(parsedData.parsed.info.data[0], 'base64').length, 848_320);
    // The clone source is operator configuration, fetched by the ledger adapter directly: the outbound guard (which
    // refuses loopback unless SVC_OUTBOUND_ALLOW names it) is for URLs users give, so nothing is allow-listed here.
    const b = await startTestApp({ env: { SVC_LEDGER_PROGRAMS: '', SVC_LEDGER_CLONE_URL: aUrl } });
    let bClosed = false;
    t.teardown(async () => {
      if (!bClosed) await b.close();
      await removeDataDir(b.dataDir);
    });
    const cached = join(b.dataDir, 'ledger', 'programs', `${MPL_CORE_PROGRAM_ID}.so`);
    t.is(
      createHash('sha256')
        .update(await readFile(cached))
        .digest('hex'),
      CORE_SHA256,
      'the cached ELF is the deployed Core, byte for byte',
    );
    const key = await issueKey(b);
    const health = await http(b, 'GET', '/v1/health', { key });
    t.deepEqual(health.body.ledger['chain-devnet'].programs, [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', source: 'clone' }]);
    t.deepEqual(
      health.body.ledger['chain-devnet'].missing.map((p: { id: string }) => p.id),
      [AGENT_REGISTRY_IDENTITY_PROGRAM_ID, AGENT_REGISTRY_TOOLS_PROGRAM_ID],
      'programs A lacks are listed as missing, and B starts all the same',
    );
    await createAndExecute(t, b.ledgers.embedded['chain-devnet']!);
    await b.close();
    bClosed = true;
    await a.close();
    aClosed = true;

    // Next start of B's ledgers: the clone source is gone, the cache serves; the persisted state (B's asset) is
    // restored with Core loaded again, and Core runs new transactions.
    const again = await openLedgers({ dataDir: b.dataDir, devnet: 'embedded', mainnet: 'embedded', slotMs: 0, cloneUrl: aUrl });
    t.teardown(() => again.close());
    t.deepEqual(again.programs?.['chain-devnet']?.programs, [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', source: 'clone' }]);
    await createAndExecute(t, again.embedded['chain-devnet']!);
  },
);

metaplexTest(
  test,
  'programs: a restored ledger (snapshot + history) keeps its Core assets and runs Core again; without the setting its saved state still runs Core (source "state")',
  async (t, dir) => {
    const dataDir = await makeDataDir();
    t.teardown(() => removeDataDir(dataDir));
    const first = await openLedgers({ dataDir, devnet: 'embedded', mainnet: 'embedded', slotMs: 0, programsDir: dir });
    const asset = await createAndExecute(t, first.embedded['chain-devnet']!);
    await first.close();
    const second = await openLedgers({ dataDir, devnet: 'embedded', mainnet: 'embedded', slotMs: 0, programsDir: dir });
    t.teardown(() => second.close()); // a second close is a no-op
    const devnet = second.embedded['chain-devnet']!;
    const restored = await devnet.getAccount(asset);
    t.is(restored?.owner, MPL_CORE_PROGRAM_ID, 'the asset survived the restart');
    t.is(restored?.data.length, 100);
    t.is(await devnet.getBalance(treasuryOf(asset)), 750_000_000n, 'and so did its treasury after the execute');
    await createAndExecute(t, devnet);
    await second.close();

    // Started without the setting: the saved state still holds Core (LiteSVM runs it), and the list says where it is from.
    const third = await openLedgers({ dataDir, devnet: 'embedded', mainnet: 'embedded', slotMs: 0 });
    t.teardown(() => third.close());
    t.deepEqual(third.programs?.['chain-devnet']?.programs, [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', source: 'state' }]);
    t.deepEqual(
      third.programs?.['chain-devnet']?.missing.map((p) => p.id),
      [AGENT_REGISTRY_IDENTITY_PROGRAM_ID, AGENT_REGISTRY_TOOLS_PROGRAM_ID],
    );
    await createAndExecute(t, third.embedded['chain-devnet']!);
  },
);

test('programs: a bad SVC_LEDGER_PROGRAMS is a clear start-up error naming the setting and the file', async (t) => {
  const root = await makeDataDir();
  t.teardown(() => removeDataDir(root));
  const cacheDir = join(root, 'cache');
  const resolveIn = (dir: string) => resolvePrograms({ dir, cacheDir, wellKnown: [] });
  await t.throwsAsync(resolveIn(join(root, 'nope')), { instanceOf: ProgramsError, message: /SVC_LEDGER_PROGRAMS=.*nope: no such directory/ });
  await writeFile(join(root, 'file'), 'x');
  await t.throwsAsync(resolveIn(join(root, 'file')), { instanceOf: ProgramsError, message: /not a directory/ });

  const named = join(root, 'named');
  await mkdir(named);
  await writeFile(join(named, 'README.md'), 'other files are ignored');
  await writeFile(join(named, 'mpl_core.so'), '\x7fELF');
  await t.throwsAsync(resolveIn(named), {
    instanceOf: ProgramsError,
    message: /mpl_core\.so is not named <program-id>\.so\(\.gz\): "mpl_core" is not a base58 address/,
  });

  const notElf = join(root, 'not-elf');
  await mkdir(notElf);
  await writeFile(join(notElf, `${MPL_CORE_PROGRAM_ID}.so`), 'hello');
  await t.throwsAsync(resolveIn(notElf), { instanceOf: ProgramsError, message: /is not an ELF program/ });

  const badGz = join(root, 'bad-gz');
  await mkdir(badGz);
  await writeFile(join(badGz, `${MPL_CORE_PROGRAM_ID}.so.gz`), '\x7fELF not gzip');
  await t.throwsAsync(resolveIn(badGz), { instanceOf: ProgramsError, message: /is not a gzip file/ });

  const twice = join(root, 'twice');
  await mkdir(twice);
  await writeFile(join(twice, `${MPL_CORE_PROGRAM_ID}.so`), '\x7fELF');
  await writeFile(join(twice, `${MPL_CORE_PROGRAM_ID}.so.gz`), gzipSync('\x7fELF'));
  await t.throwsAsync(resolveIn(twice), { instanceOf: ProgramsError, message: /is there twice/ });

  const unreadable = join(root, 'unreadable');
  await mkdir(join(unreadable, `${MPL_CORE_PROGRAM_ID}.so`), { recursive: true }); // a directory where a file belongs
  await t.throwsAsync(resolveIn(unreadable), { instanceOf: ProgramsError, message: /cannot read/ });

  // An ELF header on bytes LiteSVM cannot load: the ledger does not open, naming the program.
  const garbage = join(root, 'garbage');
  await mkdir(garbage);
  await writeFile(join(garbage, `${MPL_CORE_PROGRAM_ID}.so`), '\x7fELF garbage');
  const dataDir = join(root, 'data');
  await t.throwsAsync(openLedgers({ dataDir, devnet: 'embedded', mainnet: 'embedded', slotMs: 0, programsDir: garbage }), {
    message: new RegExp(`program ${MPL_CORE_PROGRAM_ID} could not be loaded .*is it a Solana program ELF\\?`),
  });

  // The app refuses to start (the message names the setting), rather than failing a request later.
  await t.throwsAsync(startTestApp({ env: { SVC_LEDGER_PROGRAMS: join(root, 'nope') } }), { message: /SVC_LEDGER_PROGRAMS=.*no such directory/ });
  const refused = t.throws(() => testConfig({ SVC_LEDGER_CLONE_URL: 'ftp://example.com/?api-key=SECRET123' }), {
    instanceOf: ConfigError,
    message: /SVC_LEDGER_CLONE_URL=\(hidden\)/,
  });
  t.false(refused?.message.includes('SECRET123'), 'a clone URL may carry a provider key: never echoed');
  t.is(testConfig({ SVC_LEDGER_PROGRAMS: '../shared/programs' }).ledgers.programsDir, resolve('../shared/programs'), 'a relative directory is made absolute');
  t.is(testConfig({ SVC_LEDGER_PROGRAMS: '' }).ledgers.programsDir, undefined, 'empty = unset');
});

test('programs: a clone source that cannot answer (refused, silent past the deadline, an oversized body) leaves the well-known programs missing, not fatal', async (t) => {
  const root = await makeDataDir();
  t.teardown(() => removeDataDir(root));
  const warnings: string[] = [];
  // port 9 (discard) on loopback: nothing listens, the connection is refused at once
  const resolved = await resolvePrograms({
    cacheDir: join(root, 'cache'),
    cloneUrl: 'http://127.0.0.1:9',
    onWarning: (m) => warnings.push(m),
    timeoutMs: 5_000,
  });
  t.deepEqual(resolved.images, []);
  t.deepEqual(
    resolved.missing.map((m) => m.id),
    [MPL_CORE_PROGRAM_ID, AGENT_REGISTRY_IDENTITY_PROGRAM_ID, AGENT_REGISTRY_TOOLS_PROGRAM_ID],
  );
  t.regex(resolved.missing[0]!.reason, /cloning from http:\/\/127\.0\.0\.1:9 failed/);
  t.is(warnings.length, 3, 'each is warned about');

  // A source that never answers is cut at the deadline; one that announces a body larger than any program is refused.
  const silent = createServer(() => {});
  const huge = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(200 * 1024 * 1024) });
    res.write('{');
  });
  const listen = (server: Server) =>
    new Promise<string>((done) => server.listen(0, '127.0.0.1', () => done(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
  t.teardown(() => {
    silent.closeAllConnections();
    silent.close();
    huge.closeAllConnections();
    huge.close();
  });
  const core = [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core' }];
  const slow = await resolvePrograms({ cacheDir: join(root, 'cache'), cloneUrl: await listen(silent), wellKnown: core, timeoutMs: 300 });
  t.regex(slow.missing[0]!.reason, /failed: .*(timeout|aborted)/i);
  const big = await resolvePrograms({
    cacheDir: join(root, 'cache'),
    cloneUrl: `${await listen(huge)}/rpc?api-key=SECRET123`,
    wellKnown: core,
    onWarning: (m) => warnings.push(m),
  });
  t.regex(big.missing[0]!.reason, /answer is \d+ bytes, more than \d+/);
  t.false(JSON.stringify([big.missing, warnings]).includes('SECRET123'), "a provider's key in the clone URL never reaches a log or reason");
});

metaplexTest(
  test,
  'programs: a process joining an installation (npm run facilitator) that opens the ledger itself loads the same programs (a plain .so here)',
  async (t, dir) => {
    const dataDir = await makeDataDir();
    const plain = await coreDirOf(dir, 'so');
    t.teardown(() => Promise.all([removeDataDir(dataDir), removeDataDir(plain)]));
    const joined = await joinLedgers({ dataDir, networks: ['chain-devnet'], rpcPorts: { 'chain-devnet': 0, 'chain-mainnet': 0 }, programsDir: plain });
    t.teardown(() => joined.close());
    t.deepEqual(joined.programs?.['chain-devnet']?.programs, [{ id: MPL_CORE_PROGRAM_ID, name: 'mpl-core', source: 'directory' }]);
    await createAndExecute(t, joined.embedded['chain-devnet']!);
  },
);
