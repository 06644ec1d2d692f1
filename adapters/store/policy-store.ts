import type { MikroORM } from '@mikro-orm/postgresql';
import type { PolicyStore } from '../../domain/ports/policy-store.ts';
import { idempotencyRepository } from './repositories/idempotency.ts';
import { rateLimitRepository } from './repositories/rate-limits.ts';
import { requestRecordRepository } from './repositories/request-records.ts';

/** The policy tables through MikroORM's connection (plain SQL: these are single-statement hot paths), one fork a call. */
export class MikroOrmPolicyStore implements PolicyStore {
  private readonly em = () => this.orm.em.fork({ useContext: false });

  constructor(private readonly orm: MikroORM) {}

  readonly idempotency = idempotencyRepository(this.em);
  readonly rateLimits = rateLimitRepository(this.em);
  readonly requestRecords = requestRecordRepository(this.em);
}
