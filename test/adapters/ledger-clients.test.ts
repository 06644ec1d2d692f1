import test from 'ava';
import {
  Connection,
  Keypair,
  LAMPORTS_PER_SOL,
  PublicKey,
  SystemProgram,
  Transaction,
  sendAndConfirmTransaction,
  type ParsedAccountData,
} from '@solana/web3.js';
import {
  createTransferCheckedInstruction,
  getAccount,
  getMint,
  getOrCreateAssociatedTokenAccount,
  TOKEN_2022_PROGRAM_ID as SPL_TOKEN_2022,
} from '@solana/spl-token';
import {
  AccountRole,
  address,
  airdropFactory,
  appendTransactionMessageInstructions,
  createSolanaRpc,
  createSolanaRpcSubscriptions,
  createTransactionMessage,
  generateKeyPairSigner,
  getAddressEncoder,
  getProgramDerivedAddress,
  getSignatureFromTransaction,
  lamports,
  pipe,
  sendAndConfirmTransactionFactory,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  type Address,
  type Instruction,
} from '@solana/kit';
import { startLedgerRpcServer } from '../../adapters/ledger/embedded/rpc-server.ts';
import { findStable, TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';
import { closeConnection, ledgerDir, openTestLedger, removeDir, USDC_DEVNET } from '../support/ledger.ts';

// Unmodified Solana clients against the embedded ledger's JSON-RPC: web3.js v1 (confirmations over the WebSocket on
// port + 1, found the way web3.js finds it) and @solana/kit (HTTP + PubSub).

async function served(t: { teardown(fn: () => unknown): void }, network: 'chain-devnet' | 'chain-mainnet' = 'chain-devnet') {
  const dir = await ledgerDir();
  const ledger = await openTestLedger({ dir, network, slotMs: 400 });
  const server = await startLedgerRpcServer({ ledger, port: 0 });
  t.teardown(async () => {
    await server.close();
    await ledger.close();
    await removeDir(dir);
  });
  return { ledger, server };
}

test('web3.js: airdrop, SOL transfer, ATA creation and TransferChecked, balances read back', async (t) => {
  const { ledger, server } = await served(t);
  t.is(new URL(server.wsUrl).port, String(Number(new URL(server.url).port) + 1), 'PubSub on port + 1, as web3.js expects');
  const connection = new Connection(server.url, 'confirmed');
  t.teardown(() => closeConnection(connection));
  t.is(await connection.getGenesisHash(), 'EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG');
  t.truthy((await connection.getVersion())['solana-core']);

  const alice = Keypair.generate();
  const bob = Keypair.generate();
  const airdrop = await connection.requestAirdrop(alice.publicKey, 2 * LAMPORTS_PER_SOL);
  const confirmed = await connection.confirmTransaction({ signature: airdrop, ...(await connection.getLatestBlockhash()) }, 'confirmed');
  t.is(confirmed.value.err, null);
  t.is(await connection.getBalance(alice.publicKey), 2 * LAMPORTS_PER_SOL);

  const rent = await connection.getMinimumBalanceForRentExemption(0);
  await sendAndConfirmTransaction(
    connection,
    new Transaction().add(SystemProgram.transfer({ fromPubkey: alice.publicKey, toPubkey: bob.publicKey, lamports: rent + 1_000_000 })),
    [alice],
  );
  t.is(await connection.getBalance(bob.publicKey), rent + 1_000_000);

  // the faucet mints the stable; the client creates the recipient's ATA and pays with TransferChecked
  const usdc = new PublicKey(USDC_DEVNET.mint);
  ledger.mintTo(alice.publicKey.toBase58(), USDC_DEVNET.mint, 25_000_000n);
  const mint = await getMint(connection, usdc);
  t.is(mint.decimals, 6);
  const from = await getOrCreateAssociatedTokenAccount(connection, alice, usdc, alice.publicKey);
  const to = await getOrCreateAssociatedTokenAccount(connection, alice, usdc, bob.publicKey);
  t.is(to.amount, 0n);
  const signature = await sendAndConfirmTransaction(
    connection,
    new Transaction().add(createTransferCheckedInstruction(from.address, usdc, to.address, alice.publicKey, 7_500_000n, 6)),
    [alice],
  );

  t.is((await getAccount(connection, to.address)).amount, 7_500_000n);
  t.deepEqual((await connection.getTokenAccountBalance(from.address)).value, { amount: '17500000', decimals: 6, uiAmount: 17.5, uiAmountString: '17.5' });
  const parsed = await connection.getParsedAccountInfo(to.address);
  const data = parsed.value?.data as ParsedAccountData;
  t.is(data.program, 'spl-token');
  t.is(data.space, 165);
  t.like(data.parsed, {
    type: 'account',
    info: {
      mint: USDC_DEVNET.mint,
      owner: bob.publicKey.toBase58(),
      state: 'initialized',
      isNative: false,
      tokenAmount: { amount: '7500000', decimals: 6, uiAmount: 7.5, uiAmountString: '7.5' },
    },
  });
  const byOwner = await connection.getParsedTokenAccountsByOwner(bob.publicKey, { mint: usdc });
  t.is(byOwner.value.length, 1);
  t.is(byOwner.value[0]!.pubkey.toBase58(), to.address.toBase58());
  const mintParsed = (await connection.getParsedAccountInfo(usdc)).value?.data as ParsedAccountData;
  t.like(mintParsed.parsed, { type: 'mint', info: { decimals: 6, mintAuthority: ledger.mintAuthority.address, supply: '25000000' } });

  const tx = await connection.getParsedTransaction(signature, { maxSupportedTransactionVersion: 0 });
  t.is(tx?.meta?.err, null);
  t.like(tx?.transaction.message.instructions[0], {
    program: 'spl-token',
    parsed: { type: 'transferChecked', info: { source: from.address.toBase58(), destination: to.address.toBase58() } },
  });
  t.deepEqual(tx?.meta?.postTokenBalances?.map((b) => b.uiTokenAmount.amount).sort(), ['17500000', '7500000']);
  const history = await connection.getSignaturesForAddress(bob.publicKey);
  t.true(history.some((h) => h.signature === signature) || (await connection.getSignaturesForAddress(to.address)).some((h) => h.signature === signature));
});

test('web3.js: Token-2022 USDG on the embedded mainnet', async (t) => {
  const { ledger, server } = await served(t, 'chain-mainnet');
  const connection = new Connection(server.url, 'confirmed');
  t.teardown(() => closeConnection(connection));
  t.is(await connection.getGenesisHash(), '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d');
  const usdg = findStable('chain-mainnet', 'USDG')!;
  const mintKey = new PublicKey(usdg.mint);
  t.is((await connection.getAccountInfo(mintKey))?.owner.toBase58(), SPL_TOKEN_2022.toBase58());
  for (const symbol of ['USDC', 'USDT'] as const)
    t.is((await connection.getAccountInfo(new PublicKey(findStable('chain-mainnet', symbol)!.mint)))?.owner.toBase58(), TOKEN_PROGRAM_ID);
  const payer = Keypair.generate();
  const merchant = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), BigInt(LAMPORTS_PER_SOL));
  ledger.mintTo(payer.publicKey.toBase58(), usdg.mint, 3_000_000n);
  const from = await getOrCreateAssociatedTokenAccount(connection, payer, mintKey, payer.publicKey, false, 'confirmed', undefined, SPL_TOKEN_2022);
  const to = await getOrCreateAssociatedTokenAccount(connection, payer, mintKey, merchant.publicKey, false, 'confirmed', undefined, SPL_TOKEN_2022);
  await sendAndConfirmTransaction(
    connection,
    new Transaction().add(createTransferCheckedInstruction(from.address, mintKey, to.address, payer.publicKey, 1_000_000n, 6, [], SPL_TOKEN_2022)),
    [payer],
  );
  t.is((await getAccount(connection, to.address, 'confirmed', SPL_TOKEN_2022)).amount, 1_000_000n);
  const parsed = (await connection.getParsedAccountInfo(to.address)).value?.data as ParsedAccountData;
  t.is(parsed.program, 'spl-token-2022');
  t.like(parsed.parsed, { type: 'account', info: { tokenAmount: { amount: '1000000' }, extensions: [{ extension: 'immutableOwner' }] } });
});

