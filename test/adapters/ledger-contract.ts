import type { ExecutionContext, TestFn } from 'ava';
import { Keypair, PublicKey, Transaction, SystemProgram } from '@solana/web3.js';
import { getBase58Decoder } from '@solana/kit';
import type { AddressActivity, Ledger } from '../../domain/ports/ledger.ts';
import { until } from '../support/until.ts';
import { TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';
import { ata, MEMO_PROGRAM, randomHash, randomSignature, solTransfer, tokenTransfer, USDC_DEVNET, waitForCommitment } from '../support/ledger.ts';

// The Ledger port's contract: every adapter passes the same tests, so they stay interchangeable. A harness wraps an
// adapter together with the embedded ledger behind it (for funding and for moving the clock).

export interface LedgerHarness {
  ledger: Ledger;
  /** SOL from the faucet */
  airdrop(to: string, lamports: bigint): Promise<void>;
  /** devnet USDC (atomic units) to the owner's ATA */
  mintUsdc(owner: string, amount: bigint): Promise<void>;
  /** move the chain forward */
  advance(slots: number): Promise<void>;
  close(): Promise<void>;
}

const SYSTEM = '11111111111111111111111111111111';
const SOL = 1_000_000_000n;

export function ledgerContract(test: TestFn, name: string, open: () => Promise<LedgerHarness>): void {
  const harness = async (t: ExecutionContext) => {
    const h = await open();
    t.teardown(() => h.close());
    return h;
  };
  const funded = async (h: LedgerHarness, lamports = 2n * SOL) => {
    const kp = Keypair.generate();
    await h.airdrop(kp.publicKey.toBase58(), lamports);
    return kp;
  };

  test(`${name}: a blockhash is valid for 150 blocks, then transactions using it are rejected`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    const height = await h.ledger.getBlockHeight();
    const latest = await h.ledger.getLatestBlockhash();
    t.is(latest.lastValidBlockHeight, height + 150);
    t.true(latest.slot >= 0);
    t.true(await h.ledger.isBlockhashValid(latest.blockhash));
    t.false(await h.ledger.isBlockhashValid(randomHash()));
    t.false(await h.ledger.isBlockhashValid('not a blockhash'));
    await h.advance(150);
    t.true(await h.ledger.isBlockhashValid(latest.blockhash), 'still valid at lastValidBlockHeight');
    await h.advance(1);
    t.false(await h.ledger.isBlockhashValid(latest.blockhash));
    t.is(await h.ledger.getBlockHeight(), height + 151);
    t.true((await h.ledger.getSlot()) >= height + 151);
    const sent = await h.ledger.sendTransaction(solTransfer(payer, Keypair.generate().publicKey, 1_000_000, latest.blockhash));
    t.like(sent, { ok: false, err: 'BlockhashNotFound' });
    const fresh = await h.ledger.getLatestBlockhash();
    t.not(fresh.blockhash, latest.blockhash);
    t.true((await h.ledger.sendTransaction(solTransfer(payer, Keypair.generate().publicKey, 1_000_000, fresh.blockhash))).ok);
  });

  test(`${name}: accounts and balances`, async (t) => {
    const h = await harness(t);
    const wallet = await funded(h, 3n * SOL);
    const address = wallet.publicKey.toBase58();
    const missing = Keypair.generate().publicKey.toBase58();
    const account = await h.ledger.getAccount(address);
    t.deepEqual(account, { address, lamports: 3n * SOL, owner: SYSTEM, data: new Uint8Array(0), executable: false });
    t.is(await h.ledger.getAccount(missing), null);
    t.is(await h.ledger.getAccount('nope'), null);
    const program = await h.ledger.getAccount(TOKEN_PROGRAM_ID);
    t.true(program?.executable);
    const mint = await h.ledger.getAccount(USDC_DEVNET.mint);
    t.is(mint?.owner, TOKEN_PROGRAM_ID);
    t.is(mint?.data.length, 82);
    t.is(mint?.data[44], 6, 'decimals');
    const many = await h.ledger.getMultipleAccounts([address, missing, USDC_DEVNET.mint]);
    t.is(many.length, 3);
    t.is(many[0]?.lamports, 3n * SOL);
    t.is(many[1], null);
    t.is(many[2]?.owner, TOKEN_PROGRAM_ID);
    t.is(await h.ledger.getBalance(address), 3n * SOL);
    t.is(await h.ledger.getBalance(missing), 0n);
    t.is(typeof (await h.ledger.getBalance(address)), 'bigint');
  });

  test(`${name}: token balances of an owner`, async (t) => {
    const h = await harness(t);
    const owner = Keypair.generate().publicKey.toBase58();
    t.deepEqual(await h.ledger.getTokenBalances(owner), []);
    await h.mintUsdc(owner, 10_000_000n);
    const expected = { address: ata(owner, USDC_DEVNET.mint), mint: USDC_DEVNET.mint, owner, amount: 10_000_000n, decimals: 6, tokenProgram: TOKEN_PROGRAM_ID };
    t.deepEqual(await h.ledger.getTokenBalances(owner), [expected]);
    t.deepEqual(await h.ledger.getTokenBalances(owner, { mint: USDC_DEVNET.mint }), [expected]);
    t.deepEqual(await h.ledger.getTokenBalances(owner, { mint: Keypair.generate().publicKey.toBase58() }), []);
  });

  test(`${name}: simulate reports success, failure and logs without changing state`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    await h.mintUsdc(payer.publicKey.toBase58(), 1_000_000n);
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const ok = await h.ledger.simulateTransaction(solTransfer(payer, Keypair.generate().publicKey, 5_000_000, blockhash));
    t.is(ok.err, null);
    t.true(ok.logs.includes(`Program ${SYSTEM} success`));
    t.true(ok.unitsConsumed > 0);
    const failing = tokenTransfer({ owner: payer, to: Keypair.generate().publicKey, mint: USDC_DEVNET.mint, amount: 2_000_000n, blockhash });
    const bad = await h.ledger.simulateTransaction(failing);
    t.deepEqual(bad.err, { InstructionError: [1, { Custom: 1 }] });
    t.true(bad.logs.some((l) => l.includes('insufficient funds')));
    t.is(await h.ledger.getBalance(payer.publicKey.toBase58()), 2n * SOL, 'simulation charged nothing');
    // unsigned: simulation does not verify signatures unless asked
    const unsigned = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: Keypair.generate().publicKey, lamports: 5_000_000 }),
    );
    const wire = unsigned.serialize({ requireAllSignatures: false, verifySignatures: false });
    t.is((await h.ledger.simulateTransaction(wire)).err, null);
    t.is((await h.ledger.simulateTransaction(wire, { sigVerify: true })).err, 'SignatureFailure');
    t.is((await h.ledger.simulateTransaction(new Uint8Array([1, 2, 3]))).err, 'SanitizeFailure');
    await h.advance(151);
    t.is((await h.ledger.simulateTransaction(solTransfer(payer, Keypair.generate().publicKey, 5_000_000, blockhash))).err, 'BlockhashNotFound');
  });

  test(`${name}: waitForSignature answers when the signature reaches the commitment, null for an unknown one at its deadline`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const wire = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, blockhash);
    const signature = getBase58Decoder().decode(wire.subarray(1, 65));
    // Waiting before the transaction exists: the answer comes when it lands and is confirmed (no poll needed).
    const waiting = h.ledger.waitForSignature(signature, { timeoutMs: 20_000 });
    const sent = await h.ledger.sendTransaction(wire);
    t.true(sent.ok);
    const confirmed = await waiting;
    t.truthy(confirmed);
    t.not(confirmed!.confirmationStatus, 'processed');
    t.is(confirmed!.err, null);
    const finalized = await h.ledger.waitForSignature(signature, { commitment: 'finalized', timeoutMs: 20_000 });
    t.is(finalized?.confirmationStatus, 'finalized');
    t.is(await h.ledger.waitForSignature(randomSignature(), { timeoutMs: 50 }), null);
    t.is(await h.ledger.waitForSignature('garbage', { timeoutMs: 10 }), null);
  });

  test(`${name}: followAddresses: onLive once followed, then each transaction touching a followed address (once it is confirmed), no other`, async (t) => {
    const h = await harness(t);
    if (!h.ledger.followAddresses) return void t.pass('this adapter never notifies: its follower polls');
    const payer = await funded(h);
    const watched = Keypair.generate().publicKey.toBase58();
    const activities: AddressActivity[] = [];
    let lives = 0;
    // a gap before the first onLive (a socket slow to open on a busy machine) only delays it
    const feed = h.ledger.followAddresses({ onActivity: (a) => activities.push(a), onLive: () => lives++, onGap: () => {} });
    t.teardown(() => feed.close());
    feed.follow([watched]);
    await until('live', () => lives >= 1);
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const elsewhere = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, blockhash);
    const toWatched = solTransfer(payer, new PublicKey(watched), 1_000_000, blockhash);
    t.true((await h.ledger.sendTransaction(elsewhere)).ok);
    t.true((await h.ledger.sendTransaction(toWatched)).ok);
    const signature = getBase58Decoder().decode(toWatched.subarray(1, 65));
    // notifications come in ledger order: one about `elsewhere` would have come first
    const [told] = await until('notified', () => (activities.length ? activities : undefined));
    t.like(told, { signature, err: null, addresses: [watched] });
    // a node may tell it before its confirmed read answers (the embedded JSON-RPC's logs come at processed): wait for it
    t.truthy(await h.ledger.waitForSignature(signature, { timeoutMs: 20_000 }));
    t.is((await h.ledger.getTransaction(signature))?.signature, signature);
    t.is(activities.length, 1);
  });

  test(`${name}: send lands a payment: status, history and the transaction with its balances`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    await h.mintUsdc(payer.publicKey.toBase58(), 5_000_000n);
    const merchant = Keypair.generate().publicKey;
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const wire = tokenTransfer({
      owner: payer,
      to: merchant,
      mint: USDC_DEVNET.mint,
      amount: 1_250_000n,
      blockhash,
      memo: 'order-42',
      computeBudget: { units: 100_000, microLamports: 10_000 },
    });
    const sent = await h.ledger.sendTransaction(wire);
    t.true(sent.ok);
    if (!sent.ok) return;
    t.is(sent.signature, getBase58Decoder().decode(wire.subarray(1, 65)), 'the signature is the first one of the transaction');

    const [first, unknown] = await h.ledger.getSignatureStatuses([sent.signature, randomSignature()]);
    t.is(unknown, null);
    t.is(first?.err, null, 'known from processed on');
    const status = await waitForCommitment(h.ledger, sent.signature, 'confirmed');
    t.is(status.err, null);
    t.is((await waitForCommitment(h.ledger, sent.signature, 'finalized')).confirmationStatus, 'finalized');
    t.deepEqual(await h.ledger.getSignatureStatuses(['garbage']), [null]);

    const merchantAta = ata(merchant, USDC_DEVNET.mint);
    t.deepEqual(
      (await h.ledger.getTokenBalances(merchant.toBase58())).map((b) => b.amount),
      [1_250_000n],
    );
    const history = await h.ledger.getSignaturesForAddress(merchant.toBase58());
    t.is(history.length, 1);
    t.like(history[0], { signature: sent.signature, slot: status!.slot, err: null, memo: '[8] order-42' });
    t.is(typeof history[0]!.blockTime, 'number');

    const tx = await h.ledger.getTransaction(sent.signature);
    t.truthy(tx);
    if (!tx) return;
    t.is(tx.signature, sent.signature);
    t.is(tx.slot, status!.slot);
    t.is(tx.version, 'legacy');
    t.is(tx.err, null);
    t.is(tx.recentBlockhash, blockhash);
    t.deepEqual(tx.signers, [payer.publicKey.toBase58()]);
    t.deepEqual(Buffer.from(tx.wire), Buffer.from(wire), 'the signed transaction as sent');
    t.is(tx.accountKeys[0], payer.publicKey.toBase58());
    t.true(tx.accountKeys.includes(merchantAta));
    t.is(tx.fee, 5_000n + 1_000n, '5000 per signature + ceil(100k units × 10k µlamports)');
    t.is(tx.preBalances.length, tx.accountKeys.length);
    const sum = (xs: bigint[]) => xs.reduce((a, b) => a + b, 0n);
    t.is(sum(tx.preBalances) - sum(tx.postBalances), tx.fee);
    t.is(typeof tx.preBalances[0], 'bigint');
    const payerAta = ata(payer.publicKey, USDC_DEVNET.mint);
    const token = (list: typeof tx.preTokenBalances, account: string) => list.find((b) => b.account === account);
    t.like(token(tx.preTokenBalances, payerAta), {
      amount: 5_000_000n,
      mint: USDC_DEVNET.mint,
      owner: payer.publicKey.toBase58(),
      decimals: 6,
      tokenProgram: TOKEN_PROGRAM_ID,
    });
    t.like(token(tx.postTokenBalances, payerAta), { amount: 3_750_000n });
    t.is(token(tx.preTokenBalances, merchantAta), undefined, 'the ATA did not exist before');
    t.like(token(tx.postTokenBalances, merchantAta), { amount: 1_250_000n, owner: merchant.toBase58() });
    t.is(tx.accountKeys[token(tx.postTokenBalances, merchantAta)!.accountIndex], merchantAta);
    t.deepEqual(
      tx.instructions.map((i) => i.programId),
      [
        'ComputeBudget111111111111111111111111111111',
        'ComputeBudget111111111111111111111111111111',
        'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL',
        TOKEN_PROGRAM_ID,
        MEMO_PROGRAM.toBase58(),
      ],
    );
    t.is(Buffer.from(tx.instructions[4]!.data).toString(), 'order-42');
    t.deepEqual(tx.instructions[3]!.accounts, [payerAta, USDC_DEVNET.mint, merchantAta, payer.publicKey.toBase58()]);
    t.true(tx.innerInstructions === null || tx.innerInstructions.some((g) => g.index === 2), 'the ATA creation invoked the system and token programs');
    t.true(tx.logs.some((l) => l.includes('Program log: Memo (len 8)')));
    t.true((tx.unitsConsumed ?? 1) > 0);
    t.is(await h.ledger.getTransaction(randomSignature()), null);
  });

  test(`${name}: rejected transactions leave no trace and cost nothing`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    await h.mintUsdc(payer.publicKey.toBase58(), 1_000_000n);
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const before = await h.ledger.getBalance(payer.publicKey.toBase58());

    const tooMuch = await h.ledger.sendTransaction(
      tokenTransfer({ owner: payer, to: Keypair.generate().publicKey, mint: USDC_DEVNET.mint, amount: 9_000_000n, blockhash }),
    );
    t.false(tooMuch.ok);
    if (tooMuch.ok) return;
    t.deepEqual(tooMuch.err, { InstructionError: [1, { Custom: 1 }] });
    t.true(tooMuch.logs.some((l) => l.includes('insufficient funds')));
    t.truthy(tooMuch.signature);
    t.deepEqual(await h.ledger.getSignatureStatuses([tooMuch.signature!]), [null]);
    t.is(await h.ledger.getBalance(payer.publicKey.toBase58()), before);

    const tampered = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, blockhash);
    tampered[10] = tampered[10]! ^ 0xff;
    t.like(await h.ledger.sendTransaction(tampered), { ok: false, err: 'SignatureFailure' });
    t.like(await h.ledger.sendTransaction(new Uint8Array([1, 2, 3])), { ok: false, err: 'SanitizeFailure', signature: null });

    const once = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, blockhash);
    t.true((await h.ledger.sendTransaction(once)).ok);
    t.like(await h.ledger.sendTransaction(once), { ok: false, err: 'AlreadyProcessed' });

    const poor = Keypair.generate();
    t.like(await h.ledger.sendTransaction(solTransfer(poor, Keypair.generate().publicKey, 1_000_000, blockhash)), { ok: false, err: 'AccountNotFound' });
  });

  test(`${name}: without preflight a failing transaction lands failed and pays its fee`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    await h.mintUsdc(payer.publicKey.toBase58(), 1_000_000n);
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const before = await h.ledger.getBalance(payer.publicKey.toBase58());
    const sent = await h.ledger.sendTransaction(
      tokenTransfer({ owner: payer, to: Keypair.generate().publicKey, mint: USDC_DEVNET.mint, amount: 9_000_000n, blockhash }),
      { skipPreflight: true },
    );
    t.true(sent.ok);
    if (!sent.ok) return;
    const [status] = await h.ledger.getSignatureStatuses([sent.signature]);
    t.deepEqual(status?.err, { InstructionError: [1, { Custom: 1 }] });
    t.is(await h.ledger.getBalance(payer.publicKey.toBase58()), before - 5_000n);
    const tx = await h.ledger.getTransaction(sent.signature);
    t.deepEqual(tx?.err, { InstructionError: [1, { Custom: 1 }] });
    t.is(tx?.fee, 5_000n);
    t.deepEqual((await h.ledger.getSignaturesForAddress(payer.publicKey.toBase58(), { limit: 1 }))[0]?.err, { InstructionError: [1, { Custom: 1 }] });
  });

  test(`${name}: signatures for an address, newest first, with limit, before and until`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    const watched = Keypair.generate().publicKey;
    const sigs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { blockhash } = await h.ledger.getLatestBlockhash();
      const sent = await h.ledger.sendTransaction(solTransfer(payer, watched, 1_000_000 + i, blockhash));
      t.true(sent.ok);
      if (sent.ok) sigs.push(sent.signature);
    }
    const [s1, s2, s3] = sigs as [string, string, string];
    const list = async (options?: Parameters<Ledger['getSignaturesForAddress']>[1]) =>
      (await h.ledger.getSignaturesForAddress(watched.toBase58(), options)).map((s) => s.signature);
    t.deepEqual(await list(), [s3, s2, s1]);
    t.deepEqual(await list({ limit: 2 }), [s3, s2]);
    t.deepEqual(await list({ before: s3 }), [s2, s1]);
    t.deepEqual(await list({ until: s1 }), [s3, s2]);
    t.deepEqual(await list({ before: s3, until: s1 }), [s2]);
    t.deepEqual(await h.ledger.getSignaturesForAddress(Keypair.generate().publicKey.toBase58()), []);
    t.true((await list()).length === 3 && (await h.ledger.getSignaturesForAddress(payer.publicKey.toBase58())).length >= 3, 'the fee payer is indexed too');
  });

  test(`${name}: version 0 transactions`, async (t) => {
    const h = await harness(t);
    const payer = await funded(h);
    await h.mintUsdc(payer.publicKey.toBase58(), 2_000_000n);
    const merchant = Keypair.generate().publicKey;
    const { blockhash } = await h.ledger.getLatestBlockhash();
    const sent = await h.ledger.sendTransaction(
      tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 2_000_000n, blockhash, version: 0 }),
    );
    t.true(sent.ok);
    if (!sent.ok) return;
    const tx = await h.ledger.getTransaction(sent.signature);
    t.is(tx?.version, 0);
    t.deepEqual(
      (await h.ledger.getTokenBalances(merchant.toBase58())).map((b) => b.amount),
      [2_000_000n],
    );
  });
}
