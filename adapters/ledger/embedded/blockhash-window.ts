import { createHash } from 'node:crypto';
import type { LatestBlockhash } from '../../../domain/ports/ledger.ts';
import { encodeBase58 } from '../../../domain/shared/base58.ts';

// The blockhashes a transaction may still use: one per block height in [top - 150, top], each derived from the
// ledger's seed (kept in its snapshot header), so a restarted ledger issues the same ones.

export const MAX_PROCESSING_AGE = 150;

export class BlockhashWindow {
  private top = -1;
  private readonly window: { height: number; text: string; raw: string }[] = [];
  private readonly byText = new Map<string, number>();
  private readonly byRaw = new Map<string, number>();

  constructor(private readonly seed: Buffer) {}

  private blockhashAt(height: number): Buffer {
    const h = createHash('sha256');
    h.update(this.seed);
    const n = Buffer.alloc(8);
    n.writeBigUInt64LE(BigInt(height));
    h.update(n);
    return h.digest();
  }

  /** The blockhash of block `height` (= its slot), in or out of the window: getBlock names every block's hash. */
  blockhashOf(height: number): string {
    return encodeBase58(this.blockhashAt(height));
  }

  /** Moves the window up to block height `top`; returns it. */
  refresh(top: number): number {
    if (top === this.top) return top;
    for (let h = Math.max(this.top + 1, top - MAX_PROCESSING_AGE, 0); h <= top; h++) {
      const raw = this.blockhashAt(h);
      const entry = { height: h, text: encodeBase58(raw), raw: raw.toString('latin1') };
      this.window.push(entry);
      this.byText.set(entry.text, h);
      this.byRaw.set(entry.raw, h);
    }
    while (this.window.length && this.window[0]!.height < top - MAX_PROCESSING_AGE) {
      const old = this.window.shift()!;
      this.byText.delete(old.text);
      this.byRaw.delete(old.raw);
    }
    this.top = top;
    return top;
  }

  /** The newest blockhash (call refresh first). */
  latest(): LatestBlockhash {
    return { blockhash: this.window[this.window.length - 1]!.text, lastValidBlockHeight: this.top + MAX_PROCESSING_AGE, slot: this.top };
  }

  /** a base58 blockhash in the window */
  has(blockhash: string): boolean {
    return this.byText.has(blockhash);
  }

  /** a blockhash's 32 bytes as a latin1 string (read from the wire without a copy) in the window */
  hasRaw(latin1: string): boolean {
    return this.byRaw.has(latin1);
  }
}
