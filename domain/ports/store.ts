import type { Network } from '../shared/network.ts';
import type { ApiKeyRecord } from '../access/schema.ts';
import type { AgentRecord } from '../agents/schema.ts';
import type { PaymentLinkRecord } from '../payment-links/schema.ts';
import type { EventRecord, NewEvent } from '../events/schema.ts';

// Every read and write names its network: isolation is part of the port (hosted-api §5.3).

export interface ApiKeyRepository {
  insert(record: ApiKeyRecord): Promise<void>;
  /** by SHA-256 hex of the full key, e.g. "9f86d08…"; null when unknown */
  findByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  touch(id: string, at: Date): Promise<void>;
  get(network: Network, id: string): Promise<ApiKeyRecord | null>;
  /** newest first, id < beforeId */
  list(network: Network, query: { ownerWallet?: string | undefined; beforeId?: string | undefined; limit: number }): Promise<ApiKeyRecord[]>;
  /** sets disabled_at once (keeps the first time); returns the row, null when absent on the network */
  disable(network: Network, id: string, at: Date): Promise<ApiKeyRecord | null>;
}

export interface AgentRepository {
  /** inserts or replaces owner/name/uri of (network, mint); returns the stored row */
  upsert(record: AgentRecord): Promise<AgentRecord>;
  get(network: Network, mint: string): Promise<AgentRecord | null>;
}

export interface PaymentLinkListQuery {
  ownerAgent?: string | undefined;
  /** exclusive upper bound on pk (newest first) */
  beforePk?: string | undefined;
  limit: number;
}

export interface PaymentLinkRepository {
  /** throws DomainError `conflict` when (network, id) is taken */
  insert(record: PaymentLinkRecord): Promise<void>;
  get(network: Network, id: string): Promise<PaymentLinkRecord | null>;
  list(network: Network, query: PaymentLinkListQuery): Promise<PaymentLinkRecord[]>;
  update(record: PaymentLinkRecord): Promise<void>;
  /** true when a row was removed */
  delete(network: Network, id: string): Promise<boolean>;
}

export interface EventFilter {
  /** kind patterns: exact kinds or prefixes ending in ".*"; "*" matches all */
  kinds?: string[] | undefined;
  agent?: string | undefined;
  id?: string | undefined;
}

export interface EventRepository {
  /**
   * Appends inside the current transaction (transactional outbox). The event's `seq` orders events by commit,
   * and subscribers on every node are woken after commit.
   */
  append(event: NewEvent): Promise<EventRecord>;
  get(network: Network, id: string): Promise<EventRecord | null>;
  /** newest first, seq < beforeSeq */
  list(network: Network, filter: EventFilter & { beforeSeq?: bigint | undefined; limit: number }): Promise<EventRecord[]>;
  /** oldest first, seq > afterSeq: replay for subscribers */
  after(network: Network, afterSeq: bigint, filter: EventFilter, limit: number): Promise<EventRecord[]>;
  /** per (kind, phase) counts on a network, e.g. [{ kind: "payment_link.created", phase: "confirmed", count: 3 }] */
  countByKind(network: Network, since?: Date): Promise<{ kind: string; phase: string; count: number }[]>;
}

export interface Repositories {
  apiKeys: ApiKeyRepository;
  agents: AgentRepository;
  paymentLinks: PaymentLinkRepository;
  events: EventRepository;
}

export interface Store extends Repositories {
  /** Runs `work` in one database transaction; all writes through `tx` commit or roll back together. */
  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T>;
}

/**
 * Live feed of committed events from every process on the database (LISTEN/NOTIFY), in seq order.
 * `subscribe` returns an unsubscribe function.
 */
export interface EventFeed {
  subscribe(listener: (event: EventRecord) => void): () => void;
}
