// Base58 (Bitcoin alphabet) for signatures, addresses and blockhashes. Our own because the hot paths (ledger, settle)
// encode a signature per transaction and @solana/kit's codec is ~10x slower on 64 bytes.

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i;

const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const words = new Float64Array(512);
const INV_58_5 = 1 / 656_356_768;
const chars = Buffer.alloc(2048);

/** bytes → base58 text, e.g. 32 zero bytes → "11111111111111111111111111111111" */
export function encodeBase58(bytes: Uint8Array): string {
  const n = bytes.length;
  if (n > 1024) throw new RangeError('base58 input too long');
  let zeros = 0;
  while (zeros < n && bytes[zeros] === 0) zeros++;
  // The number as 16-bit words, most significant first, divided repeatedly by 58^5: every intermediate value stays
  // below 2^53, so plain doubles are exact. Digits are written from the end of `chars`.
  const count = (n - zeros + 1) >> 1;
  for (let i = n - 1, w = count - 1; w >= 0; i -= 2, w--) words[w] = bytes[i]! + (i - 1 >= zeros ? bytes[i - 1]! * 256 : 0);
  let at = chars.length;
  let start = 0;
  while (start < count) {
    let rem = 0;
    for (let w = start; w < count; w++) {
      const cur = rem * 65_536 + words[w]!;
      let q = Math.floor(cur * INV_58_5); // multiply by the inverse, then correct the rounding
      let r = cur - q * 656_356_768;
      if (r < 0) {
        q--;
        r += 656_356_768;
      } else if (r >= 656_356_768) {
        q++;
        r -= 656_356_768;
      }
      words[w] = q;
      rem = r;
    }
    while (start < count && words[start] === 0) start++;
    let r = rem | 0; // < 58^5 < 2^31
    for (let k = 0; k < 5; k++) {
      const q = (r / 58) | 0;
      chars[--at] = CODES[r - q * 58]!;
      r = q;
    }
  }
  while (at < chars.length && chars[at] === 49) at++; // leading zero digits of the division
  for (let z = 0; z < zeros; z++) chars[--at] = 49;
  return chars.toString('latin1', at, chars.length);
}

/** base58 text → bytes; null when the text is not base58 */
export function decodeBase58(text: string): Uint8Array | null {
  if (typeof text !== 'string' || text.length > 2048) return null;
  let zeros = 0;
  while (zeros < text.length && text.charCodeAt(zeros) === 49) zeros++;
  const bytes: number[] = [];
  for (let i = zeros; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const value = code < 128 ? INDEX[code]! : -1;
    if (value < 0) return null;
    let carry = value;
    for (let j = 0; j < bytes.length; j++) {
      const v = bytes[j]! * 58 + carry;
      bytes[j] = v & 0xff;
      carry = v >> 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  const out = new Uint8Array(zeros + bytes.length);
  for (let i = 0; i < bytes.length; i++) out[out.length - 1 - i] = bytes[i]!;
  return out;
}

/** A 32-byte address in base58, or null. */
export function decodeAddress(text: unknown): Uint8Array | null {
  if (typeof text !== 'string' || text.length < 32 || text.length > 44) return null;
  const bytes = decodeBase58(text);
  return bytes && bytes.length === 32 ? bytes : null;
}
