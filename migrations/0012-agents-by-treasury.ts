import { Migration } from '@mikro-orm/migrations';

// The paywall finds the buyer agent of a delegate payment by its treasury (the debited account's owner).
export class Migration0012AgentsByTreasury extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index agents_network_treasury_idx on agents (network, treasury);`);
  }
}
