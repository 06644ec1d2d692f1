import { createHash, randomInt } from 'node:crypto';
import { DomainError } from '../shared/errors.ts';
import { KEY_PREFIX, NETWORKS, type Network } from '../shared/network.ts';
import { newId } from '../shared/ids.ts';
import { iso, isoOrNull } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { EventFeed, Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import { principalOf } from './ownership.ts';
import { CreateApiKeyInput, type ApiKey, type ApiKeyRecord, type CreatedApiKey, type Principal } from './schema.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = /^svc_(test|live)_[0-9A-Za-z]{32}$/;
const TOUCH_EVERY_MS = 60_000;
/**
 * Key resolution cache (hash → key row), README "Caches": a disabled key is dropped from every process's cache when its
 * `api_key.disabled` event arrives through the event feed (NOTIFY, then the feed's catch-up read by seq: a lost
 * connection delays it, never loses it); this TTL is the backstop bound whatever the feed does.
 */
export const KEY_CACHE_TTL_MS = 5_000;
const CACHE_MAX = 10_000;

export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

function networkOfKey(key: string): Network | undefined {
  return NETWORKS.find((n) => key.startsWith(KEY_PREFIX[n]));
}

export function toApiKey(r: ApiKeyRecord): ApiKey {
  return {
    id: r.id,
    network: r.network,
    prefix: r.prefix,
    owner_wallet: r.ownerWallet,
    label: r.label,
    role: r.role,
    disabled: r.disabledAt !== null,
    disabled_at: isoOrNull(r.disabledAt),
    created_at: iso(r.createdAt),
    last_used_at: isoOrNull(r.lastUsedAt),
  };
}

/** hosted-api §5, DECISIONS "API keys": bearer keys, prefix → network, stored only as SHA-256. */
export class AccessService {
  private readonly touched = new Map<string, number>();
  private readonly cache = new Map<string, { record: ApiKeyRecord | null; until: number }>();
  /** bumped by every invalidation: a read that started before one does not put what it read in the cache */
  private generation = 0;

  constructor(private readonly deps: { store: Store; clock: Clock; feed?: EventFeed }) {
    deps.feed?.subscribe((event) => {
      const id = event.metadata.api_key_id;
      if (event.kind === 'api_key.disabled' && typeof id === 'string') this.forget(id);
    });
  }

  async authenticate(authorization: string | undefined): Promise<Principal> {
    if (!authorization || !authorization.trim()) {
      throw new DomainError('missing_api_key', 'Send your API key as Authorization: Bearer <key>.');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    const key = match?.[1];
    if (!key || !KEY_PATTERN.test(key)) throw new DomainError('invalid_api_key', 'The API key is not valid.');
    const record = await this.lookup(hashKey(key));
    // The prefix must agree with the stored network: a re-prefixed key is not the same key.
    if (!record || record.disabledAt !== null || networkOfKey(key) !== record.network) {
      throw new DomainError('invalid_api_key', 'The API key is unknown, disabled, or for another network.');
    }
    this.touch(record.id);
    return { keyId: record.id, network: record.network, role: record.role, ownerWallet: record.ownerWallet, owner: principalOf(record) };
  }

  /** Issues a key; the full key is returned once and never stored. */
  async issueKey(input: CreateApiKeyInput): Promise<CreatedApiKey> {
    const parsed = parseInput(CreateApiKeyInput, input);
    let secret = '';
    for (let i = 0; i < 32; i++) secret += BASE62[randomInt(62)];
    const key = `${KEY_PREFIX[parsed.network]}${secret}`;
    const record: ApiKeyRecord = {
      id: newId(),
      network: parsed.network,
      prefix: key.slice(0, 12),
      keyHash: hashKey(key),
      ownerWallet: parsed.owner_wallet ?? null,
      label: parsed.label ?? null,
      role: parsed.role,
      disabledAt: null,
      createdAt: this.deps.clock.now(),
      lastUsedAt: null,
    };
    await this.deps.store.apiKeys.insert(record);
    return { ...toApiKey(record), key };
  }

  /** Drops cached rows of a key in this process (e.g. right after disabling it). */
  forget(keyId: string): void {
    this.generation++;
    for (const [hash, entry] of this.cache) if (entry.record?.id === keyId) this.cache.delete(hash);
  }

  private async lookup(hash: string): Promise<ApiKeyRecord | null> {
    const now = this.deps.clock.now().getTime();
    const hit = this.cache.get(hash);
    if (hit && hit.until > now) return hit.record;
    const generation = this.generation;
    const record = await this.deps.store.apiKeys.findByHash(hash);
    // A key disabled while we read may have been read before the change: answer it this once, keep nothing.
    if (generation !== this.generation) return record;
    if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(hash, { record, until: now + KEY_CACHE_TTL_MS });
    return record;
  }

  /** last_used_at is written at most once a minute per key per process: no write on the hot path. */
  private touch(id: string): void {
    const now = this.deps.clock.now();
    const last = this.touched.get(id) ?? 0;
    if (now.getTime() - last < TOUCH_EVERY_MS) return;
    this.touched.set(id, now.getTime());
    this.deps.store.apiKeys.touch(id, now).catch(() => this.touched.delete(id));
  }
}
