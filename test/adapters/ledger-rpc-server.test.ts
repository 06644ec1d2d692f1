import test, { type ExecutionContext } from 'ava';
import { Keypair, Message, PublicKey } from '@solana/web3.js';
import WebSocket from 'ws';
import { ADMIN_REFUSED, LIMIT_REACHED, startLedgerRpcServer, type PubSubLimits } from '../../adapters/ledger/embedded/rpc-server.ts';
import { ADMIN_HEADER } from '../../adapters/ledger/embedded/keys.ts';
import { TOKEN_PROGRAM_ID } from '../../domain/shared/network.ts';
import { ata, ledgerDir, openTestLedger, removeDir, solTransfer, tokenTransfer, USDC_DEVNET, waitForCommitment } from '../support/ledger.ts';

// The embedded ledger's JSON-RPC on the wire: the error objects, shapes and PubSub that Solana clients rely on.

const ADMIN_SECRET = 'a'.repeat(64);

async function served(t: ExecutionContext, options: { network?: 'chain-devnet' | 'chain-mainnet'; host?: string; limits?: PubSubLimits } = {}) {
  const dir = await ledgerDir();
  const ledger = await openTestLedger({ dir, network: options.network ?? 'chain-devnet' });
  const server = await startLedgerRpcServer({ ledger, port: 0, host: options.host, adminSecret: ADMIN_SECRET, limits: options.limits });
  t.teardown(async () => {
    await server.close();
    await ledger.close();
    await removeDir(dir);
  });
  const post = async (body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return (await res.json()) as any;
  };
  const call = async (method: string, params?: unknown[]) => post({ jsonrpc: '2.0', id: 1, method, params });
  /** a ledger-admin call, with the secret by default */
  const admin = async (method: string, params: unknown[], secret: string | null = ADMIN_SECRET) =>
    post({ jsonrpc: '2.0', id: 1, method, params }, secret === null ? {} : { [ADMIN_HEADER]: secret });
  return { ledger, server, post, call, admin };
}

test('rpc server: JSON-RPC 2.0 envelopes, batches and the standard error codes', async (t) => {
  const { server, post, call } = await served(t);
  t.deepEqual(await call('getHealth'), { jsonrpc: '2.0', result: 'ok', id: 1 });
  t.is(await (await fetch(`${server.url}/health`)).text(), 'ok');
  t.like(await call('nope'), { error: { code: -32601, message: 'Method not found' }, id: 1 });
  t.like(await post('{not json'), { error: { code: -32700 }, id: null });
  t.like(await post([]), { error: { code: -32600 } });
  t.like(await post({ id: 3, method: 'getSlot' }), { error: { code: -32600 }, id: 3 });
  t.like(await call('getBalance', ['not-an-address']), { error: { code: -32602 } });
  t.like(await call('getSlot', [{ minContextSlot: 10_000 }]), { error: { code: -32016, data: { contextSlot: 0 } } });
  const batch = await post([
    { jsonrpc: '2.0', id: 'a', method: 'getSlot' },
    { jsonrpc: '2.0', id: 'b', method: 'nope' },
    { jsonrpc: '2.0', id: 'c', method: 'getGenesisHash' },
  ]);
  t.deepEqual(
    batch.map((r: { id: string }) => r.id),
    ['a', 'b', 'c'],
  );
  t.is(batch[0].result, 0);
  t.is(batch[1].error.code, -32601);
  t.is(batch[2].result, 'EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG');
});

