import { createHash, randomInt } from 'node:crypto';
import { DomainError } from '../shared/errors.ts';
import { KEY_PREFIX, NETWORKS, type Network } from '../shared/network.ts';
import { newId } from '../shared/ids.ts';
import { iso, isoOrNull } from '../shared/settings.ts';
import { parseInput } from '../shared/validation.ts';
import type { EventFeed, Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import { principalOf } from './ownership.ts';
import {
  CreateApiKeyInput,
  type ApiKey,
  type ApiKeyRecord,
  type CreatedApiKey,
  type Credentials,
  type Principal,
  type StreamGrant,
  type StreamToken,
} from './schema.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = /^svc_(test|live)_[0-9A-Za-z]{32}$/;
const STREAM_TOKEN_PATTERN = /^svc_stream_(test|live)_[0-9A-Za-z]{32}$/;
/** A stream token is valid this long, and once. */
export const STREAM_TOKEN_TTL_MS = 60_000;

function randomSecret(): string {
  let secret = '';
  for (let i = 0; i < 32; i++) secret += BASE62[randomInt(62)];
  return secret;
}

/** svc_stream_test_… for chain-devnet: the key prefix with `stream_` after `svc_`. */
function streamTokenPrefix(network: Network): string {
  return KEY_PREFIX[network].replace(/^svc_/, 'svc_stream_');
}
const TOUCH_EVERY_MS = 60_000;
/**
 * Key resolution cache (hash → key row), docs/policies.md "The hot path and its caches": a disabled key is dropped from every process's cache when its
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

  async authenticate(authorization: Credentials): Promise<Principal> {
    if (typeof authorization === 'object') return this.authenticateGrant(authorization);
    if (!authorization?.trim()) {
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

  /**
   * A token a browser can subscribe with (EventSource cannot send Authorization): valid 60 s, once, for the
   * calling key's principal and network. Stored as SHA-256 only.
   */
  async issueStreamToken(principal: Principal): Promise<StreamToken> {
    const token = `${streamTokenPrefix(principal.network)}${randomSecret()}`;
    const now = this.deps.clock.now();
    const expiresAt = new Date(now.getTime() + STREAM_TOKEN_TTL_MS);
    await this.deps.store.streamTokens.insert({
      tokenHash: hashKey(token),
      network: principal.network,
      keyId: principal.keyId,
      ownerPrincipal: principal.owner,
      createdAt: now,
      expiresAt,
    });
    return { token, network: principal.network, expires_at: iso(expiresAt), expires_in: STREAM_TOKEN_TTL_MS / 1000 };
  }

  /**
   * Spends a stream token: the grant its connection then authenticates with. A token that is malformed, unknown, used,
   * expired, re-prefixed for another network, or whose key is disabled is invalid_api_key.
   */
  async redeemStreamToken(token: string): Promise<StreamGrant> {
    const invalid = () => new DomainError('invalid_api_key', 'The stream token is unknown, used, expired, or for another network.');
    if (!STREAM_TOKEN_PATTERN.test(token)) throw invalid();
    const redeemed = await this.deps.store.streamTokens.redeem(hashKey(token), this.deps.clock.now());
    if (!redeemed || !token.startsWith(streamTokenPrefix(redeemed.network))) throw invalid();
    const grant: StreamGrant = { kind: 'stream_grant', keyHash: redeemed.keyHash, network: redeemed.network };
    await this.authenticateGrant(grant);
    return grant;
  }

  private async authenticateGrant(grant: StreamGrant): Promise<Principal> {
    const record = await this.lookup(grant.keyHash);
    if (!record || record.disabledAt !== null || record.network !== grant.network) {
      throw new DomainError('invalid_api_key', 'The API key of this stream token is disabled.');
    }
    this.touch(record.id);
    return { keyId: record.id, network: record.network, role: record.role, ownerWallet: record.ownerWallet, owner: principalOf(record) };
  }

  /** Issues a key; the full key is returned once and never stored. */
  async issueKey(input: CreateApiKeyInput): Promise<CreatedApiKey> {
    const parsed = parseInput(CreateApiKeyInput, input);
    const key = `${KEY_PREFIX[parsed.network]}${randomSecret()}`;
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
