import type { LedgerAccount } from '../../../domain/ports/ledger.ts';
import { decodeAddress } from '../../../domain/shared/base58.ts';
import { isMintData, parseMint } from '../../../domain/shared/token-account.ts';
import type { EmbeddedLedger } from './ledger.ts';
import { encodeAccount, invalidParams, RpcError } from './rpc-encode.ts';
import { parseFilters, type AccountFilter } from './rpc-filters.ts';
import { accountEncoding, address, config, dataSlice, RESULT_TOO_LARGE, withContext, type Params } from './rpc-params.ts';
import { SYSTEM_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, uiTokenAmount } from './token.ts';

// The scanning reads of the embedded ledger's JSON-RPC: getProgramAccounts (filters, encodings, withContext) and the
// methods agave answers from its account scans (token accounts by delegate, a mint's largest holders, the largest
// accounts, the supply). LiteSVM scans by owner program; each answer is capped so one request cannot make the
// ledger's thread copy or encode without bound.

/** accounts one scan may return; past it the request fails (-32012) and names the filter to add */
export const MAX_SCAN_ACCOUNTS = 10_000;
/** account data one scan may return, in bytes */
export const MAX_SCAN_BYTES = 32 * 1024 * 1024;

const UPGRADEABLE_LOADER = 'BPFLoaderUpgradeab1e11111111111111111111111';
const SYSVAR_OWNER = 'Sysvar1111111111111111111111111111111111111';
/** the owners whose accounts hold the ledger's lamports: wallets, token accounts and mints, programs, sysvars */
const SUPPLY_OWNERS = [SYSTEM_PROGRAM_ID, TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, UPGRADEABLE_LOADER, SYSVAR_OWNER];

type Handler = (params: Params) => unknown;

/** Every account of `program` that passes `filter`, sorted by address, within the scan limits. */
export function scan(ledger: EmbeddedLedger, program: string, filter: AccountFilter): LedgerAccount[] {
  let count = 0;
  let bytes = 0;
  const found = ledger.programAccounts(program, (data) => {
    if (!filter(data)) return false;
    count++;
    bytes += data.length;
    if (count > MAX_SCAN_ACCOUNTS || bytes > MAX_SCAN_BYTES) {
      throw new RpcError(
        RESULT_TOO_LARGE,
        `Scan aborted: the results exceed this ledger's limit (${MAX_SCAN_ACCOUNTS} accounts, ${MAX_SCAN_BYTES} bytes of data); narrow the request with dataSize or memcmp filters`,
      );
    }
    return true;
  });
  return found.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

const tokenProgramFilter = (ledger: EmbeddedLedger, value: unknown): { programs: string[]; mint?: string } => {
  const filter = value as { mint?: unknown; programId?: unknown } | undefined;
  if (!filter || typeof filter !== 'object' || (filter.mint === undefined) === (filter.programId === undefined)) {
    throw invalidParams('Invalid params: expected { mint } or { programId }');
  }
  if (filter.programId !== undefined) {
    const programId = address(filter.programId);
    if (programId !== TOKEN_PROGRAM_ID && programId !== TOKEN_2022_PROGRAM_ID) throw invalidParams('Invalid param: unrecognized Token program id');
    return { programs: [programId] };
  }
  const mint = address(filter.mint);
  const account = ledger.readAccount(mint);
  if (!account || !isMintData(account.owner, account.data)) throw invalidParams('Invalid param: could not find mint');
  return { programs: [account.owner], mint };
};

/** raw bytes of an address address() has validated */
const keyBytes = (a: string) => Buffer.from(decodeAddress(a)!);

export function accountMethods(ledger: EmbeddedLedger): [string, Handler][] {
  let supplyCache: { at: number; accounts: { address: string; lamports: bigint }[] } | null = null;
  /** the lamport-holding accounts, scanned again only after a transaction */
  const lamportHolders = () => {
    if (supplyCache?.at === ledger.transactionCount) return supplyCache.accounts;
    const accounts: { address: string; lamports: bigint }[] = [];
    for (const owner of SUPPLY_OWNERS) for (const a of ledger.programAccounts(owner, () => true)) accounts.push({ address: a.address, lamports: a.lamports });
    supplyCache = { at: ledger.transactionCount, accounts };
    return accounts;
  };

  return [
    [
      'getProgramAccounts',
      (p) => {
        const program = address(p[0]);
        const c = config(p, 1);
        const encoding = accountEncoding(c);
        const slice = dataSlice(c);
        const filter = parseFilters(c.filters);
        const value = scan(ledger, program, filter).map((a) => ({ account: encodeAccount(ledger, a, encoding, slice), pubkey: a.address }));
        return c.withContext === true ? withContext(ledger, c, value) : value;
      },
    ],
    [
      'getTokenAccountsByDelegate',
      (p) => {
        const delegate = keyBytes(address(p[0]));
        const { programs, mint } = tokenProgramFilter(ledger, p[1]);
        const c = config(p, 2);
        const encoding = accountEncoding(c);
        const slice = dataSlice(c);
        // COption<Pubkey> delegate at 72: tag 1, then the key
        const delegated: AccountFilter = (data) =>
          data.length >= 165 && data[72] === 1 && data[73] === 0 && Buffer.compare(Buffer.from(data.subarray(76, 108)), delegate) === 0;
        const ofMint = mint ? parseFilters([{ memcmp: { offset: 0, bytes: mint } }]) : () => true;
        const value = programs.flatMap((program) =>
          scan(ledger, program, (d) => delegated(d) && ofMint(d)).map((a) => ({ account: encodeAccount(ledger, a, encoding, slice), pubkey: a.address })),
        );
        return withContext(ledger, c, value);
      },
    ],
    [
      'getTokenLargestAccounts',
      (p) => {
        const mint = address(p[0]);
        const account = ledger.readAccount(mint);
        if (!account || !isMintData(account.owner, account.data)) throw invalidParams('Invalid param: not a Token mint');
        const { decimals } = parseMint(account.data);
        const holders = scan(ledger, account.owner, parseFilters([{ memcmp: { offset: 0, bytes: mint } }])).filter((a) => a.data.length >= 165);
        const amount = (a: LedgerAccount) => Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength).readBigUInt64LE(64);
        const top = holders
          .map((a) => ({ address: a.address, raw: amount(a) }))
          .sort((a, b) => (a.raw < b.raw ? 1 : a.raw > b.raw ? -1 : 0))
          .slice(0, 20);
        return withContext(
          ledger,
          config(p, 1),
          top.map((t) => ({ address: t.address, ...uiTokenAmount(t.raw, decimals) })),
        );
      },
    ],
    [
      'getLargestAccounts',
      (p) => {
        const c = config(p, 0);
        if (c.filter !== undefined && c.filter !== 'circulating' && c.filter !== 'nonCirculating')
          throw invalidParams(`Invalid params: unknown variant \`${String(c.filter)}\``);
        // no account of the embedded ledger is set apart as non-circulating
        const top =
          c.filter === 'nonCirculating'
            ? []
            : [...lamportHolders()].sort((a, b) => (a.lamports < b.lamports ? 1 : a.lamports > b.lamports ? -1 : 0)).slice(0, 20);
        return withContext(ledger, c, top);
      },
    ],
    [
      'getSupply',
      (p) => {
        const c = config(p, 0);
        const total = lamportHolders().reduce((sum, a) => sum + a.lamports, 0n);
        return withContext(ledger, c, { circulating: total, nonCirculating: 0, nonCirculatingAccounts: [], total });
      },
    ],
  ];
}
