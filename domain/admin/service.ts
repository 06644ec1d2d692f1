import { z } from 'zod';
import { DomainError } from '../shared/errors.ts';
import { newEvent } from '../events/kinds.ts';
import { newId } from '../shared/ids.ts';
import type { Network } from '../shared/network.ts';
import { decodeCursor, encodeCursor, toPage, type Page } from '../shared/pagination.ts';
import { parseInput } from '../shared/validation.ts';
import type { Store } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { Principal } from '../access/schema.ts';
import { toApiKey, type AccessService } from '../access/service.ts';
import type { ApiKey, CreatedApiKey } from '../access/schema.ts';
import { AdminCreateApiKeyInput, ListApiKeysInput } from './schema.ts';

const CursorShape = z.object({ id: z.string() });

/** hosted-api §4.8 admin routes; the caller is an admin key (checked by the front door's admin procedure). */
export class AdminService {
  constructor(private readonly deps: { store: Store; clock: Clock; access: AccessService }) {}

  /** Keys are issued for the admin's own network: isolation holds for admins too. */
  async createKey(admin: Principal, input: AdminCreateApiKeyInput): Promise<CreatedApiKey> {
    const parsed = parseInput(AdminCreateApiKeyInput, input);
    // hosted-api §5.2: the key's prefix fixes the network, so a body naming none means the admin key's own
    const network = parsed.network ?? admin.network;
    this.sameNetwork(admin.network, network);
    return this.deps.access.issueKey({ network, owner_wallet: parsed.owner_wallet, label: parsed.label, role: parsed.role ?? 'user' });
  }

  async listKeys(admin: Principal, input: ListApiKeysInput): Promise<Page<ApiKey>> {
    const q = parseInput(ListApiKeysInput, input);
    const before = q.cursor ? decodeCursor(CursorShape, q.cursor).id : undefined;
    const rows = await this.deps.store.apiKeys.list(admin.network, { ownerWallet: q.owner_wallet, beforeId: before, limit: q.limit + 1 });
    return toPage(rows, q.limit, toApiKey, (r) => encodeCursor({ id: r.id }));
  }

  async disableKey(admin: Principal, id: string): Promise<ApiKey> {
    const now = this.deps.clock.now();
    // The event (admin-only) tells every process to drop the key from its key cache (docs/policies.md "The hot path and its caches").
    const row = await this.deps.store.transaction(async (tx) => {
      const disabled = await tx.apiKeys.disable(admin.network, id, now);
      if (disabled?.disabledAt?.getTime() === now.getTime()) {
        await tx.events.append(
          newEvent(
            'api_key.disabled',
            { id: newId(now.getTime()), phase: 'confirmed', network: disabled.network, agentAsset: null, owner: null, createdAt: now, confirmedAt: now },
            { api_key_id: disabled.id },
          ),
        );
      }
      return disabled;
    });
    if (!row) throw new DomainError('not_found', `No API key ${id} on ${admin.network}.`, { id });
    this.deps.access.forget(id);
    return toApiKey(row);
  }

  private sameNetwork(own: Network, wanted: Network): void {
    if (own !== wanted) {
      throw new DomainError('wrong_network', `This admin key manages ${own} keys only.`, { network: own });
    }
  }
}
