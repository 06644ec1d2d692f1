import { builder } from '../builder.ts';
import { describeSchema } from '../describe.ts';
import './common.ts';
import './payment-links.ts';
import './events.ts';
import './agents.ts';
import './receipts.ts';
import './webhooks.ts';
import './transactions.ts';
import './indexer.ts';
import './identity.ts';
import './buyer.ts';
import './activity.ts';
import './discovery.ts';
import './auth.ts';

/** The GraphQL schema: every module registers its types on the builder when imported; descriptions come from the zod schemas. */
export const schema = describeSchema(builder.toSchema({ sortSchema: true }));
