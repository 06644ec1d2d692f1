import test from 'ava';
import { buildClientSchema, getIntrospectionQuery, getNamedType, graphql, isEnumType, isInputObjectType, isObjectType, type GraphQLNamedType } from 'graphql';
import { z } from 'zod';
import { graphqlEnum, graphqlEnumName } from '../../interfaces/graphql/enums.ts';
import { schema } from '../../interfaces/graphql/schema/index.ts';
import { appRouter } from '../../interfaces/trpc/router.ts';

// GraphQL conventions, checked on the schema a client sees (introspection): every enum value UPPER_CASE,
// and no input field or argument that REST types as a domain enum is a String here. The domain enums are read from
// the procedures' own zod input schemas, so a new procedure field typed with a z.enum is covered without editing
// this test. No database or server: the schema is introspected in process.

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The schema as introspection answers it (what GraphiQL and code generators read). */
async function introspected() {
  const result = await graphql({ schema, source: getIntrospectionQuery() });
  if (result.errors) throw new Error(JSON.stringify(result.errors));
  return buildClientSchema(result.data as never);
}

/** zod → the enum inside optional/nullable/default/array wrappers, or undefined. */
function enumOf(schema: z.ZodType): z.ZodEnum | undefined {
  let s: z.ZodType = schema;
  for (let i = 0; i < 8; i++) {
    if (s instanceof z.ZodEnum) return s;
    if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
    else if (s instanceof z.ZodArray) s = s.element as z.ZodType;
    // a pipe: E.transform(f) starts from E, z.string().transform(f).pipe(E) ends in it
    else if (s instanceof z.ZodPipe) return enumOf(s.in as z.ZodType) ?? enumOf(s.out as z.ZodType);
    else return undefined;
  }
  return undefined;
}

/** Every object-shaped zod schema inside `schema` (intersections, unions, pipes, nested objects). */
function* objects(schema: z.ZodType, depth = 0): Generator<z.ZodObject> {
  if (depth > 6) return;
  if (schema instanceof z.ZodObject) {
    yield schema;
    for (const field of Object.values(schema.shape)) yield* objects(field as z.ZodType, depth + 1);
  } else if (schema instanceof z.ZodIntersection) {
    yield* objects(schema.def.left as z.ZodType, depth + 1);
    yield* objects(schema.def.right as z.ZodType, depth + 1);
  } else if (schema instanceof z.ZodUnion) {
    for (const option of schema.options) yield* objects(option as z.ZodType, depth + 1);
  } else if (schema instanceof z.ZodPipe) {
    yield* objects(schema.in as z.ZodType, depth + 1);
  } else if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable || schema instanceof z.ZodDefault) {
    yield* objects(schema.unwrap() as z.ZodType, depth + 1);
  } else if (schema instanceof z.ZodArray) {
    yield* objects(schema.element as z.ZodType, depth + 1);
  }
}

/** snake_case key → the values of the z.enum the procedures' input schemas give it. */
function domainEnumKeys(): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  const procedures = (appRouter as unknown as { _def: { procedures: Record<string, { _def: { inputs: z.ZodType[] } }> } })._def.procedures;
  for (const procedure of Object.values(procedures)) {
    for (const input of procedure._def.inputs) {
      for (const object of objects(input)) {
        for (const [key, field] of Object.entries(object.shape)) {
          const e = enumOf(field as z.ZodType);
          if (e) keys.set(key, e.options.map(String));
        }
      }
    }
  }
  return keys;
}