test('rpc server: response shapes of reads', async (t) => {
  const { ledger, call } = await served(t);
  const owner = Keypair.generate().publicKey.toBase58();
  ledger.airdrop(owner, 1_000_000_000n);
  ledger.mintTo(owner, USDC_DEVNET.mint, 1_500_000n);
  const latest = await call('getLatestBlockhash', [{ commitment: 'finalized' }]);
  t.like(latest.result, { context: { slot: 0 }, value: { lastValidBlockHeight: 150 } });
  t.is(typeof latest.result.context.apiVersion, 'string');
  t.like(await call('isBlockhashValid', [latest.result.value.blockhash, { commitment: 'processed' }]), { result: { value: true } });
  t.is((await call('getMinimumBalanceForRentExemption', [165])).result, 2_039_280);
  t.like((await call('getEpochInfo')).result, { absoluteSlot: 0, blockHeight: 0, epoch: 0, slotsInEpoch: 432_000 });

  const base64 = (await call('getAccountInfo', [owner, { encoding: 'base64' }])).result.value;
  t.deepEqual(base64, {
    data: ['', 'base64'],
    executable: false,
    lamports: 1_000_000_000,
    owner: '11111111111111111111111111111111',
    rentEpoch: Number(18_446_744_073_709_551_615n),
    space: 0,
  });
  t.is((await call('getAccountInfo', [owner])).result.value.data, '', 'default encoding: legacy base58 string');
  t.is((await call('getAccountInfo', [Keypair.generate().publicKey.toBase58()])).result.value, null);
  const tokenAccount = ata(owner, USDC_DEVNET.mint);
  const parsed = (await call('getAccountInfo', [tokenAccount, { encoding: 'jsonParsed' }])).result.value;
  t.deepEqual(parsed.data, {
    program: 'spl-token',
    parsed: {
      info: {
        isNative: false,
        mint: USDC_DEVNET.mint,
        owner,
        state: 'initialized',
        tokenAmount: { amount: '1500000', decimals: 6, uiAmount: 1.5, uiAmountString: '1.5' },
      },
      type: 'account',
    },
    space: 165,
  });
  t.is(parsed.owner, TOKEN_PROGRAM_ID);
  const sliced = (await call('getAccountInfo', [tokenAccount, { encoding: 'base64', dataSlice: { offset: 64, length: 8 } }])).result.value;
  t.deepEqual(Buffer.from(sliced.data[0], 'base64'), Buffer.from([0x60, 0xe3, 0x16, 0, 0, 0, 0, 0]));
  const many = (await call('getMultipleAccounts', [[owner, tokenAccount, Keypair.generate().publicKey.toBase58()], { encoding: 'jsonParsed' }])).result.value;
  t.is(many.length, 3);
  t.deepEqual(many[0].data, ['', 'base64'], 'jsonParsed falls back to base64 for other programs');
  t.is(many[1].data.parsed.type, 'account');
  t.is(many[2], null);
  t.like((await call('getAccountInfo', [USDC_DEVNET.mint, { encoding: 'jsonParsed' }])).result.value.data, {
    program: 'spl-token',
    parsed: { type: 'mint', info: { decimals: 6, supply: '1500000', isInitialized: true, freezeAuthority: null } },
  });
  t.like((await call('getTokenAccountBalance', [tokenAccount])).result.value, { amount: '1500000', decimals: 6, uiAmountString: '1.5' });
  t.like(await call('getTokenAccountBalance', [owner]), { error: { code: -32602 } });
  t.like((await call('getTokenSupply', [USDC_DEVNET.mint])).result.value, { amount: '1500000' });
  const byProgram = (await call('getTokenAccountsByOwner', [owner, { programId: TOKEN_PROGRAM_ID }, { encoding: 'base64' }])).result.value;
  t.is(byProgram.length, 1);
  t.is(byProgram[0].pubkey, tokenAccount);
  t.is(byProgram[0].account.data[1], 'base64');
  t.like(await call('getTokenAccountsByOwner', [owner, {}]), { error: { code: -32602 } });
  const message = new Message({
    header: { numRequiredSignatures: 1, numReadonlySignedAccounts: 0, numReadonlyUnsignedAccounts: 1 },
    accountKeys: [owner, '11111111111111111111111111111111'],
    recentBlockhash: latest.result.value.blockhash,
    instructions: [],
  });
  t.is((await call('getFeeForMessage', [message.serialize().toString('base64')])).result.value, 5000);
});

