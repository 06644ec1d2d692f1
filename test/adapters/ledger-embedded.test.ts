import test from 'ava';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Keypair, NONCE_ACCOUNT_LENGTH, NonceAccount, PublicKey, SystemProgram, Transaction, type TransactionInstruction } from '@solana/web3.js';
import {
  AuthorityType,
  createAssociatedTokenAccountIdempotentInstruction,
  createCloseAccountInstruction,
  createSetAuthorityInstruction,
  createTransferCheckedInstruction,
} from '@solana/spl-token';
import { LedgerLockedError, LedgerThread, openLedgers, runFaucet } from '../../adapters/ledger/index.ts';
import { createFaucet, parseDecimal } from '../../adapters/ledger/embedded/faucet.ts';
import { encodeBase58 } from '../../domain/shared/base58.ts';
import { RpcLedger } from '../../adapters/ledger/rpc/rpc-ledger.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { STABLES, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';
import { ledgerContract } from './ledger-contract.ts';
import { ata, ledgerDir, openTestLedger, removeDir, runTs, solTransfer, tokenTransfer, tokenTransferInstructions, USDC_DEVNET } from '../support/ledger.ts';
import { until } from '../support/until.ts';

ledgerContract(test, 'embedded', async () => {
  const dir = await ledgerDir();
  const ledger = await openTestLedger({ dir });
  return {
    ledger,
    airdrop: async (to, lamports) => void ledger.airdrop(to, lamports),
    mintUsdc: async (owner, amount) => void ledger.mintTo(owner, USDC_DEVNET.mint, amount),
    advance: async (slots) => ledger.advance(slots),
    close: async () => {
      await ledger.close();
      await removeDir(dir);
    },
  };
});

// ---- embedded only: durability, genesis, clock, safety ----

const SOL = 1_000_000_000n;

test('embedded: balances and history survive close and reopen', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  let ledger = await openTestLedger({ dir });
  const payer = Keypair.generate();
  const merchant = Keypair.generate().publicKey.toBase58();
  ledger.airdrop(payer.publicKey.toBase58(), 2n * SOL);
  ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 10_000_000n);
  ledger.advance(5);
  const issued = ledger.latestBlockhash();
  const sent = ledger.sendWire(
    tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 4_000_000n, blockhash: issued.blockhash, memo: 'kept' }),
  );
  t.true(sent.ok);
  const before = { lamports: ledger.balance(payer.publicKey.toBase58()), tx: await ledger.getTransaction((sent as { signature: string }).signature) };
  const mintAuthority = ledger.mintAuthority.address;
  await ledger.close();

  ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  t.is(ledger.mintAuthority.address, mintAuthority, 'the local keys are kept');
  t.is(ledger.balance(payer.publicKey.toBase58()), before.lamports);
  t.deepEqual(
    (await ledger.getTokenBalances(merchant)).map((b) => b.amount),
    [4_000_000n],
  );
  t.deepEqual(
    (await ledger.getTokenBalances(payer.publicKey.toBase58())).map((b) => b.amount),
    [6_000_000n],
  );
  t.deepEqual(await ledger.getTransaction((sent as { signature: string }).signature), before.tx);
  t.is((await ledger.getSignaturesForAddress(merchant))[0]?.memo, '[4] kept');
  t.is(ledger.slot(), 5, 'the clock resumes where it was');
  t.true(ledger.blockhashValid(issued.blockhash), 'blockhashes issued before the restart stay valid');
  t.like(ledger.sendWire(tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 1n, blockhash: issued.blockhash })), { ok: true });
  t.like(
    ledger.sendWire(tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 4_000_000n, blockhash: issued.blockhash, memo: 'kept' })),
    { ok: false, err: 'AlreadyProcessed' },
  );
});

test('embedded: a killed process loses nothing it acknowledged (the history log is replayed)', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const child = await runTs(fileURLToPath(new URL('../support/ledger-crash.ts', import.meta.url)), [dir, '6']);
  t.is(child.signal, 'SIGKILL', child.stderr);
  const report = JSON.parse(child.stdout.trim()) as { payer: string; merchant: string; signatures: string[]; payerLamports: string; slot: number };
  t.is(report.signatures.length, 6);

  const ledger = await openTestLedger({ dir }); // the dead process's LOCK is stale
  t.teardown(() => ledger.close());
  const history = (await ledger.getSignaturesForAddress(report.merchant)).map((s) => s.signature);
  const lostTheLast = history.length === 6; // the unconfirmed one may or may not have been written
  t.deepEqual(history.slice(lostTheLast ? 0 : 1), [...report.signatures].reverse());
  t.is(ledger.balance(report.payer), BigInt(report.payerLamports) - (lostTheLast ? 0n : 5_000n));
  t.deepEqual(
    (await ledger.getTokenBalances(report.merchant)).map((b) => b.amount),
    [lostTheLast ? 6_000_000n : 6_000_001n],
  );
  t.true(ledger.slot() >= report.slot);
  for (const status of await ledger.getSignatureStatuses(report.signatures)) t.is(status?.err, null);
});

