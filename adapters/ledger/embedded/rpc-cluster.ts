import { SLOTS_PER_EPOCH, type EmbeddedLedger } from './ledger.ts';
import { invalidParams } from './rpc-encode.ts';
import { address, API_VERSION, config, contextOf, FEATURE_SET, limitParam, slotParam, withContext, type Params } from './rpc-params.ts';

// What the embedded ledger answers for a cluster's methods: it is one node — its identity (the faucet's key, as
// getIdentity says) leads every slot and produces every block — with no votes, no stake and no inflation. Each answer
// has the shape agave gives, with the values that are true here.

/** the legacy fee: 5000 lamports per signature (getFeeForMessage gives the fee with priority) */
const LAMPORTS_PER_SIGNATURE = 5000;
/** agave's MAX_GET_SLOT_LEADERS */
const MAX_SLOT_LEADERS = 5000;
/** agave's MAX_MULTIPLE_ACCOUNTS, for getInflationReward's list */
const MAX_ADDRESSES = 100;
const STAKE_PROGRAM = 'Stake11111111111111111111111111111111111111';
const U64_MAX = 18_446_744_073_709_551_615n;

type Handler = (params: Params) => unknown;

/** host:port of this server's listeners, as getClusterNodes names them (set once the server listens) */
export interface Endpoints {
  rpc: string | null;
  pubsub: string | null;
}

let epochSlots: number[] | null = null;
/** the slot indexes of one epoch, all led by this node (built once: 432,000 numbers) */
const allSlotsOfEpoch = () => {
  epochSlots ??= Array.from({ length: SLOTS_PER_EPOCH }, (_, i) => i);
  return epochSlots;
};

