import { z } from 'zod';
import { feeFor } from '../shared/money.ts';
import type { FeeTerms } from './schema.ts';
import { SPLITS_KEY, X402Split } from './wire.ts';

// x402's multi-payee splits proposal (exact/svm, extra.splits) as this gateway publishes it: the protocol fee leg of
// fee-facilitator-mpp-tools §2.2 and nothing else — one split to the fee authority for ceil(amount × bps / 10000), on top
// of `amount`. The facilitator co-signs only transfers it can name (DECISIONS "Facilitator"), so other splits are refused
// before anything is verified.

/** The splits that state the fee leg of these terms (none when the fee is off). */
export function feeSplits(amount: bigint, terms: FeeTerms | undefined): X402Split[] {
  if (!terms || terms.bps === 0) return [];
  return [{ payTo: terms.feeAuthority, amount: feeFor(amount, terms.bps).toString(), ataCreationRequired: true }];
}

/** null when extra.splits is absent or states exactly the fee leg; otherwise why the offer cannot be settled here. */
export function splitsMismatch(extra: Record<string, unknown>, amount: bigint, terms: FeeTerms | undefined): string | null {
  const raw = extra[SPLITS_KEY];
  if (raw === undefined) return null;
  const parsed = z.array(X402Split).max(8).safeParse(raw);
  if (!parsed.success) return `extra.${SPLITS_KEY} is malformed: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}`;
  const expected = feeSplits(amount, terms);
  const stated = parsed.data;
  const same = stated.length === expected.length && stated.every((s, i) => s.payTo === expected[i]!.payTo && s.amount === expected[i]!.amount);
  if (same) return null;
  const wanted = expected.length === 0 ? 'none (the offer has no fee leg)' : `one: ${expected[0]!.amount} to ${expected[0]!.payTo}, the fee leg`;
  return `extra.${SPLITS_KEY} names legs this facilitator does not settle; it settles the seller leg and the protocol fee split only — expected ${wanted}`;
}
