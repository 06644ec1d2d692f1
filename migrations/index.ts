import { Migration0001Initial } from './0001-initial.ts';

/** Listed explicitly: under tsx MikroORM cannot discover TypeScript migrations by scanning. */
export const migrationsList = [{ name: '0001-initial', class: Migration0001Initial }];