test('rpc server: sendTransaction and simulateTransaction errors are agave’s', async (t) => {
  const { ledger, call } = await served(t);
  const payer = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
  const blockhash = ledger.latestBlockhash().blockhash;
  const failing = tokenTransfer({ owner: payer, to: Keypair.generate().publicKey, mint: USDC_DEVNET.mint, amount: 1n, blockhash });
  const preflight = await call('sendTransaction', [Buffer.from(failing).toString('base64'), { encoding: 'base64' }]);
  t.is(preflight.error.code, -32002);
  t.regex(preflight.error.message, /^Transaction simulation failed: Error processing Instruction 1: /);
  t.truthy(preflight.error.data.err.InstructionError);
  t.true(Array.isArray(preflight.error.data.logs));
  const bad = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, blockhash);
  bad[5] = bad[5]! ^ 1;
  t.like(await call('sendTransaction', [Buffer.from(bad).toString('base64'), { encoding: 'base64' }]), {
    error: { code: -32003, message: 'Transaction signature verification failure' },
  });
  t.like(await call('sendTransaction', ['AQID', { encoding: 'base64' }]), { error: { code: -32602 } });
  t.like(await call('sendTransaction', ['abc', { encoding: 'hex' }]), { error: { code: -32602 } });
  ledger.advance(151);
  const stale = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, blockhash);
  t.like(await call('sendTransaction', [Buffer.from(stale).toString('base64'), { encoding: 'base64' }]), {
    error: { code: -32002, message: 'Transaction simulation failed: Blockhash not found', data: { err: 'BlockhashNotFound' } },
  });
  const simulated = await call('simulateTransaction', [Buffer.from(stale).toString('base64'), { encoding: 'base64', replaceRecentBlockhash: true }]);
  t.like(simulated.result.value, { err: null, replacementBlockhash: { lastValidBlockHeight: 301 } });
  t.like((await call('simulateTransaction', [Buffer.from(stale).toString('base64'), { encoding: 'base64' }])).result.value, {
    err: 'BlockhashNotFound',
    logs: [],
    unitsConsumed: 0,
  });
  const fresh = solTransfer(payer, Keypair.generate().publicKey, 1_000_000, ledger.latestBlockhash().blockhash);
  const base58 = (await import('@solana/kit')).getBase58Decoder().decode(fresh);
  const signature = (await call('sendTransaction', [base58])).result;
  t.is(typeof signature, 'string', 'base58 is the default encoding');
  const rpcStatuses = { getSignatureStatuses: async (sigs: string[]) => (await call('getSignatureStatuses', [sigs])).result.value };
  await waitForCommitment(rpcStatuses, signature, 'finalized');
  t.like((await call('getSignatureStatuses', [[signature]])).result.value[0], {
    slot: 151,
    confirmations: null,
    err: null,
    confirmationStatus: 'finalized',
    status: { Ok: null },
  });
});

test('rpc server: getTransaction encodings and the version-0 guard', async (t) => {
  const { ledger, call } = await served(t);
  const payer = Keypair.generate();
  const merchant = Keypair.generate().publicKey;
  ledger.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
  ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 2_000_000n);
  const legacy = ledger.sendWire(
    tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 1n, blockhash: ledger.latestBlockhash().blockhash, memo: 'hi' }),
  );
  const v0 = ledger.sendWire(
    tokenTransfer({ owner: payer, to: merchant, mint: USDC_DEVNET.mint, amount: 2n, blockhash: ledger.latestBlockhash().blockhash, version: 0 }),
  );
  if (!legacy.ok || !v0.ok) return t.fail();
  const json = (await call('getTransaction', [legacy.signature])).result;
  t.is(json.version, 'legacy');
  t.deepEqual(json.transaction.signatures, [legacy.signature]);
  t.like(json.transaction.message.header, { numRequiredSignatures: 1, numReadonlySignedAccounts: 0 });
  t.like(json.meta, { err: null, status: { Ok: null }, fee: 5000, rewards: [], loadedAddresses: { writable: [], readonly: [] } });
  t.is(json.meta.innerInstructions.length, 1, 'the ATA creation made CPIs');
  t.is(json.meta.innerInstructions[0].index, 0);
  const parsed = (await call('getTransaction', [legacy.signature, { encoding: 'jsonParsed' }])).result;
  t.like(parsed.transaction.message.accountKeys[0], { pubkey: payer.publicKey.toBase58(), signer: true, writable: true, source: 'transaction' });
  t.like(parsed.transaction.message.instructions[2], { program: 'spl-memo', parsed: 'hi' });
  t.like(parsed.transaction.message.instructions[0], { program: 'spl-associated-token-account', parsed: { type: 'createIdempotent' } });
  t.true(parsed.meta.innerInstructions[0].instructions.some((i: { parsed?: { type: string } }) => i.parsed?.type === 'createAccount'));
  const b64 = (await call('getTransaction', [legacy.signature, { encoding: 'base64' }])).result;
  t.is(b64.transaction[1], 'base64');
  t.like(await call('getTransaction', [v0.signature]), { error: { code: -32015 } });
  t.like((await call('getTransaction', [v0.signature, { maxSupportedTransactionVersion: 0 }])).result, {
    version: 0,
    transaction: { message: { addressTableLookups: [] } },
  });
  t.is((await call('getTransaction', [(await import('../support/ledger.ts')).randomSignature()])).result, null);
  const sigs = (await call('getSignaturesForAddress', [merchant.toBase58(), { limit: 5 }])).result;
  t.deepEqual(
    sigs.map((s: { signature: string }) => s.signature),
    [v0.signature, legacy.signature],
  );
  t.like(sigs[1], { memo: '[2] hi', confirmationStatus: 'finalized', err: null });
});

