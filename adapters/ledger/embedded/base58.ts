// Base58 (Bitcoin alphabet) for signatures, addresses and blockhashes. A local copy because the hot path encodes a
// signature per transaction and @solana/kit's codec is ~10x slower on 64 bytes.

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) INDEX[ALPHABET.charCodeAt(i)] = i;

/** bytes → base58 text, e.g. 32 zero bytes → "11111111111111111111111111111111" */
export function encodeBase58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // Base 58^5 limbs (< 2^32) keep the inner loop short.
  const size = Math.ceil(((bytes.length - zeros) * 138) / 100 / 5) + 1;
  const limbs = new Float64Array(size);
  let length = 0;
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i]!;
    let j = 0;
    for (; j < length || carry !== 0; j++) {
      const v = (j < length ? limbs[j]! : 0) * 256 + carry;
      carry = Math.floor(v / 656_356_768); // 58^5
      limbs[j] = v - carry * 656_356_768;
    }
    length = j;
  }
  let out = '1'.repeat(zeros);
  for (let j = length - 1; j >= 0; j--) {
    let limb = limbs[j]!;
    let chunk = '';
    for (let k = 0; k < 5; k++) {
      const d = limb % 58;
      chunk = ALPHABET[d] + chunk;
      limb = (limb - d) / 58;
    }
    out += j === length - 1 ? chunk.replace(/^1+/, '') : chunk;
  }
  return out;
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