const ATA_PROGRAM = address('ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL');
const SYSTEM_PROGRAM = address('11111111111111111111111111111111');
const TOKEN_PROGRAM = address(TOKEN_PROGRAM_ID);

async function findAta(owner: Address, mint: Address): Promise<Address> {
  const enc = getAddressEncoder();
  const [pda] = await getProgramDerivedAddress({ programAddress: ATA_PROGRAM, seeds: [enc.encode(owner), enc.encode(TOKEN_PROGRAM), enc.encode(mint)] });
  return pda;
}

test('@solana/kit: airdrop, SOL transfer, ATA creation and TransferChecked, balances read back', async (t) => {
  const { ledger, server } = await served(t);
  const rpc = createSolanaRpc(server.url);
  const rpcSubscriptions = createSolanaRpcSubscriptions(server.wsUrl);
  const sendAndConfirm = sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions });
  const airdrop = airdropFactory({ rpc, rpcSubscriptions });

  const alice = await generateKeyPairSigner();
  const bob = await generateKeyPairSigner();
  await airdrop({ recipientAddress: alice.address, lamports: lamports(2_000_000_000n), commitment: 'confirmed' });
  t.is(BigInt((await rpc.getBalance(alice.address).send()).value), 2_000_000_000n);

  const send = async (instructions: Instruction[]) => {
    const { value: latestBlockhash } = await rpc.getLatestBlockhash().send();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(alice, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(latestBlockhash, m),
      (m) => appendTransactionMessageInstructions(instructions, m),
    );
    const signed = await signTransactionMessageWithSigners(message);
    await sendAndConfirm(signed as Parameters<typeof sendAndConfirm>[0], { commitment: 'confirmed' });
    return getSignatureFromTransaction(signed);
  };

  const transfer = new Uint8Array(12);
  new DataView(transfer.buffer).setUint32(0, 2, true);
  new DataView(transfer.buffer).setBigUint64(4, 5_000_000n, true);
  await send([
    {
      programAddress: SYSTEM_PROGRAM,
      accounts: [{ address: alice.address, role: AccountRole.WRITABLE_SIGNER, signer: alice } as never, { address: bob.address, role: AccountRole.WRITABLE }],
      data: transfer,
    },
  ]);
  t.is(BigInt((await rpc.getBalance(bob.address).send()).value), 5_000_000n);

  const mint = address(USDC_DEVNET.mint);
  ledger.mintTo(alice.address, USDC_DEVNET.mint, 9_000_000n);
  const aliceAta = await findAta(alice.address, mint);
  const bobAta = await findAta(bob.address, mint);
  const transferChecked = new Uint8Array(10);
  transferChecked[0] = 12;
  new DataView(transferChecked.buffer).setBigUint64(1, 4_000_000n, true);
  transferChecked[9] = 6;
  const signature = await send([
    {
      programAddress: ATA_PROGRAM,
      accounts: [
        { address: alice.address, role: AccountRole.WRITABLE_SIGNER, signer: alice } as never,
        { address: bobAta, role: AccountRole.WRITABLE },
        { address: bob.address, role: AccountRole.READONLY },
        { address: mint, role: AccountRole.READONLY },
        { address: SYSTEM_PROGRAM, role: AccountRole.READONLY },
        { address: TOKEN_PROGRAM, role: AccountRole.READONLY },
      ],
      data: new Uint8Array([1]),
    },
    {
      programAddress: TOKEN_PROGRAM,
      accounts: [
        { address: aliceAta, role: AccountRole.WRITABLE },
        { address: mint, role: AccountRole.READONLY },
        { address: bobAta, role: AccountRole.WRITABLE },
        { address: alice.address, role: AccountRole.READONLY_SIGNER, signer: alice } as never,
      ],
      data: transferChecked,
    },
  ]);

  t.deepEqual((await rpc.getTokenAccountBalance(bobAta).send()).value, { amount: '4000000', decimals: 6, uiAmount: 4, uiAmountString: '4' });
  const info = await rpc.getAccountInfo(bobAta, { encoding: 'jsonParsed' }).send();
  t.like(info.value?.data, { program: 'spl-token', parsed: { type: 'account', info: { mint, owner: bob.address, tokenAmount: { amount: '4000000' } } } });
  const owned = await rpc.getTokenAccountsByOwner(alice.address, { programId: TOKEN_PROGRAM }, { encoding: 'jsonParsed' }).send();
  t.is(owned.value.length, 1);
  t.is(owned.value[0]!.pubkey, aliceAta);
  t.like(owned.value[0]!.account.data, { parsed: { info: { tokenAmount: { amount: '5000000' } } } });
  const statuses = await rpc.getSignatureStatuses([signature]).send();
  t.is(statuses.value[0]?.err, null);
  const tx = await rpc.getTransaction(signature, { maxSupportedTransactionVersion: 0, encoding: 'json' }).send();
  t.is(tx?.version, 0);
  t.deepEqual(tx?.meta?.postTokenBalances?.map((b) => b.uiTokenAmount.amount).sort(), ['4000000', '5000000']);
});

