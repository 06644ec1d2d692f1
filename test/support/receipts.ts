import { Keypair } from '@solana/web3.js';
import { CAIP2 } from '../../domain/shared/network.ts';
import { receiptHash, type ChainHead, type ReceiptV1 } from '../../domain/receipts/schema.ts';

// Builders of receipts for tests: a valid link of an agent's chain, with Partial<> overrides (the hash is computed
// after the overrides unless `receipt_hash` is among them).

export const DEVNET_USDC = '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU';

export function buildReceipt(agent: string, head: ChainHead | null, overrides: Partial<ReceiptV1> = {}): ReceiptV1 {
  const body: Omit<ReceiptV1, 'receipt_hash'> = {
    v: '0.1',
    kind: 'earn',
    agent,
    nonce: head ? head.nonce + 1 : 0,
    ts: new Date(Date.UTC(2026, 0, 1) + (head ? head.nonce + 1 : 0) * 60_000).toISOString(),
    request: { method: 'GET', url: 'https://seller.example/weather' },
    decision: 'allow',
    price: {
      amount: '0.01',
      currency: 'USDC',
      asset: DEVNET_USDC,
      network: CAIP2['chain-devnet'],
      amount_atomic: '10000',
      fee: '0',
      gross: '10000',
      feeBps: 0,
      feeAuthority: null,
    },
    prev_receipt_hash: head ? head.receiptHash : null,
    ...overrides,
  };
  delete (body as { receipt_hash?: string }).receipt_hash;
  const hash = overrides.receipt_hash ?? receiptHash(body);
  return { ...body, receipt_hash: hash } as ReceiptV1;
}

/** A chain of `n` receipts from nonce 0; `each(i)` overrides the i-th. */
export function buildChain(agent: string, n: number, each: (i: number) => Partial<ReceiptV1> = () => ({})): ReceiptV1[] {
  const out: ReceiptV1[] = [];
  let head: ChainHead | null = null;
  for (let i = 0; i < n; i++) {
    const r = buildReceipt(agent, head, each(i));
    out.push(r);
    head = { nonce: r.nonce, receiptHash: r.receipt_hash };
  }
  return out;
}

export const headOf = (r: ReceiptV1): ChainHead => ({ nonce: r.nonce, receiptHash: r.receipt_hash });

/** A syntactically valid signature nobody ever sent. */
export function unknownSignature(): string {
  const kp = Keypair.generate();
  return Buffer.from(kp.secretKey).length === 64 ? bs58(kp.secretKey) : '';
}

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
function bs58(bytes: Uint8Array): string {
  let n = BigInt(`0x${Buffer.from(bytes).toString('hex')}`);
  let out = '';
  while (n > 0n) {
    out = ALPHABET[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = `1${out}`;
  }
  return out;
}