test('rpc server: PubSub notifies signatures, accounts and slots', async (t) => {
  const { ledger, server, call } = await served(t);
  const socket = new WebSocket(server.wsUrl);
  t.teardown(() => socket.close());
  await new Promise((resolve) => socket.once('open', resolve));
  const messages: any[] = [];
  const waiters: Array<() => void> = [];
  socket.on('message', (raw) => {
    messages.push(JSON.parse(raw.toString()));
    for (const w of waiters.splice(0)) w();
  });
  const next = async (predicate: (m: any) => boolean) => {
    for (;;) {
      const found = messages.find(predicate);
      if (found) return found;
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  const request = async (id: number, method: string, params: unknown[]) => {
    socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return (await next((m) => m.id === id)).result as number;
  };
  const payer = Keypair.generate();
  const watched = Keypair.generate().publicKey.toBase58();
  ledger.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
  const wire = solTransfer(payer, watched, 3_000_000, ledger.latestBlockhash().blockhash);
  const signature = (await import('@solana/kit')).getBase58Decoder().decode(wire.subarray(1, 65));

  const sigSub = await request(1, 'signatureSubscribe', [signature, { commitment: 'confirmed' }]);
  const accSub = await request(2, 'accountSubscribe', [watched, { encoding: 'base64', commitment: 'confirmed' }]);
  const slotSub = await request(3, 'slotSubscribe', []);
  const logsSub = await request(7, 'logsSubscribe', [{ mentions: [watched] }, { commitment: 'processed' }]);
  const allLogsSub = await request(8, 'logsSubscribe', ['all']);
  const programSub = await request(9, 'programSubscribe', [
    '11111111111111111111111111111111',
    { encoding: 'base64', filters: [{ dataSize: 0 }, { memcmp: { offset: 0, bytes: '' } }] },
  ]);
  t.like(
    await (async () => {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'logsSubscribe', params: [{ mentions: [watched, watched] }] }));
      return next((m) => m.id === 10);
    })(),
    { error: { code: -32602, message: 'Invalid Request: Only 1 address supported' } },
  );
  socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'ping' })); // a client ping: no answer, no error
  t.is((await call('sendTransaction', [Buffer.from(wire).toString('base64'), { encoding: 'base64' }])).result, signature);
  t.like(await next((m) => m.method === 'signatureNotification'), { params: { subscription: sigSub, result: { context: { slot: 0 }, value: { err: null } } } });
  t.like(await next((m) => m.method === 'accountNotification'), {
    params: { subscription: accSub, result: { value: { lamports: 3_000_000, data: ['', 'base64'] } } },
  });
  for (const subscription of [logsSub, allLogsSub]) {
    const logs = await next((m) => m.method === 'logsNotification' && m.params.subscription === subscription);
    t.like(logs.params.result, { context: { slot: 0 }, value: { signature, err: null } });
    t.true(logs.params.result.value.logs.includes('Program 11111111111111111111111111111111 invoke [1]'));
  }
  const programNotes = [
    await next((m) => m.method === 'programNotification' && m.params.result.value.pubkey === watched),
    await next((m) => m.method === 'programNotification' && m.params.result.value.pubkey === payer.publicKey.toBase58()),
  ];
  t.like(programNotes[0].params, {
    subscription: programSub,
    result: { context: { slot: 0 }, value: { account: { lamports: 3_000_000, data: ['', 'base64'] } } },
  });
  t.true(await request(11, 'logsUnsubscribe', [logsSub]));
  t.true(await request(12, 'programUnsubscribe', [programSub]));
  ledger.advance(2);
  t.like(await next((m) => m.method === 'slotNotification'), { params: { subscription: slotSub, result: { slot: 2 } } });
  t.true(await request(4, 'slotUnsubscribe', [slotSub]));
  t.like(
    await (async () => {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'accountUnsubscribe', params: [999] }));
      return next((m) => m.id === 5);
    })(),
    { error: { code: -32602 } },
  );
  // a signature that already landed is notified right away
  const late = await request(6, 'signatureSubscribe', [signature]);
  t.like(await next((m) => m.method === 'signatureNotification' && m.params.subscription === late), { params: { result: { value: { err: null } } } });
});