test('every enum value of the GraphQL schema is UPPER_CASE, and the schema has the enums the domain unions need', async (t) => {
  const client = await introspected();
  const enums = Object.values(client.getTypeMap()).filter(
    (type): type is Extract<GraphQLNamedType, { getValues: unknown }> => isEnumType(type) && !type.name.startsWith('__'),
  );
  t.true(enums.length >= 20, `only ${enums.length} enums`);
  const bad = enums.flatMap((e) =>
    e
      .getValues()
      .filter((v) => !/^[A-Z][A-Z0-9_]*$/.test(v.name))
      .map((v) => `${e.name}.${v.name}`),
  );
  t.deepEqual(bad, []);
  for (const name of ['Network', 'StableSymbol', 'Protocol', 'SettlePolicy', 'EventPhase', 'AgentSource', 'HttpMethod', 'TokenProgram', 'VerificationStatus']) {
    t.true(
      enums.some((e) => e.name === name),
      `no enum ${name}`,
    );
  }
  t.deepEqual(
    enums
      .find((e) => e.name === 'Network')!
      .getValues()
      .map((v) => v.name),
    ['CHAIN_DEVNET', 'CHAIN_MAINNET'],
  );
});

test('no input field or argument that REST types as a domain enum is a String in GraphQL', async (t) => {
  const client = await introspected();
  const enumKeys = domainEnumKeys();
  // the procedures' zod inputs do hold enums (currency, network, protocol, settle_policy, kind, format, …)
  for (const key of ['currency', 'accepts_currencies', 'network', 'protocol', 'settle_policy', 'method', 'format', 'source', 'intent']) {
    t.true(enumKeys.has(key), `the zod inputs have no enum ${key}`);
  }
  const offenders: string[] = [];
  const checked: string[] = [];
  const check = (where: string, name: string, type: Parameters<typeof getNamedType>[0]) => {
    const key = snake(name);
    if (!enumKeys.has(key)) return;
    const named = getNamedType(type);
    checked.push(where);
    if (!isEnumType(named)) offenders.push(`${where}: ${String(type)} (REST: enum ${enumKeys.get(key)!.join('|')})`);
  };
  for (const type of Object.values(client.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    if (isInputObjectType(type)) for (const field of Object.values(type.getFields())) check(`${type.name}.${field.name}`, field.name, field.type);
    if (isObjectType(type)) {
      for (const field of Object.values(type.getFields())) for (const arg of field.args) check(`${type.name}.${field.name}(${arg.name})`, arg.name, arg.type);
    }
  }
  t.deepEqual(offenders, []);
  // the walk did reach the inputs this issue names
  for (const where of [
    'CreatePaymentLinkInput.currency',
    'CreatePaymentLinkInput.acceptsCurrencies',
    'UpdatePaymentLinkInput.currency',
    'Query.agentRegistration(network)',
    'SpendLimitInput.currency',
  ]) {
    t.true(checked.includes(where), `${where} was not checked`);
  }
});

test('graphqlEnum: UPPER_SNAKE names mapped to wire values, one type per name, a clash refused', (t) => {
  t.is(graphqlEnumName('chain-devnet'), 'CHAIN_DEVNET');
  t.is(graphqlEnumName('before_forward'), 'BEFORE_FORWARD');
  t.is(graphqlEnumName('agentCreate'), 'AGENT_CREATE');
  t.is(graphqlEnumName('token-2022'), 'TOKEN_2022');
  t.is(graphqlEnumName('USDC'), 'USDC');
  t.is(graphqlEnumName('x402'), 'X402');
  t.is(graphqlEnumName('2fa'), '_2FA');
  // asking again for a union by name gives the one type back; other values under that name are a programming error
  t.is(graphqlEnum('Network', ['chain-devnet', 'chain-mainnet']), graphqlEnum('Network', z.enum(['chain-devnet', 'chain-mainnet'])));
  t.throws(() => graphqlEnum('Network', ['chain-devnet']), { message: /already defined with other values/ });
  t.throws(() => graphqlEnum('ClashTest', ['a-b', 'a_b']), { message: /both map to A_B/ });
});

test('enum values travel as wire values: a GraphQL enum input reaches the resolver as the domain value, and back', async (t) => {
  const Network = schema.getType('Network');
  t.true(isEnumType(Network));
  if (!isEnumType(Network)) return;
  t.is(Network.parseLiteral({ kind: 'EnumValue' as never, value: 'CHAIN_DEVNET' } as never, undefined), 'chain-devnet');
  t.is(Network.parseValue('CHAIN_MAINNET'), 'chain-mainnet');
  t.is(Network.serialize('chain-devnet'), 'CHAIN_DEVNET');
  t.throws(() => Network.parseValue('chain-devnet'), { message: /Value "chain-devnet" does not exist in "Network" enum/ });
});

test('one enum per domain union: the input and the output of a union name the same GraphQL enum', async (t) => {
  const client = await introspected();
  const fieldType = (where: string): string => {
    const [typeName, rest] = where.split('.') as [string, string];
    const type = client.getType(typeName);
    if (!isObjectType(type) && !isInputObjectType(type)) throw new Error(`no type ${typeName}`);
    const arg = /^(\w+)\((\w+)\)$/.exec(rest);
    if (arg) {
      if (!isObjectType(type)) throw new Error(`${typeName} has no arguments`);
      return getNamedType(type.getFields()[arg[1]!]!.args.find((a) => a.name === arg[2])!.type).name;
    }
    return getNamedType(type.getFields()[rest]!.type).name;
  };
  const unions: Record<string, string[]> = {
    StableSymbol: [
      'CreatePaymentLinkInput.currency',
      'UpdatePaymentLinkInput.acceptsCurrencies',
      'PaymentLink.currency',
      'AcceptEntry.currency',
      'SpendLimitInput.currency',
      'SpendLimit.currency',
      'Mutation.evaluateSpendPolicy(currency)',
      'QuoteOption.currency',
      'BuyerStable.symbol',
      'TreasuryToken.symbol',
    ],
    Network: [
      'Query.agentRegistration(network)',
      'PaymentLink.network',
      'Event.network',
      'Agent.network',
      'Receipt.network',
      'SpendPolicy.network',
      'IndexerNetworkStatus.network',
      'DiscoverItem.network',
      'Webhook.network',
    ],
    Protocol: ['CreatePaymentLinkInput.protocol', 'PaymentLink.protocol', 'DiscoverItem.protocol'],
    SettlePolicy: ['UpdatePaymentLinkInput.settlePolicy', 'PaymentLink.settlePolicy'],
    HttpMethod: ['CreatePaymentLinkInput.method', 'PaymentLink.method', 'Mutation.buyerQuote(method)', 'Quote.method', 'DiscoverItem.method'],
    EventPhase: ['Event.phase', 'WebhookDelivery.phase', 'SubmitResult.phase'],
    ReceiptKind: ['Query.receipts(kind)', 'Receipt.kind'],
    ReceiptDecision: ['Query.receipts(decision)', 'Receipt.decision'],
    PullFormat: ['Mutation.createPullTarget(format)', 'PullTarget.format'],
    DiscoverySource: ['Query.discover(source)', 'DiscoverItem.source'],
    MinIdentityVerdict: ['SpendPolicyInput.minIdentityVerdict', 'SpendPolicy.minIdentityVerdict'],
    TokenProgram: ['TreasuryToken.tokenProgram', 'PayToEntry.tokenProgram', 'BuyerStable.tokenProgram'],
    VerificationStatus: ['ReceiptVerification.status', 'BuyerReceiptVerification.settlement'],
  };
  for (const [union, places] of Object.entries(unions)) {
    for (const where of places) t.is(fieldType(where), union, where);
  }
});

// Descriptions are written once, on the zod schemas and procedure summaries (interfaces/graphql/describe.ts fills what
// a Pothos definition leaves out): every field, input field and argument a client introspects says what it is.
test('every field, input field and argument of the introspected schema has a description', async (t) => {
  const client = await introspected();
  const missing: string[] = [];
  for (const type of Object.values(client.getTypeMap())) {
    if (type.name.startsWith('__') || !(isObjectType(type) || isInputObjectType(type))) continue;
    for (const field of Object.values(type.getFields())) {
      if (!field.description) missing.push(`${type.name}.${field.name}`);
      for (const arg of 'args' in field ? field.args : []) if (!arg.description) missing.push(`${type.name}.${field.name}(${arg.name})`);
    }
  }
  t.deepEqual(missing, []);
});
