import type { Ledger } from '../../domain/ports/ledger.ts';

// The one fault-injecting Ledger of the tests (STYLE habit 13: fakes only to inject faults): the real adapter with some
// of its methods replaced, every other one the real method bound to the real ledger, so the rest of the app keeps
// talking to the node as before.

/**
 * `ledger` with the methods in `faults` replaced. A replacement that should fault only for a while checks its own
 * condition and calls the real method otherwise: `getSignatureStatuses: (s) => (hidden ? … : ledger.getSignatureStatuses(s))`.
 */
export function faultyLedger(ledger: Ledger, faults: Partial<Ledger>): Ledger {
  return new Proxy(ledger, {
    get(target, prop, receiver) {
      const fault = (faults as Record<PropertyKey, unknown>)[prop];
      if (fault !== undefined) return fault;
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A replacement that always fails with `error`: a node that refuses the call. */
export function refuses(error: Error): () => Promise<never> {
  return async () => {
    throw error;
  };
}