test('rpc server: svc_mintStable and requestAirdrop fund wallets', async (t) => {
  const { ledger, call, admin } = await served(t);
  const owner = Keypair.generate().publicKey.toBase58();
  const airdrop = await call('requestAirdrop', [owner, 2_000_000_000]);
  t.is(typeof airdrop.result, 'string');
  t.is(ledger.balance(owner), 2_000_000_000n);
  const minted = (await admin('svc_mintStable', [owner, 'USDC', '12.5'])).result;
  t.like(minted, { mint: USDC_DEVNET.mint, amount: '12500000', decimals: 6, tokenAccount: ata(owner, USDC_DEVNET.mint) });
  t.like(await admin('svc_mintStable', [owner, 'USDC', 'ten']), { error: { code: -32602 } });
  t.like(await admin('svc_mintStable', [owner, 'USDT', '1']), { error: { code: -32602 } });
  t.like(await call('requestAirdrop', [owner, -5]), { error: { code: -32602 } });
});

test('rpc server: ledger-admin methods need the admin secret; without it or with a wrong one nothing is minted', async (t) => {
  const { ledger, admin } = await served(t);
  const owner = Keypair.generate().publicKey.toBase58();
  const refused = { error: { code: ADMIN_REFUSED } };
  t.like(await admin('svc_mintStable', [owner, 'USDC', '1000000'], null), refused);
  t.like(await admin('svc_mintStable', [owner, 'USDC', '1000000'], 'b'.repeat(64)), refused);
  t.like(await admin('svc_mintStable', [owner, 'USDC', '1000000'], 'a'), refused, 'a prefix of the secret');
  t.like(await admin('svc_mintStable', [owner, 'USDC', '1000000'], ''), refused);
  t.deepEqual(await ledger.getTokenBalances(owner), [], 'nothing minted');
  t.like(await admin('svc_mintStable', [owner, 'USDC', '1']), { result: { amount: '1000000' } });
});

test('rpc server: mainnet has no public airdrop; its faucet is an admin method', async (t) => {
  const { ledger, call, admin } = await served(t, { network: 'chain-mainnet' });
  const owner = Keypair.generate().publicKey.toBase58();
  t.like(await call('requestAirdrop', [owner, 1_000_000_000]), { error: { code: ADMIN_REFUSED } });
  t.is(ledger.balance(owner), 0n);
  t.is(typeof (await admin('requestAirdrop', [owner, 1_000_000_000])).result, 'string');
  t.is(ledger.balance(owner), 1_000_000_000n);
});

