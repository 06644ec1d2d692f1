import test from 'ava';
import { canonicalJson } from '../../domain/shared/canonical-json.ts';
import { Receipt, ReceiptV1, receiptHash, sha256Hex } from '../../domain/receipts/schema.ts';
import { checkReceipt, nextCheckAt, VERIFY_RETRY_SECONDS } from '../../domain/receipts/verify.ts';
import { nextPullDelaySeconds, PULL_MAX_BACKOFF_SECONDS } from '../../domain/receipts/pull-targets.ts';
import { treasuryOf } from '../../domain/treasury/derive.ts';
import type { LedgerTransaction, TransactionTokenBalance } from '../../domain/ports/ledger.ts';
import { buildReceipt, DEVNET_USDC, unknownSignature } from '../support/receipts.ts';
import { randomAddress } from '../support/app.ts';

// RFC 8785 §3.2.2 and §3.2.3: the canonical form of the RFC's own examples (canonicalize, the RFC authors' package).
test('canonical JSON reproduces the RFC 8785 §3.2.2 example byte for byte', (t) => {
  const input = JSON.parse(
    '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
      '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",' +
      '"literals": [null, true, false]}',
  );
  t.is(canonicalJson(input), '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}');
});

test('canonical JSON sorts keys by UTF-16 code units as RFC 8785 §3.2.3 shows', (t) => {
  const input = JSON.parse(
    '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One",' +
      '"\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
  );
  const keys = Object.keys(JSON.parse(canonicalJson(input)) as object);
  // JSON.parse re-orders integer-like keys ("1") first; compare the serialised order instead.
  const order = [...canonicalJson(input).matchAll(/"([^"]*)":"/g)].map((m) => m[1]);
  t.deepEqual(order, ['\\r', '1', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33']);
  t.is(keys.length, 7);
});

test('receipt_hash is the SHA-256 of the canonical receipt without receipt_hash', async (t) => {
  const r = buildReceipt(await randomAddress(), null);
  const { receipt_hash, ...rest } = r;
  t.is(receipt_hash, sha256Hex(canonicalJson(rest)));
  t.is(receiptHash(r), receipt_hash, 'receipt_hash itself is ignored');
  // key order does not matter
  const shuffled = Object.fromEntries(Object.entries(rest).reverse()) as typeof rest;
  t.is(receiptHash(shuffled), receipt_hash);
});

test('the Receipt schema parses v0.1 and v0.2 and names unknown fields', async (t) => {
  const agent = await randomAddress();
  const v1 = buildReceipt(agent, null);
  t.true(ReceiptV1.safeParse(v1).success);
  const v2 = { ...v1, v: '0.2', protocol: 'mpp', mpp_challenge_id: 'ch_1', mpp_settlement_tx: unknownSignature() };
  t.true(Receipt.safeParse(v2).success);
  const extra = Receipt.safeParse({ ...v1, surprise: 1 });
  t.false(extra.success);
  t.regex(JSON.stringify(extra.error?.issues), /surprise/);
  t.false(Receipt.safeParse({ ...v1, v: '0.3' }).success);
  t.false(Receipt.safeParse({ ...v1, price: { ...v1.price, amount_atomic: '1.5' } }).success, 'atomic amounts are digits');
});

