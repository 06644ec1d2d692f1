import canonicalizeModule from 'canonicalize';

// The package is CommonJS (`module.exports = serialize`) with a `export default` declaration: under Node's ESM the
// default import is the function itself, while TypeScript's NodeNext view of it is the module object. Take either.
type Serialize = (input: unknown) => string | undefined;
const serialize: Serialize =
  typeof canonicalizeModule === 'function' ? (canonicalizeModule as Serialize) : (canonicalizeModule as unknown as { default: Serialize }).default;

/**
 * RFC 8785 (JCS) canonical JSON through `canonicalize`, the implementation by the RFC's authors: object keys sorted by
 * UTF-16 code units, no whitespace, ECMAScript number serialisation. Used for request hashes and receipt hashes.
 */
export function canonicalJson(value: unknown): string {
  const text = serialize(value);
  if (text === undefined) throw new TypeError('canonicalJson: the value has no JSON form');
  return text;
}