test('embedded: a torn last history line is cut off and the log goes on', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  let ledger = await openTestLedger({ dir });
  const wallet = Keypair.generate().publicKey.toBase58();
  ledger.airdrop(wallet, SOL);
  await ledger.close();
  appendFileSync(join(dir, 'history.log'), '{"seq":2,"sig":"torn');
  ledger = await openTestLedger({ dir });
  t.is(ledger.transactionCount, 1);
  ledger.airdrop(wallet, SOL);
  await ledger.close();
  ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  t.is(ledger.transactionCount, 2);
  t.is(ledger.balance(wallet), 2n * SOL);
  t.is((await ledger.getSignaturesForAddress(wallet)).length, 2);
});

test('embedded: one process at a time opens a ledger directory', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  const e = await t.throwsAsync(openTestLedger({ dir }), { instanceOf: LedgerLockedError });
  t.is(e?.pid, process.pid);
});

test('embedded: a LOCK left by a dead process with our pid (a restarted container) does not block', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const first = await openTestLedger({ dir });
  await first.close();
  writeFileSync(join(dir, 'LOCK'), String(process.pid)); // as if this pid had crashed holding it
  const again = await openTestLedger({ dir });
  t.teardown(() => again.close());
  t.pass();
});

test('embedded: mainnet has USDC and USDT on SPL Token and USDG on Token-2022 at their real addresses', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const ledger = await openTestLedger({ dir, network: 'chain-mainnet' });
  t.teardown(() => ledger.close());
  t.is(ledger.genesisHash, '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d');
  for (const stable of STABLES['chain-mainnet']) {
    const mint = await ledger.getAccount(stable.mint);
    t.is(mint?.owner, stable.tokenProgramId, stable.symbol);
    t.is(mint?.data[44], 6);
    t.is(encodeBase58(mint!.data.subarray(4, 36)), ledger.mintAuthority.address);
  }
  t.is(await ledger.getAccount(USDC_DEVNET.mint), null, 'devnet USDC is not on mainnet');
  const usdg = STABLES['chain-mainnet'].find((s) => s.symbol === 'USDG')!;
  const payer = Keypair.generate();
  const merchant = Keypair.generate().publicKey.toBase58();
  ledger.airdrop(payer.publicKey.toBase58(), SOL);
  ledger.mintTo(payer.publicKey.toBase58(), usdg.mint, 5_000_000n);
  const sent = await ledger.sendTransaction(
    tokenTransfer({
      owner: payer,
      to: merchant,
      mint: usdg.mint,
      tokenProgram: TOKEN_2022_PROGRAM_ID,
      amount: 2_000_000n,
      blockhash: ledger.latestBlockhash().blockhash,
    }),
  );
  t.true(sent.ok, JSON.stringify(sent));
  t.deepEqual(await ledger.getTokenBalances(merchant), [
    {
      address: ata(merchant, usdg.mint, TOKEN_2022_PROGRAM_ID),
      mint: usdg.mint,
      owner: merchant,
      amount: 2_000_000n,
      decimals: 6,
      tokenProgram: TOKEN_2022_PROGRAM_ID,
    },
  ]);
  const tx = await ledger.getTransaction((sent as { signature: string }).signature);
  t.true(tx!.postTokenBalances.every((b) => b.tokenProgram === TOKEN_2022_PROGRAM_ID));
});

