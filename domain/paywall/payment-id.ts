import { DomainError } from '../shared/errors.ts';

// x402's `payment-identifier` extension (specs/extensions/payment_identifier.md; the shapes of @x402/extensions 2.27
// `payment-identifier`): the 402 declares it (optional), a buyer echoes it with `info.id` in its payment payload, and
// the paywall binds the id to the one payment (the transaction's message hash, the paid_calls key) it first came with,
// per link: the same id with the same payment answers that call's stored response through the paid call's own
// exactly-once; with another payment it is refused before anything settles. Beside, not instead of, the
// transaction-level exactly-once. Pure.

export const PAYMENT_IDENTIFIER = 'payment-identifier';

/** payment_identifier.md "id Format": 16–128 characters, alphanumeric, hyphens and underscores. */
const ID_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

/** PaymentRequired.extensions["payment-identifier"]: supported, not required. */
export const PAYMENT_ID_DECLARATION = {
  info: { required: false },
  schema: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: {
      required: { type: 'boolean' },
      id: { type: 'string', minLength: 16, maxLength: 128, pattern: '^[a-zA-Z0-9_-]+$' },
    },
    required: ['required'],
  },
} as const;

/**
 * The buyer's payment id in a v2 payment payload's extensions; null when it carries none (no extension, or the
 * declaration echoed without an id). An id of the wrong form is refused (400 invalid_request) rather than ignored: a
 * buyer relying on it to be charged once must learn it is not in force.
 */
export function paymentIdOf(extensions: Record<string, unknown> | undefined): string | null {
  const extension = extensions?.[PAYMENT_IDENTIFIER];
  if (typeof extension !== 'object' || extension === null) return null;
  const info = (extension as { info?: unknown }).info;
  if (typeof info !== 'object' || info === null) return null;
  const id = (info as { id?: unknown }).id;
  if (id === undefined) return null;
  if (typeof id === 'string' && ID_PATTERN.test(id)) return id;
  throw DomainError.invalid(
    [
      {
        path: `extensions.${PAYMENT_IDENTIFIER}.info.id`,
        message: 'a payment id is 16 to 128 characters: letters, digits, hyphens and underscores',
        code: 'invalid_string',
      },
    ],
    'The payment id is malformed: nothing was settled.',
  );
}

/** The refusal of an id already bound to another payment of this link (payment_identifier.md: 409 Conflict). */
export function paymentIdConflict(id: string): DomainError {
  return new DomainError(
    'payment_id_conflict',
    'This payment id was used with another payment for this link; nothing was settled. Resend the original payment to get its response, or use a new id.',
    { payment_id: id },
  );
}