test('rpc server: on a listener not bound to loopback the ledger-admin methods do not exist, secret or not', async (t) => {
  const { ledger, call, admin } = await served(t, { network: 'chain-mainnet', host: '0.0.0.0' });
  const owner = Keypair.generate().publicKey.toBase58();
  t.like(await admin('svc_mintStable', [owner, 'USDT', '1']), { error: { code: -32601, message: 'Method not found' } });
  t.like(await admin('requestAirdrop', [owner, 1_000_000_000]), { error: { code: -32601 } });
  t.like(await call('getHealth'), { result: 'ok' }, 'the standard methods are served');
  t.deepEqual(await ledger.getTokenBalances(owner), []);
  t.is(ledger.balance(owner), 0n);
});

test('rpc server: PubSub caps subscriptions per socket and sockets per client with a JSON-RPC error', async (t) => {
  const { ledger, server, call } = await served(t, { limits: { subscriptionsPerSocket: 3, socketsPerClient: 2 } });
  const open = async () => {
    const socket = new WebSocket(server.wsUrl);
    t.teardown(() => socket.terminate());
    const messages: any[] = [];
    const waiters: Array<() => void> = [];
    socket.on('message', (raw) => {
      messages.push(JSON.parse(raw.toString()));
      for (const w of waiters.splice(0)) w();
    });
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    await new Promise((resolve) => socket.once('open', resolve));
    const next = async (predicate: (m: any) => boolean) => {
      for (;;) {
        const found = messages.find(predicate);
        if (found) return found;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    };
    let id = 0;
    const request = async (method: string, params: unknown[]) => {
      const mine = ++id;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: mine, method, params }));
      return next((m) => m.id === mine);
    };
    return { socket, request, next, closed };
  };
  const first = await open();
  const subs: number[] = [];
  for (let i = 0; i < 3; i++) subs.push((await first.request('accountSubscribe', [Keypair.generate().publicKey.toBase58()])).result);
  t.like(await first.request('slotSubscribe', []), { error: { code: LIMIT_REACHED } }, 'the fourth subscription on a socket');
  t.true((await first.request('accountUnsubscribe', [subs[0]])).result);
  t.is(typeof (await first.request('slotSubscribe', [])).result, 'number', 'room again after an unsubscribe');

  // a signature subscription ends with its notification and frees its place
  const payer = Keypair.generate();
  ledger.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
  const wire = solTransfer(payer, Keypair.generate().publicKey, 3_000_000, ledger.latestBlockhash().blockhash);
  const signature = (await import('@solana/kit')).getBase58Decoder().decode(wire.subarray(1, 65));
  const second = await open();
  await second.request('slotSubscribe', []);
  await second.request('slotSubscribe', []);
  const sigSub = (await second.request('signatureSubscribe', [signature, { commitment: 'processed' }])).result;
  t.like(await second.request('rootSubscribe', []), { error: { code: LIMIT_REACHED } });
  t.is((await call('sendTransaction', [Buffer.from(wire).toString('base64'), { encoding: 'base64' }])).result, signature);
  await second.next((m) => m.method === 'signatureNotification' && m.params.subscription === sigSub);
  t.is(typeof (await second.request('rootSubscribe', [])).result, 'number');

  // a third socket from the same client: refused with a JSON-RPC error, then closed (1008)
  const third = await open();
  t.like(await third.next((m) => m.id === null), { error: { code: LIMIT_REACHED } });
  t.is(await third.closed, 1008);
  first.socket.close();
  await first.closed;
  // the server counts the socket gone when its own side has closed: a moment after the client's (however long a loaded
  // machine makes that moment; a socket never counted gone is AVA's timeout to report)
  let answer: any;
  for (;;) {
    const fourth = await open();
    fourth.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'slotSubscribe' }));
    answer = await fourth.next((m) => m.id === 1 || m.id === null);
    if (answer.id === 1) break;
    await fourth.closed;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.is(typeof answer.result, 'number', 'a socket closed makes room for another');
});