// Conformance: every RPC method web3.js 1.99's Connection and @solana/kit's createSolanaRpc have, called against one
// embedded ledger with some history; each answer must parse (web3.js checks every result against its superstruct
// schemas) and none may be -32601. The only methods answered with an error are those that need something this
// ledger cannot hold in the call made here (a nonce or stake account is named, not a wallet: a clear -32602).
test('conformance: every RPC method of web3.js Connection and @solana/kit answers in the shape the client parses', async (t) => {
  const { ledger, server } = await served(t);
  const connection = new Connection(server.url, 'confirmed');
  t.teardown(() => closeConnection(connection));
  const payer = Keypair.generate();
  const merchant = Keypair.generate().publicKey;
  ledger.airdrop(payer.publicKey.toBase58(), 2_000_000_000n);
  ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 5_000_000n);
  const { tokenTransfer, ata } = await import('../support/ledger.ts');
  const legacy = ledger.sendWire(
    tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 1_000n, blockhash: ledger.latestBlockhash().blockhash, memo: 'hi' }),
  );
  const v0 = ledger.sendWire(
    tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 2_000n, blockhash: ledger.latestBlockhash().blockhash, version: 0 }),
  );
  if (!legacy.ok || !v0.ok) return t.fail('setup transactions');
  const slot = ledger.signatureStatus(v0.signature)!.slot;
  const usdc = new PublicKey(USDC_DEVNET.mint);
  const payerAta = new PublicKey(ata(payer.publicKey, USDC_DEVNET.mint));
  const tokenProgram = new PublicKey(TOKEN_PROGRAM_ID);
  const { blockhash } = await connection.getLatestBlockhash();

  const failures: string[] = [];
  const check = async (name: string, call: () => Promise<unknown>, expect?: (value: any) => boolean) => {
    try {
      const value = await call();
      if (expect && !expect(value))
        failures.push(`${name}: unexpected ${JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? String(v) : v)).slice(0, 300)}`);
    } catch (e) {
      failures.push(`${name}: ${(e as Error).message}`);
    }
  };

  // ---- web3.js Connection ----
  const c = connection;
  const web3: Record<string, () => Promise<unknown>> = {
    getAccountInfo: () => c.getAccountInfo(payer.publicKey),
    getAccountInfoAndContext: () => c.getAccountInfoAndContext(payerAta),
    getParsedAccountInfo: () => c.getParsedAccountInfo(payerAta),
    getBalance: () => c.getBalance(payer.publicKey),
    getBalanceAndContext: () => c.getBalanceAndContext(payer.publicKey),
    getBlock: () => c.getBlock(slot, { maxSupportedTransactionVersion: 0 }),
    getBlockAccounts: () => c.getBlock(slot, { maxSupportedTransactionVersion: 0, transactionDetails: 'accounts' }),
    getBlockNone: () => c.getBlock(slot, { maxSupportedTransactionVersion: 0, transactionDetails: 'none', rewards: false }),
    getParsedBlock: () => c.getParsedBlock(slot, { maxSupportedTransactionVersion: 0 }),
    getParsedBlockAccounts: () => c.getParsedBlock(slot, { maxSupportedTransactionVersion: 0, transactionDetails: 'accounts' }),
    getBlockSignatures: () => c.getBlockSignatures(slot),
    getBlockHeight: () => c.getBlockHeight(),
    getBlockProduction: () => c.getBlockProduction(),
    getBlockTime: () => c.getBlockTime(slot),
    getBlocks: () => c.getBlocks(0),
    getClusterNodes: () => c.getClusterNodes(),
    getConfirmedBlockSignatures: () => c.getConfirmedBlockSignatures(slot),
    getConfirmedSignaturesForAddress2: () => c.getConfirmedSignaturesForAddress2(merchant),
    getConfirmedTransaction: () => c.getConfirmedTransaction(legacy.signature),
    getParsedConfirmedTransaction: () => c.getParsedConfirmedTransaction(legacy.signature),
    getEpochInfo: () => c.getEpochInfo(),
    getEpochSchedule: () => c.getEpochSchedule(),
    getFeeCalculatorForBlockhash: () => c.getFeeCalculatorForBlockhash(blockhash),
    getFeeForMessage: async () =>
      c.getFeeForMessage(
        new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash })
          .add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: merchant, lamports: 1 }))
          .compileMessage(),
      ),
    getFirstAvailableBlock: () => c.getFirstAvailableBlock(),
    getGenesisHash: () => c.getGenesisHash(),
    getInflationGovernor: () => c.getInflationGovernor(),
    getInflationRate: () => c.getInflationRate(),
    getInflationReward: () => c.getInflationReward([payer.publicKey]),
    getLargestAccounts: () => c.getLargestAccounts(),
    getLatestBlockhashAndContext: () => c.getLatestBlockhashAndContext(),
    getMinimumBalanceForRentExemption: () => c.getMinimumBalanceForRentExemption(165),
    getMinimumLedgerSlot: () => c.getMinimumLedgerSlot(),
    getMultipleAccountsInfo: () => c.getMultipleAccountsInfo([payer.publicKey, payerAta]),
    getMultipleParsedAccounts: () => c.getMultipleParsedAccounts([payer.publicKey, payerAta]),
    getProgramAccounts: () =>
      c.getProgramAccounts(tokenProgram, { filters: [{ dataSize: 165 }, { memcmp: { offset: 32, bytes: payer.publicKey.toBase58() } }] }),
    getProgramAccountsWithContext: () =>
      c.getProgramAccounts(tokenProgram, { withContext: true, filters: [{ memcmp: { offset: 0, bytes: usdc.toBase58() } }] }),
    getParsedProgramAccounts: () => c.getParsedProgramAccounts(tokenProgram, { filters: [{ dataSize: 165 }] }),
    getTokenAccountsByOwner: () => c.getTokenAccountsByOwner(payer.publicKey, { mint: usdc }),
    getParsedTokenAccountsByOwner: () => c.getParsedTokenAccountsByOwner(payer.publicKey, { programId: tokenProgram }),
    getTransaction: () => c.getTransaction(v0.signature, { maxSupportedTransactionVersion: 0 }),
    getTransactions: () => c.getTransactions([legacy.signature, v0.signature], { maxSupportedTransactionVersion: 0 }),
    getParsedTransactions: () => c.getParsedTransactions([legacy.signature], { maxSupportedTransactionVersion: 0 }),
    getRecentBlockhash: () => c.getRecentBlockhash(),
    getRecentPerformanceSamples: () => c.getRecentPerformanceSamples(5),
    getRecentPrioritizationFees: () => c.getRecentPrioritizationFees(),
    getSignatureStatus: () => c.getSignatureStatus(legacy.signature, { searchTransactionHistory: true }),
    getSignaturesForAddress: () => c.getSignaturesForAddress(merchant, { limit: 1 }),
    getSlot: () => c.getSlot(),
    getSlotLeader: () => c.getSlotLeader(),
    getSlotLeaders: () => c.getSlotLeaders(0, 10),
    getStakeMinimumDelegation: () => c.getStakeMinimumDelegation(),
    getSupply: () => c.getSupply(),
    getTotalSupply: () => c.getTotalSupply(),
    getTokenAccountBalance: () => c.getTokenAccountBalance(payerAta),
    getTokenLargestAccounts: () => c.getTokenLargestAccounts(usdc),
    getTokenSupply: () => c.getTokenSupply(usdc),
    getTransactionCount: () => c.getTransactionCount(),
    getVersion: () => c.getVersion(),
    getVoteAccounts: () => c.getVoteAccounts(),
    isBlockhashValid: () => c.isBlockhashValid(blockhash),
    getAddressLookupTable: () => c.getAddressLookupTable(Keypair.generate().publicKey),
  };
  for (const [name, call] of Object.entries(web3)) await check(`web3.js ${name}`, call);
  // getLeaderSchedule: this node leads all 432,000 slots of the epoch; the clients' parsers take seconds over that
  // many numbers, so its shape is read here as plain JSON
  const schedule = (await (
    await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"getLeaderSchedule"}' })
  ).json()) as { result: Record<string, number[]> };
  t.deepEqual(Object.keys(schedule.result), [ledger.faucet.address]);
  t.is(schedule.result[ledger.faucet.address]!.length, 432_000);
  await check(
    'web3.js getStakeActivation (a wallet is no stake account)',
    async () => {
      try {
        await c.getStakeActivation(payer.publicKey);
        return 'answered';
      } catch (e) {
        return (e as Error).message;
      }
    },
    (m: string) => /not a stake account/.test(m),
  );

  // ---- @solana/kit createSolanaRpc ----
  const rpc = createSolanaRpc(server.url);
  const a = (k: PublicKey) => address(k.toBase58());
  const sig = (s: string) => s as Parameters<typeof rpc.getTransaction>[0];
  const big = BigInt(slot);
  const kit: Record<string, () => { send(): Promise<unknown> }> = {
    getAccountInfo: () => rpc.getAccountInfo(a(payerAta), { encoding: 'jsonParsed' }),
    getAgGenesisCert: () => rpc.getAgGenesisCert(),
    getBalance: () => rpc.getBalance(a(payer.publicKey)),
    getBlock: () => rpc.getBlock(big, { maxSupportedTransactionVersion: 0 }),
    getBlockSignatures: () => rpc.getBlock(big, { transactionDetails: 'signatures' }),
    getBlockCommitment: () => rpc.getBlockCommitment(big),
    getBlockHeight: () => rpc.getBlockHeight(),
    getBlockProduction: () => rpc.getBlockProduction(),
    getBlocks: () => rpc.getBlocks(0n, big),
    getBlocksWithLimit: () => rpc.getBlocksWithLimit(0n, 5),
    getBlockTime: () => rpc.getBlockTime(big),
    getClusterNodes: () => rpc.getClusterNodes(),
    getEpochInfo: () => rpc.getEpochInfo(),
    getEpochSchedule: () => rpc.getEpochSchedule(),
    getFirstAvailableBlock: () => rpc.getFirstAvailableBlock(),
    getGenesisHash: () => rpc.getGenesisHash(),
    getHealth: () => rpc.getHealth(),
    getHighestSnapshotSlot: () => rpc.getHighestSnapshotSlot(),
    getIdentity: () => rpc.getIdentity(),
    getInflationGovernor: () => rpc.getInflationGovernor(),
    getInflationRate: () => rpc.getInflationRate(),
    getInflationReward: () => rpc.getInflationReward([a(payer.publicKey)]),
    getLargestAccounts: () => rpc.getLargestAccounts({ filter: 'circulating' }),
    getLatestBlockhash: () => rpc.getLatestBlockhash(),
    getLeaderSchedule: () => rpc.getLeaderSchedule(10n ** 12n),
    getMaxRetransmitSlot: () => rpc.getMaxRetransmitSlot(),
    getMaxShredInsertSlot: () => rpc.getMaxShredInsertSlot(),
    getMinimumBalanceForRentExemption: () => rpc.getMinimumBalanceForRentExemption(0n),
    getMultipleAccounts: () => rpc.getMultipleAccounts([a(payer.publicKey)], { encoding: 'base64' }),
    getProgramAccounts: () => rpc.getProgramAccounts(address(TOKEN_PROGRAM_ID), { encoding: 'base64', filters: [{ dataSize: 165n }] }),
    getRecentPerformanceSamples: () => rpc.getRecentPerformanceSamples(),
    getRecentPrioritizationFees: () => rpc.getRecentPrioritizationFees(),
    getSignaturesForAddress: () => rpc.getSignaturesForAddress(a(merchant), { before: sig(v0.signature) }),
    getSignatureStatuses: () => rpc.getSignatureStatuses([sig(legacy.signature)]),
    getSlot: () => rpc.getSlot(),
    getSlotLeader: () => rpc.getSlotLeader(),
    getSlotLeaders: () => rpc.getSlotLeaders(0n, 3),
    getStakeMinimumDelegation: () => rpc.getStakeMinimumDelegation(),
    getSupply: () => rpc.getSupply(),
    getTokenAccountBalance: () => rpc.getTokenAccountBalance(a(payerAta)),
    getTokenAccountsByDelegate: () => rpc.getTokenAccountsByDelegate(a(payer.publicKey), { programId: address(TOKEN_PROGRAM_ID) }, { encoding: 'base64' }),
    getTokenAccountsByOwner: () => rpc.getTokenAccountsByOwner(a(payer.publicKey), { mint: a(usdc) }, { encoding: 'base64' }),
    getTokenLargestAccounts: () => rpc.getTokenLargestAccounts(a(usdc)),
    getTokenSupply: () => rpc.getTokenSupply(a(usdc)),
    getTransaction: () => rpc.getTransaction(sig(v0.signature), { maxSupportedTransactionVersion: 0, encoding: 'jsonParsed' }),
    getTransactionCount: () => rpc.getTransactionCount(),
    getTransactionsForAddress: () => rpc.getTransactionsForAddress(a(merchant), { limit: 1 }),
    getVersion: () => rpc.getVersion(),
    getVoteAccounts: () => rpc.getVoteAccounts(),
    isBlockhashValid: () => rpc.isBlockhashValid(blockhash as Parameters<typeof rpc.isBlockhashValid>[0]),
    minimumLedgerSlot: () => rpc.minimumLedgerSlot(),
    requestAirdrop: () => rpc.requestAirdrop(a(merchant), lamports(1_000_000n)),
  };
  for (const [name, call] of Object.entries(kit)) await check(`kit ${name}`, () => call().send());
  t.deepEqual(failures, []);
});