export function clusterMethods(ledger: EmbeddedLedger, endpoints: Endpoints): [string, Handler][] {
  const identity = () => ledger.faucet.address;
  const epoch = () => Math.floor(ledger.slot() / SLOTS_PER_EPOCH);
  const latestWithFee = (c: Record<string, unknown>) => {
    const { blockhash, lastValidBlockHeight } = ledger.latestBlockhash();
    return { c, blockhash, lastValidBlockHeight, feeCalculator: { lamportsPerSignature: LAMPORTS_PER_SIGNATURE } };
  };
  return [
    [
      'getClusterNodes',
      () => [
        {
          featureSet: FEATURE_SET,
          gossip: null,
          pubkey: identity(),
          pubsub: endpoints.pubsub,
          rpc: endpoints.rpc,
          serveRepair: null,
          shredVersion: null,
          tpu: null,
          tpuForwards: null,
          tpuForwardsQuic: null,
          tpuQuic: null,
          tpuVote: null,
          tvu: null,
          version: API_VERSION,
        },
      ],
    ],
    [
      'getEpochSchedule',
      () => ({ firstNormalEpoch: 0, firstNormalSlot: 0, leaderScheduleSlotOffset: SLOTS_PER_EPOCH, slotsPerEpoch: SLOTS_PER_EPOCH, warmup: false }),
    ],
    // the last snapshot of LiteSVM's state (snapshots.ts); none is incremental
    ['getHighestSnapshotSlot', () => ({ full: ledger.snapshotSlot, incremental: null })],
    ['getSnapshotSlot', () => ledger.snapshotSlot],
    ['getInflationGovernor', () => ({ foundation: 0, foundationTerm: 0, initial: 0, taper: 0, terminal: 0 })],
    ['getInflationRate', () => ({ epoch: epoch(), foundation: 0, total: 0, validator: 0 })],
    [
      'getInflationReward',
      (p) => {
        if (!Array.isArray(p[0])) throw invalidParams('Invalid params: expected an array of addresses');
        if (p[0].length > MAX_ADDRESSES) throw invalidParams(`Too many inputs provided; max ${MAX_ADDRESSES}`);
        const addresses = p[0].map(address);
        contextOf(ledger, config(p, 1));
        // no inflation: no address was rewarded in any epoch
        return addresses.map(() => null);
      },
    ],
    [
      'getLeaderSchedule',
      (p) => {
        const c = typeof p[0] === 'object' && p[0] !== null ? config(p, 0) : config(p, 1);
        const slot = typeof p[0] === 'number' ? slotParam(p[0]) : ledger.slot();
        // agave knows the schedule of the current epoch and the next one
        if (Math.floor(slot / SLOTS_PER_EPOCH) > epoch() + 1) return null;
        if (c.identity !== undefined && c.identity !== identity()) return {};
        return { [identity()]: allSlotsOfEpoch() };
      },
    ],
    ['getMaxRetransmitSlot', () => ledger.slot()],
    ['getMaxShredInsertSlot', () => ledger.slot()],
    // performance samples are taken every 60 s by a validator; this ledger takes none
    [
      'getRecentPerformanceSamples',
      (p) => {
        limitParam(p[0], 720, 720);
        return [];
      },
    ],
    [
      'getSlotLeader',
      (p) => {
        contextOf(ledger, config(p, 0));
        return identity();
      },
    ],
    [
      'getSlotLeaders',
      (p) => {
        slotParam(p[0], 'start slot');
        const limit = limitParam(p[1], MAX_SLOT_LEADERS, Number.NaN);
        if (Number.isNaN(limit)) throw invalidParams(`Invalid params: limit must be 1..${MAX_SLOT_LEADERS}`);
        return Array.from({ length: limit }, identity);
      },
    ],
    // LiteSVM runs with every feature active, the stake minimum of 1 SOL among them
    ['getStakeMinimumDelegation', (p) => withContext(ledger, config(p, 0), 1_000_000_000)],
    [
      'getStakeActivation',
      (p) => {
        const a = address(p[0]);
        const c = config(p, 1);
        contextOf(ledger, c);
        const account = ledger.readAccount(a);
        if (!account || account.owner !== STAKE_PROGRAM || account.data.length < 124) throw invalidParams('Invalid param: not a stake account');
        const d = Buffer.from(account.data.buffer, account.data.byteOffset, account.data.byteLength);
        const tag = d.readUInt32LE(0);
        const reserve = d.readBigUInt64LE(4);
        const atEpoch = BigInt(typeof c.epoch === 'number' ? c.epoch : epoch());
        if (tag === 2 && d.length >= 180) {
          // Stake: Meta (4..124), then Delegation { voter 124..156, stake 156..164, activation 164..172, deactivation 172..180 }
          const stake = d.readBigUInt64LE(156);
          const deactivation = d.readBigUInt64LE(172);
          const active = deactivation !== U64_MAX && deactivation <= atEpoch ? 0n : stake;
          return { active, inactive: account.lamports - reserve - active, state: active === 0n ? 'inactive' : 'active' };
        }
        if (tag === 1) return { active: 0, inactive: account.lamports - reserve, state: 'inactive' };
        throw invalidParams('Invalid param: stake account not initialized');
      },
    ],
    // one node that votes on nothing: no vote accounts
    ['getVoteAccounts', () => ({ current: [], delinquent: [] })],
    ['minimumLedgerSlot', () => 0],
    // Alpenglow's genesis certificate: this ledger has none
    ['getAgGenesisCert', () => null],
    // agave 1.x methods that older clients still call
    [
      'getFeeCalculatorForBlockhash',
      (p) => {
        if (typeof p[0] !== 'string') throw invalidParams('Invalid params: expected a blockhash');
        const c = config(p, 1);
        return withContext(ledger, c, ledger.blockhashValid(p[0]) ? { feeCalculator: { lamportsPerSignature: LAMPORTS_PER_SIGNATURE } } : null);
      },
    ],
    [
      'getRecentBlockhash',
      (p) => {
        const { c, blockhash, feeCalculator } = latestWithFee(config(p, 0));
        return withContext(ledger, c, { blockhash, feeCalculator });
      },
    ],
    [
      'getFees',
      (p) => {
        const { c, blockhash, feeCalculator, lastValidBlockHeight } = latestWithFee(config(p, 0));
        return withContext(ledger, c, { blockhash, feeCalculator, lastValidBlockHeight, lastValidSlot: lastValidBlockHeight });
      },
    ],
  ];
}