test('rpc server: getProgramAccounts filters and encodings, blocks, and history pages', async (t) => {
  const { ledger, call } = await served(t);
  const payer = Keypair.generate();
  const merchant = Keypair.generate().publicKey.toBase58();
  ledger.airdrop(payer.publicKey.toBase58(), 1_000_000_000n);
  ledger.mintTo(payer.publicKey.toBase58(), USDC_DEVNET.mint, 5_000_000n);
  const blockhash0 = (await call('getLatestBlockhash')).result.value.blockhash;
  const sent = [1n, 2n, 3n].map((amount) => {
    const r = ledger.sendWire(
      tokenTransfer({
        owner: payer,
        to: merchant,
        mint: USDC_DEVNET.mint,
        amount,
        blockhash: blockhash0,
        memo: `m${amount}`,
        version: amount === 2n ? 0 : 'legacy',
      }),
    );
    if (!r.ok) throw new Error('setup');
    return r.signature;
  });

  // getProgramAccounts
  const merchantAta = ata(merchant, USDC_DEVNET.mint);
  const owned = [{ dataSize: 165 }, { memcmp: { offset: 32, bytes: merchant } }];
  const gpa = (await call('getProgramAccounts', [TOKEN_PROGRAM_ID, { encoding: 'base64', filters: owned }])).result;
  t.is(gpa.length, 1);
  t.is(gpa[0].pubkey, merchantAta);
  t.like(gpa[0].account, { owner: TOKEN_PROGRAM_ID, executable: false, lamports: 2_039_280, space: 165 });
  t.is(gpa[0].account.data[1], 'base64');
  const asBase64 = Buffer.from(new PublicKey(merchant).toBytes()).toString('base64');
  const withContext = (
    await call('getProgramAccounts', [
      TOKEN_PROGRAM_ID,
      { encoding: 'jsonParsed', withContext: true, filters: [{ memcmp: { offset: 32, bytes: asBase64, encoding: 'base64' } }] },
    ])
  ).result;
  t.like(withContext, { context: { slot: 0 }, value: [{ pubkey: merchantAta, account: { data: { program: 'spl-token', parsed: { type: 'account' } } } }] });
  const sliced = (await call('getProgramAccounts', [TOKEN_PROGRAM_ID, { encoding: 'base64', dataSlice: { offset: 64, length: 8 }, filters: owned }])).result;
  t.deepEqual(Buffer.from(sliced[0].account.data[0], 'base64'), Buffer.from([6, 0, 0, 0, 0, 0, 0, 0]));
  t.deepEqual((await call('getProgramAccounts', [TOKEN_PROGRAM_ID, { encoding: 'base64', filters: [{ dataSize: 7 }] }])).result, []);
  t.is((await call('getProgramAccounts', [TOKEN_PROGRAM_ID, { encoding: 'base64' }])).result.length, 3, 'the two token accounts and the mint, no filter');
  for (const bad of [
    [{ dataSize: 1 }, { dataSize: 1 }, { dataSize: 1 }, { dataSize: 1 }, { dataSize: 1 }],
    [{ memcmp: { offset: 0, bytes: '1'.repeat(200) } }],
    [{ memcmp: { offset: -1, bytes: '1' } }],
    [{ memcmp: { offset: 0, bytes: 'AA==', encoding: 'hex' } }],
    [{ nope: 1 }],
    'x',
  ])
    t.like(await call('getProgramAccounts', [TOKEN_PROGRAM_ID, { encoding: 'base64', filters: bad }]), { error: { code: -32602 } }, JSON.stringify(bad));

  // blocks: every slot is one, block height = slot, its blockhash the one issued at that height
  const block = (await call('getBlock', [0, { maxSupportedTransactionVersion: 0 }])).result;
  t.like(block, { blockHeight: 0, parentSlot: 0, blockhash: blockhash0, rewards: [] });
  t.is(typeof block.blockTime, 'number');
  t.is(typeof block.previousBlockhash, 'string');
  t.deepEqual(block.transactions.map((tx: { transaction: { signatures: string[] } }) => tx.transaction.signatures[0]).slice(-3), sent);
  t.deepEqual(
    block.transactions.slice(-3).map((tx: { version: unknown }) => tx.version),
    ['legacy', 0, 'legacy'],
  );
  t.like(await call('getBlock', [0]), { error: { code: -32015 } }, 'a version-0 transaction needs maxSupportedTransactionVersion');
  const accounts = (await call('getBlock', [0, { maxSupportedTransactionVersion: 0, transactionDetails: 'accounts', rewards: false }])).result;
  t.is(accounts.rewards, undefined);
  t.like(accounts.transactions.at(-1), {
    transaction: { signatures: [sent[2]], accountKeys: [{ pubkey: payer.publicKey.toBase58(), signer: true, writable: true }] },
  });
  t.is(accounts.transactions.at(-1).meta.logMessages, undefined);
  t.deepEqual((await call('getBlock', [0, { transactionDetails: 'signatures' }])).result.signatures.slice(-3), sent);
  t.false('transactions' in (await call('getBlock', [0, { transactionDetails: 'none' }])).result);
  t.like(await call('getBlock', [0, { commitment: 'processed' }]), { error: { code: -32602 } });
  t.like(await call('getBlock', [5]), { error: { code: -32004, message: 'Block not available for slot 5' } });
  ledger.advance(3);
  const empty = (await call('getBlock', [2])).result;
  t.like(empty, { blockHeight: 2, parentSlot: 1, transactions: [] });
  t.is(empty.previousBlockhash, (await call('getBlock', [1, { transactionDetails: 'none' }])).result.blockhash);
  t.deepEqual((await call('getBlocks', [0])).result, [0, 1, 2, 3]);
  t.deepEqual((await call('getBlocks', [1, 2, { commitment: 'finalized' }])).result, [1, 2]);
  t.deepEqual((await call('getBlocksWithLimit', [2, 5])).result, [2, 3]);
  t.like(await call('getBlocks', [0, 600_000]), { error: { code: -32602 } });
  t.is((await call('getBlockTime', [0])).result, block.blockTime);
  t.like(await call('getBlockTime', [99]), { error: { code: -32004 } });

  // getSignaturesForAddress pages with before/until/limit, newest first
  const page = async (config: Record<string, unknown>) =>
    (await call('getSignaturesForAddress', [merchant, config])).result.map((s: { signature: string }) => s.signature);
  t.deepEqual(await page({ limit: 2 }), [sent[2], sent[1]]);
  t.deepEqual(await page({ limit: 2, before: sent[1] }), [sent[0]]);
  t.deepEqual(await page({ until: sent[0] }), [sent[2], sent[1]]);
  t.deepEqual(await page({ before: sent[2], until: sent[0] }), [sent[1]]);
  t.like(await call('getSignaturesForAddress', [merchant, { limit: 1001 }]), { error: { code: -32602 } });

  // getTransactionsForAddress: oldest first in pages of 2, named by slot:index tokens
  const first = (await call('getTransactionsForAddress', [merchant, { sortOrder: 'asc', limit: 2 }])).result;
  t.deepEqual(
    first.data.map((d: { signature: string }) => d.signature),
    [sent[0], sent[1]],
  );
  t.like(first.data[0], { slot: 0, err: null, memo: '[2] m1' });
  t.regex(first.paginationToken, /^0:\d+$/);
  const second = (await call('getTransactionsForAddress', [merchant, { sortOrder: 'asc', limit: 2, paginationToken: first.paginationToken }])).result;
  t.deepEqual(second, { data: [{ ...second.data[0], signature: sent[2] }], paginationToken: null });
  const full = (await call('getTransactionsForAddress', [merchant, { transactionDetails: 'full', maxSupportedTransactionVersion: 0, limit: 1 }])).result;
  t.like(full.data[0], { slot: 0, version: 'legacy', transaction: { signatures: [sent[2]] }, meta: { err: null } });
  t.like(await call('getTransactionsForAddress', [merchant, { filters: { tokenAccounts: 'balanceChanged' } }]), { error: { code: -32602 } });

  // a block past the full-answer limit names the request that fits; its signatures still come
  const crowd = Keypair.generate().publicKey.toBase58();
  for (let i = 0; i < 1001; i++) ledger.airdrop(crowd, 1_000_000_000n + BigInt(i));
  const tooLarge = await call('getBlock', [3]);
  t.is(tooLarge.error.code, -32012);
  t.regex(tooLarge.error.message, /ask transactionDetails "signatures"/);
  t.is((await call('getBlock', [3, { transactionDetails: 'signatures' }])).result.signatures.length, 1001);
});