test('embedded: slots advance with time and blockhashes with them', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  // 500 ms slots: the 150-block window (75 s) outlasts a loaded machine starving this process's event loop; three
  // slots are waited for as slots, not as a time
  const ledger = await openTestLedger({ dir, slotMs: 500 });
  t.teardown(() => ledger.close());
  const first = ledger.latestBlockhash();
  const later = await until('three slots later', () => {
    const now = ledger.latestBlockhash();
    return now.slot >= first.slot + 3 && now;
  });
  t.true(later.slot >= first.slot + 3);
  t.not(later.blockhash, first.blockhash);
  t.is(later.lastValidBlockHeight, later.slot + 150);
  t.true(ledger.blockhashValid(first.blockhash));
  const payer = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), SOL);
  const sent = ledger.sendWire(solTransfer(payer, Keypair.generate().publicKey, 1_000_000, first.blockhash));
  t.true(sent.ok);
  const status = ledger.signatureStatus((sent as { signature: string }).signature);
  t.true(status!.slot >= later.slot, "a transaction lands in the current slot, not its blockhash's");
});

test('embedded: durable nonce transactions outlive their blockhash', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  let ledger = await openTestLedger({ dir });
  const payer = Keypair.generate();
  const nonce = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), 2n * SOL);
  const create = new Transaction({ feePayer: payer.publicKey, recentBlockhash: ledger.latestBlockhash().blockhash }).add(
    ...SystemProgram.createNonceAccount({
      fromPubkey: payer.publicKey,
      noncePubkey: nonce.publicKey,
      authorizedPubkey: payer.publicKey,
      lamports: Number(ledger.minimumBalanceForRentExemption(NONCE_ACCOUNT_LENGTH)),
    }).instructions,
  );
  create.sign(payer, nonce);
  t.like(ledger.sendWire(create.serialize()), { ok: true });
  const nonceValue = () => NonceAccount.fromAccountData(Buffer.from(ledger.readAccount(nonce.publicKey.toBase58())!.data)).nonce;
  const durable = (value: string, lamports: number) => {
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: value }).add(
      SystemProgram.nonceAdvance({ noncePubkey: nonce.publicKey, authorizedPubkey: payer.publicKey }),
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: Keypair.generate().publicKey, lamports }),
    );
    tx.sign(payer);
    return tx.serialize();
  };
  const first = nonceValue();
  ledger.advance(500);
  t.false(ledger.blockhashValid(first));
  t.like(ledger.sendWire(durable(first, 1_000_000)), { ok: true });
  const second = nonceValue();
  t.not(second, first);
  t.like(ledger.sendWire(durable(first, 2_000_000)), { ok: false, err: 'BlockhashNotFound' }, 'a used nonce is spent');
  await ledger.close();
  ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  t.is(nonceValue(), second);
  t.like(ledger.sendWire(durable(second, 3_000_000)), { ok: true });
});

test('embedded: malformed and mutated transactions are answered, never crash the process', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  const payer = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), SOL);
  ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 1_000_000n);
  const blockhash = ledger.latestBlockhash().blockhash;
  const seeds = [
    tokenTransfer({ owner: payer, to: Keypair.generate().publicKey, mint: USDC_DEVNET.mint, amount: 1n, blockhash }),
    tokenTransfer({ owner: payer, to: Keypair.generate().publicKey, mint: USDC_DEVNET.mint, amount: 1n, blockhash, version: 0 }),
  ];
  let seed = 7;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
  let reachedTheVm = 0;
  for (let i = 0; i < 3000; i++) {
    const bytes = Buffer.from(seeds[i % 2]!);
    for (let m = 0; m < 1 + Math.floor(random() * 3); m++) {
      const at = random() < 0.7 ? 65 + Math.floor(random() * Math.min(bytes.length - 65, 200)) : Math.floor(random() * bytes.length);
      bytes[at] = random() < 0.5 ? Math.floor(random() * 256) : [0, 1, 0x7f, 0x80, 0xff][Math.floor(random() * 5)]!;
    }
    const wire = random() < 0.1 ? bytes.subarray(0, Math.floor(random() * bytes.length)) : bytes;
    ledger.simulateWire(wire);
    const r = ledger.sendWire(wire, { skipPreflight: random() < 0.5 });
    if (r.ok || r.err !== 'SanitizeFailure') reachedTheVm++;
  }
  t.true(reachedTheVm > 100);
  const fresh = tokenTransfer({
    owner: payer,
    to: Keypair.generate().publicKey,
    mint: USDC_DEVNET.mint,
    amount: 1n,
    blockhash: ledger.latestBlockhash().blockhash,
  });
  t.true(ledger.sendWire(fresh).ok, 'the ledger still works');
});

