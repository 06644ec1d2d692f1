import { SLOTS_PER_EPOCH, type EmbeddedLedger } from './ledger.ts';
import { encodeBlockTransaction, invalidParams, RpcError, type TransactionEncoding } from './rpc-encode.ts';
import { atLeastConfirmed, config, limitParam, RESULT_TOO_LARGE, slotParam, VERSION_0_REFUSED, withContext, type Params } from './rpc-params.ts';

// The block methods of the embedded ledger's JSON-RPC. A block here is a slot (ledger.ts LedgerBlock): every slot up
// to the current one holds a block — empty or with the transactions that landed in it — so getBlocks lists every slot
// of its range, and block height = slot.

/** agave's MAX_GET_CONFIRMED_BLOCKS_RANGE */
const MAX_BLOCKS_RANGE = 500_000;
/** transactions a getBlock answer carries in full (or as account keys); past it, ask for signatures */
export const MAX_BLOCK_TRANSACTIONS = 1_000;
/** signatures a getBlock answer carries (~9 MB of JSON) */
export const MAX_BLOCK_SIGNATURES = 100_000;

type Handler = (params: Params) => unknown;

const blockNotAvailable = (slot: number) => new RpcError(-32004, `Block not available for slot ${slot}`);

export function blockMethods(ledger: EmbeddedLedger): [string, Handler][] {
  const getBlock: Handler = (p) => {
    const slot = slotParam(p[0]);
    const c = typeof p[1] === 'string' ? { encoding: p[1] } : config(p, 1);
    atLeastConfirmed(c);
    const encoding = (c.encoding ?? 'json') as TransactionEncoding;
    if (!['json', 'jsonParsed', 'base64', 'base58'].includes(encoding)) throw invalidParams(`Invalid params: unknown variant \`${String(encoding)}\``);
    const details = c.transactionDetails ?? 'full';
    if (details !== 'full' && details !== 'accounts' && details !== 'signatures' && details !== 'none')
      throw invalidParams(`Invalid params: unknown variant \`${String(details)}\`, expected one of \`full\`, \`accounts\`, \`signatures\`, \`none\``);
    const maxVersion = c.maxSupportedTransactionVersion;
    if (maxVersion !== undefined && maxVersion !== null && maxVersion !== 0) throw invalidParams('Invalid params: maxSupportedTransactionVersion must be 0');
    const limit = details === 'none' ? 0 : details === 'signatures' ? MAX_BLOCK_SIGNATURES : MAX_BLOCK_TRANSACTIONS;
    const block = ledger.block(slot, limit);
    if (!block) throw blockNotAvailable(slot);
    if (block.more && details !== 'none') {
      throw new RpcError(
        RESULT_TOO_LARGE,
        details === 'signatures'
          ? `Block ${slot} holds more than ${MAX_BLOCK_SIGNATURES} transactions, more than this ledger answers at once; page through getSignaturesForAddress instead`
          : `Block ${slot} holds more than ${MAX_BLOCK_TRANSACTIONS} transactions, more than this ledger answers in full; ask transactionDetails "signatures" and read them with getTransaction`,
      );
    }
    const out: Record<string, unknown> = {
      blockHeight: block.slot,
      blockTime: block.blockTime,
      blockhash: block.blockhash,
      parentSlot: block.parentSlot,
      previousBlockhash: block.previousBlockhash,
    };
    if (details === 'signatures') out.signatures = block.entries.map((e) => e.sig);
    else if (details !== 'none') {
      out.transactions = block.entries.map((e) => {
        const record = ledger.transactionRecord(e.sig)!;
        if (record.wire.version === 0 && (maxVersion === undefined || maxVersion === null)) throw VERSION_0_REFUSED();
        return encodeBlockTransaction(record, { details, encoding, withVersion: maxVersion === 0 });
      });
    }
    if (c.rewards !== false) out.rewards = [];
    return out;
  };

  /** [start, end] of the blocks the ledger has (every slot up to the current one) */
  const range = (start: number, end: number): number[] => {
    const last = Math.min(end, ledger.slot());
    const out: number[] = [];
    for (let s = start; s <= last; s++) out.push(s);
    return out;
  };

  const getBlocks: Handler = (p) => {
    const start = slotParam(p[0], 'start slot');
    const endGiven = typeof p[1] === 'number' ? slotParam(p[1], 'end slot') : undefined;
    atLeastConfirmed(config(p, endGiven === undefined ? 1 : 2));
    const end = endGiven ?? ledger.slot();
    if (end - start > MAX_BLOCKS_RANGE) throw invalidParams(`Slot range too large; max ${MAX_BLOCKS_RANGE}`);
    return range(start, end);
  };

  const getBlocksWithLimit: Handler = (p) => {
    const start = slotParam(p[0], 'start slot');
    const limit = p[1] === 0 ? 0 : limitParam(p[1], MAX_BLOCKS_RANGE, Number.NaN);
    if (Number.isNaN(limit)) throw invalidParams('Invalid params: expected a limit');
    atLeastConfirmed(config(p, 2));
    return limit === 0 ? [] : range(start, start + limit - 1);
  };

  const getBlockTime: Handler = (p) => {
    const slot = slotParam(p[0]);
    const block = ledger.block(slot, 0);
    if (!block) throw blockNotAvailable(slot);
    return block.blockTime;
  };

  return [
    ['getBlock', getBlock],
    ['getBlocks', getBlocks],
    ['getBlocksWithLimit', getBlocksWithLimit],
    ['getBlockTime', getBlockTime],
    // one node that confirms its own blocks: no stake votes on them
    [
      'getBlockCommitment',
      (p) => {
        slotParam(p[0]);
        return { commitment: null, totalStake: 0 };
      },
    ],
    [
      'getBlockProduction',
      (p) => {
        const c = config(p, 0);
        const slot = ledger.slot();
        const r = (c.range ?? {}) as { firstSlot?: unknown; lastSlot?: unknown };
        const first = r.firstSlot === undefined ? slot - (slot % SLOTS_PER_EPOCH) : slotParam(r.firstSlot, 'firstSlot');
        const last = r.lastSlot === undefined || r.lastSlot === null ? slot : slotParam(r.lastSlot, 'lastSlot');
        if (last < first) throw invalidParams(`lastSlot, ${last}, cannot be less than firstSlot, ${first}`);
        const identity = ledger.faucet.address;
        const produced = Math.max(0, Math.min(last, slot) - first + 1);
        const byIdentity = c.identity === undefined || c.identity === identity ? { [identity]: [last - first + 1, produced] } : {};
        return withContext(ledger, c, { byIdentity, range: { firstSlot: first, lastSlot: last } });
      },
    ],
    // agave 1.x names, still sent by older clients
    ['getConfirmedBlock', getBlock],
    ['getConfirmedBlocks', getBlocks],
    ['getConfirmedBlocksWithLimit', getBlocksWithLimit],
  ];
}