function tokenBalance(owner: string, amount: bigint, mint = DEVNET_USDC): TransactionTokenBalance {
  return { accountIndex: 1, account: `${owner.slice(0, 8)}ata`, mint, owner, amount, decimals: 6, tokenProgram: 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA' };
}

function landed(overrides: Partial<LedgerTransaction>): LedgerTransaction {
  return {
    signature: 'sig',
    slot: 1,
    blockTime: null,
    version: 0,
    err: null,
    fee: 5000n,
    accountKeys: [],
    signers: [],
    recentBlockhash: 'x',
    wire: new Uint8Array(0),
    preBalances: [],
    postBalances: [],
    preTokenBalances: [],
    postTokenBalances: [],
    instructions: [],
    innerInstructions: null,
    logs: [],
    unitsConsumed: null,
    ...overrides,
  };
}

test('checkReceipt: verified only when the seller leg and the fee leg moved exactly what the price says', async (t) => {
  const agent = await randomAddress();
  const feeAuthority = await randomAddress();
  const treasury = treasuryOf(agent);
  const sig = unknownSignature();
  const r = buildReceipt(agent, null, {
    tx_sig: sig,
    price: {
      amount: '0.01',
      currency: 'USDC',
      asset: DEVNET_USDC,
      network: 'solana:x',
      amount_atomic: '10000',
      fee: '100',
      gross: '10100',
      feeBps: 100,
      feeAuthority,
    },
  });
  const good = landed({
    preTokenBalances: [tokenBalance(treasury, 5n), tokenBalance(feeAuthority, 0n)],
    postTokenBalances: [tokenBalance(treasury, 10_005n), tokenBalance(feeAuthority, 100n)],
  });
  t.is(checkReceipt(r, good, 0).status, 'verified');

  const short = landed({
    preTokenBalances: [tokenBalance(treasury, 0n)],
    postTokenBalances: [tokenBalance(treasury, 9_999n), tokenBalance(feeAuthority, 100n)],
  });
  const s = checkReceipt(r, short, 0);
  t.is(s.status, 'mismatch');
  t.regex(s.reason!, /moved 9999 .* says 10000/);

  const noFee = landed({ postTokenBalances: [tokenBalance(treasury, 10_000n)] });
  t.regex(checkReceipt(r, noFee, 0).reason!, /fee leg moved 0/);

  const otherMint = landed({
    postTokenBalances: [tokenBalance(treasury, 10_000n, 'So11111111111111111111111111111111111111112'), tokenBalance(feeAuthority, 100n)],
  });
  t.is(checkReceipt(r, otherMint, 0).status, 'mismatch');

  const failed = landed({ err: { InstructionError: [4, { Custom: 1 }] }, postTokenBalances: good.postTokenBalances, preTokenBalances: good.preTokenBalances });
  t.regex(checkReceipt(r, failed, 0).reason!, /failed on the ledger/);
});

test('checkReceipt: a spend receipt is checked as the gross leaving the agent’s treasury', async (t) => {
  const agent = await randomAddress();
  const treasury = treasuryOf(agent);
  const r = buildReceipt(agent, null, { kind: 'spend', tx_sig: unknownSignature() });
  const tx = landed({ preTokenBalances: [tokenBalance(treasury, 50_000n)], postTokenBalances: [tokenBalance(treasury, 40_000n)] });
  t.is(checkReceipt(r, tx, 0).status, 'verified');
  t.is(
    checkReceipt(r, landed({ preTokenBalances: [tokenBalance(treasury, 50_000n)], postTokenBalances: [tokenBalance(treasury, 45_000n)] }), 0).status,
    'mismatch',
  );
});

test('checkReceipt: an unknown transaction stays pending through the retry schedule, then is a mismatch', async (t) => {
  const r = buildReceipt(await randomAddress(), null, { tx_sig: unknownSignature() });
  t.is(checkReceipt(buildReceipt(await randomAddress(), null), null, 0).status, 'not_applicable');
  for (let attempts = 0; attempts < VERIFY_RETRY_SECONDS.length - 1; attempts++) t.is(checkReceipt(r, null, attempts).status, 'pending');
  const last = checkReceipt(r, null, VERIFY_RETRY_SECONDS.length - 1);
  t.is(last.status, 'mismatch');
  t.regex(last.reason!, /not found/);
  const now = new Date(0);
  t.is(nextCheckAt(now, 1).getTime(), 10_000);
  t.is(nextCheckAt(now, 99).getTime(), VERIFY_RETRY_SECONDS.at(-1)! * 1000);
});

test('pull backoff doubles per consecutive failure up to the cap', (t) => {
  t.is(nextPullDelaySeconds(10, 0), 10);
  t.is(nextPullDelaySeconds(10, 1), 20);
  t.is(nextPullDelaySeconds(10, 3), 80);
  t.is(nextPullDelaySeconds(60, 20), PULL_MAX_BACKOFF_SECONDS);
});