test('embedded: the faucet helper validates, funds and refuses non-embedded networks', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  const faucet = createFaucet({ 'chain-devnet': ledger });
  const to = Keypair.generate().publicKey.toBase58();
  const result = await faucet({ network: 'chain-devnet', to, sol: '1.5', token: 'usdc', amount: '10.25' });
  t.is(result.airdrop?.lamports, 1_500_000_000n);
  t.like(result.mint, { symbol: 'USDC', mint: USDC_DEVNET.mint, amount: 10_250_000n, decimals: 6, tokenAccount: ata(to, USDC_DEVNET.mint) });
  t.is(ledger.balance(to), 1_500_000_000n);
  t.is((await faucet({ network: 'chain-devnet', to })).airdrop?.lamports, SOL, 'nothing asked: 1 SOL');
  const code = async (request: Parameters<typeof faucet>[0]) => (await t.throwsAsync(faucet(request), { instanceOf: DomainError }))?.code;
  t.is(await code({ network: 'chain-devnet', to: 'nope' }), 'invalid_request');
  t.is(await code({ network: 'chain-devnet', to, token: 'USDC' }), 'invalid_request');
  t.is(await code({ network: 'chain-devnet', to, token: 'USDT', amount: '1' }), 'invalid_request', 'no USDT on devnet');
  t.is(await code({ network: 'chain-devnet', to, token: 'USDC', amount: '0.0000001' }), 'invalid_request');
  t.is(await code({ network: 'chain-devnet', to, sol: '-1' }), 'invalid_request');
  t.is(await code({ network: 'chain-mainnet', to }), 'invalid_request');
  t.is(parseDecimal('10.5', 6), 10_500_000n);
  t.is(parseDecimal('1.1234567', 6), null);
  t.is(parseDecimal('1e3', 6), null);
});

test('embedded: openLedgers composes embedded and rpc ledgers, servers and the faucet', async (t) => {
  const dataDir = await ledgerDir();
  t.teardown(() => removeDir(dataDir));
  const opened = await openLedgers({ dataDir, devnet: 'embedded', mainnet: 'http://127.0.0.1:1', devnetRpcPort: 0, slotMs: 0 });
  t.teardown(() => opened.close());
  t.true(opened.ledgers['chain-devnet'] instanceof LedgerThread, 'the embedded ledger runs in its own thread');
  t.is(opened.embedded['chain-mainnet'], undefined);
  t.is(opened.rpcUrls['chain-mainnet'], 'http://127.0.0.1:1');
  t.regex(opened.rpcUrls['chain-devnet']!, /^http:\/\/127\.0\.0\.1:\d+$/);
  const to = Keypair.generate().publicKey.toBase58();
  await opened.faucet!({ network: 'chain-devnet', to, sol: '2' });
  const viaRpc = new RpcLedger({ url: opened.rpcUrls['chain-devnet']! });
  t.is(await viaRpc.getBalance(to), 2n * SOL);
  t.is((await t.throwsAsync(opened.ledgers['chain-mainnet'].getSlot(), { instanceOf: DomainError }))?.code, 'rpc_unavailable');
  await t.throwsAsync(openLedgers({ dataDir, devnet: 'embedded', mainnet: 'ftp://x' }), { message: /must be http/ });
});

test('embedded: the faucet CLI goes through a running ledger’s JSON-RPC, or opens the files itself', async (t) => {
  const dataDir = await ledgerDir();
  t.teardown(() => removeDir(dataDir));
  const to = Keypair.generate().publicKey.toBase58();
  // a child compiling TypeScript and opening two ledgers: ~4 s alone, past 30 s on a loaded 2-core machine (it is not
  // what this test measures)
  const cli = (...args: string[]) => runTs(fileURLToPath(new URL('../../interfaces/cli/faucet.ts', import.meta.url)), args, { SVC_DATA_DIR: dataDir });

  // stopped: the CLI opens the ledger under its lock
  const direct = await cli('--network', 'devnet', '--to', to, '--sol', '1', '--json');
  t.is(direct.status, 0, direct.stderr);
  t.is(JSON.parse(direct.stdout).airdrop.lamports, '1000000000');

  // running with its JSON-RPC: the CLI asks it, and the running process sees the result at once
  const opened = await openLedgers({ dataDir, devnet: 'embedded', mainnet: 'embedded', devnetRpcPort: 0 });
  const viaRpc = await cli('--network', 'chain-devnet', '--to', to, '--token', 'USDC', '--amount', '3', '--json');
  t.is(viaRpc.status, 0, viaRpc.stderr);
  t.is(JSON.parse(viaRpc.stdout).via, opened.rpcUrls['chain-devnet']);
  t.deepEqual(
    (await opened.ledgers['chain-devnet'].getTokenBalances(to)).map((b) => b.amount),
    [3_000_000n],
  );
  t.is(await opened.ledgers['chain-devnet'].getBalance(to), SOL);

  // running without a JSON-RPC for that network: refused rather than writing behind its back
  const refused = await cli('--network', 'mainnet', '--to', to);
  t.is(refused.status, 1);
  t.regex(refused.stderr, /open in process \d+/);
  await opened.close();
  const after = await runFaucet({ dataDir }, { network: 'chain-mainnet', to, token: 'USDT', amount: '1' });
  t.is(after.via, join(dataDir, 'ledger', 'chain-mainnet'));
});

test('embedded: recorded post balances match the state, also where the cheap reads do not apply', async (t) => {
  const dir = await ledgerDir();
  t.teardown(() => removeDir(dir));
  const ledger = await openTestLedger({ dir });
  t.teardown(() => ledger.close());
  const payer = Keypair.generate();
  const other = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), 5n * SOL);
  ledger.airdrop(other.publicKey.toBase58(), SOL);
  ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 50_000_000n);
  const mint = new PublicKey(USDC_DEVNET.mint);
  const payerAta = new PublicKey(ata(payer.publicKey, USDC_DEVNET.mint));
  const otherAta = new PublicKey(ata(other.publicKey, USDC_DEVNET.mint));
  const send = (...ixs: TransactionInstruction[]) => {
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: ledger.latestBlockhash().blockhash }).add(...ixs);
    tx.sign(payer);
    const sent = ledger.sendWire(tx.serialize());
    if (!sent.ok) throw new Error(JSON.stringify(sent));
    return sent.signature;
  };
  const check = async (signature: string, label: string) => {
    const tx = (await ledger.getTransaction(signature))!;
    for (const [i, key] of tx.accountKeys.entries()) t.is(tx.postBalances[i], ledger.balance(key), `${label}: lamports of ${key}`);
    for (const key of tx.accountKeys) {
      const account = ledger.readAccount(key);
      const recorded = tx.postTokenBalances.find((b) => b.account === key);
      if (account && account.owner === TOKEN_PROGRAM_ID && account.data.length === 165) {
        t.like(
          recorded,
          { amount: Buffer.from(account.data).readBigUInt64LE(64), owner: encodeBase58(account.data.subarray(32, 64)) },
          `${label}: token ${key}`,
        );
      } else t.is(recorded, undefined, `${label}: ${key} is no token account`);
    }
  };
  // a plain payment (the cheap reads)
  await check(send(...tokenTransferInstructions({ owner: payer, to: other.publicKey, mint: USDC_DEVNET.mint, amount: 5_000_000n })), 'payment');
  // SOL sent into an existing token account
  await check(
    send(
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: otherAta, lamports: 1_000_000 }),
      createTransferCheckedInstruction(payerAta, mint, otherAta, payer.publicKey, 1n, 6),
    ),
    'sol into token account',
  );
  // the token account's owner changes
  const newOwner = Keypair.generate().publicKey;
  await check(send(createSetAuthorityInstruction(payerAta, payer.publicKey, AuthorityType.AccountOwner, newOwner)), 'owner change');
  // a pre-funded ATA address becomes a token account (not a signer, not yet a token account)
  const third = Keypair.generate().publicKey;
  const thirdAta = new PublicKey(ata(third, USDC_DEVNET.mint));
  send(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: thirdAta, lamports: 3_000_000 }));
  await check(send(createAssociatedTokenAccountIdempotentInstruction(payer.publicKey, thirdAta, third, mint)), 'pre-funded ATA');
  // an empty token account closed into another token account
  const fourth = Keypair.generate();
  ledger.airdrop(fourth.publicKey.toBase58(), SOL);
  const fourthAta = new PublicKey(ata(fourth.publicKey, USDC_DEVNET.mint));
  send(createAssociatedTokenAccountIdempotentInstruction(payer.publicKey, fourthAta, fourth.publicKey, mint));
  const close = new Transaction({ feePayer: payer.publicKey, recentBlockhash: ledger.latestBlockhash().blockhash }).add(
    createCloseAccountInstruction(fourthAta, thirdAta, fourth.publicKey),
  );
  close.sign(payer, fourth);
  const closed = ledger.sendWire(close.serialize());
  t.true(closed.ok, JSON.stringify(closed));
  await check((closed as { signature: string }).signature, 'close into token account');
  t.is(ledger.readAccount(fourthAta.toBase58()), null);
});
