import anyTest, { type TestFn } from 'ava';
import { http, issueKey, linkBody, recordAgent, startTestApp, writeAgentAsset, type TestApp } from '../support/app.ts';
import { buildChain } from '../support/receipts.ts';
import { createClient } from '../../interfaces/client/index.ts';

// The two API routes the tool server needs, on REST and GraphQL — an agent's settled receipts in UTC daily
// buckets (GET /v1/receipts/{agent}/daily) and the discovery catalogue (GET /v1/discover).

const test = anyTest as TestFn<{ app: TestApp }>;

test.before(async (t) => {
  t.context = { app: await startTestApp() };
});

async function gql(app: TestApp, key: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await http(app, 'POST', '/graphql', { key, body: { query, variables } });
  return res.body as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] };
}

const DAY = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

test('daily buckets: settled receipts of the window per UTC day, spend at its gross, USD strings; REST and GraphQL agree; another principal gets 404', async (t) => {
  const { app } = t.context;
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key);
  const now = Date.now();
  const midday = (daysAgo: number) =>
    new Date(Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate()) - daysAgo * DAY + 12 * 3_600_000);
  const spend = (gross: string, amount: string, fee: string) => ({
    kind: 'spend' as const,
    price: {
      amount: '0',
      currency: 'USDC',
      asset: '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU',
      network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
      amount_atomic: amount,
      fee,
      gross,
      feeBps: 100,
      feeAuthority: null,
    },
  });
  const earn = (amount: string, asset = '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU') => ({
    kind: 'earn' as const,
    price: {
      amount: '0',
      currency: 'USDC',
      asset,
      network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
      amount_atomic: amount,
      fee: '0',
      gross: amount,
      feeBps: 0,
      feeAuthority: null,
    },
  });
  const plan = [
    { at: midday(10), ...earn('9000000') }, // outside a 7-day window
    { at: midday(3), ...earn('1500000') },
    { at: midday(3), ...spend('1010000', '1000000', '10000') },
    { at: midday(1), ...earn('250000') },
    { at: midday(1), ...earn('777', 'So11111111111111111111111111111111111111112') }, // not a stable: no USD figure
    { at: midday(0), ...spend('505000', '500000', '5000') },
    { at: midday(0), ...earn('2000000'), decision: 'deny' as const }, // not settled
  ];
  const chain = buildChain(mint, plan.length, (i) => {
    const { at, ...rest } = plan[i]!;
    return { ...rest, ts: at.toISOString() };
  });
  for (const r of chain) {
    const pushed = await http(app, 'POST', `/v1/receipts/${mint}`, { key, body: r });
    t.is(pushed.status, 200, JSON.stringify(pushed.body));
  }

  const res = await http(app, 'GET', `/v1/receipts/${mint}/daily`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  const body = res.body;
  t.like(body, { agent: mint, network: 'chain-devnet', days: 7 });
  t.is(body.since, new Date(Date.parse(`${dayOf(now)}T00:00:00.000Z`) - 6 * DAY).toISOString());
  t.deepEqual(
    body.buckets.map((b: any) => b.date),
    [6, 5, 4, 3, 2, 1, 0].map((d) => dayOf(Date.parse(`${dayOf(now)}T12:00:00.000Z`) - d * DAY)),
  );
  const byDate = Object.fromEntries(body.buckets.map((b: any) => [b.date, b]));
  const at = (d: number) => byDate[dayOf(midday(d).getTime())];
  t.deepEqual(at(3), { date: dayOf(midday(3).getTime()), sent_usd: '1.01', received_usd: '1.5', net_usd: '0.49', sent_count: 1, received_count: 1 });
  t.deepEqual(at(1), { date: dayOf(midday(1).getTime()), sent_usd: '0', received_usd: '0.25', net_usd: '0.25', sent_count: 0, received_count: 1 });
  t.deepEqual(at(0), { date: dayOf(now), sent_usd: '0.505', received_usd: '0', net_usd: '-0.505', sent_count: 1, received_count: 0 });
  t.deepEqual(body.totals, { sent_usd: '1.515', received_usd: '1.75', net_usd: '0.235', sent_count: 2, received_count: 2 });

  const wide = await http(app, 'GET', `/v1/receipts/${mint}/daily?days=11`, { key });
  t.is(wide.body.buckets.length, 11);
  t.is(wide.body.totals.received_usd, '10.75', 'the receipt of 10 days ago is inside an 11-day window');

  const g = await gql(
    app,
    key,
    'query($a: String!) { dailyTransactions(agent: $a) { days since totals { sentUsd receivedUsd netUsd sentCount receivedCount } buckets { date sentUsd } } }',
    { a: mint },
  );
  t.falsy(g.errors, JSON.stringify(g.errors));
  t.deepEqual(g.data.dailyTransactions.totals, { sentUsd: '1.515', receivedUsd: '1.75', netUsd: '0.235', sentCount: 2, receivedCount: 2 });
  t.is(g.data.dailyTransactions.buckets.length, 7);

  for (const days of ['0', '91', 'x']) {
    const bad = await http(app, 'GET', `/v1/receipts/${mint}/daily?days=${days}`, { key });
    t.is(bad.status, 400, days);
    t.is(bad.body.error, 'invalid_request', days);
  }
  const other = await http(app, 'GET', `/v1/receipts/${mint}/daily`, { key: await issueKey(app) });
  t.is(other.status, 404);
  t.is(other.body.error, 'agent_not_found');
});

test('the daily query reads one range of the settled-receipts (network, agent, ts) index', async (t) => {
  const { app } = t.context;
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: app.database.url });
  await client.connect();
  try {
    await client.query('begin');
    await client.query('set local enable_seqscan = off');
    // the statement of adapters/store/repositories/receipts.ts dailyTotals
    const plan = await client.query(
      `explain select to_char(ts at time zone 'UTC', 'YYYY-MM-DD') as day, kind, body->'price'->>'asset' as asset,
         sum((case when kind = 'spend' then body->'price'->>'gross' else body->'price'->>'amount_atomic' end)::numeric)::text, count(*)::int
       from receipts where network = $1 and agent = $2 and decision = 'allow' and ts >= $3 group by 1, 2, 3 order by 1, 2, 3`,
      ['chain-devnet', 'A', new Date()],
    );
    const text = plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
    t.regex(text, /Index Scan using receipts_agent_settled_ts/);
    t.regex(text, /Index Cond: [^\n]*ts >=/, 'the window bounds the index range, not a filter');
    await client.query('rollback');
  } finally {
    await client.end();
  }
});

test('discover: a search reads the catalogue chunk by chunk until its page is full: a match past the first chunks is found, the newest matches come first, none twice', async (t) => {
  const { app } = t.context;
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key, { name: 'Chunks' });
  const tag = `t${Date.now().toString(36)}`;
  const create = async (label: string) => {
    const res = await http(app, 'POST', '/v1/payment-links', { key, body: linkBody(mint, { label, metadata: { discoverable: true } }) });
    t.is(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  // the oldest: past the first chunks of a page of 2 (2, then 4, then 8 entries)
  const rare = await create(`Comet ${tag}`);
  const common: string[] = [];
  for (let i = 0; i < 12; i++) common.push(await create(`Common ${tag} ${i}`));

  const found = await http(app, 'GET', `/v1/discover?source=svc&limit=2&q=comet%20${tag}`, { key });
  t.is(found.status, 200, JSON.stringify(found.body));
  t.deepEqual(
    found.body.data.map((i: any) => i.id),
    [rare],
  );
  const newest = await http(app, 'GET', `/v1/discover?source=svc&limit=3&q=common%20${tag}`, { key });
  t.deepEqual(
    newest.body.data.map((i: any) => i.id),
    common.slice(-3).reverse(),
    'the first chunk fills the page: the three newest',
  );
  const all = await http(app, 'GET', `/v1/discover?source=svc&limit=20&q=${tag}`, { key });
  t.deepEqual(
    all.body.data.map((i: any) => i.id),
    [...common].reverse().concat(rare),
    'every match once, newest first, across chunks of 20',
  );
});

test('discover: public links (metadata.discoverable, enabled, this network) and agents with a registration URI; REST and GraphQL', async (t) => {
  const { app } = t.context;
  const key = await issueKey(app);
  const { mint } = await recordAgent(app, key, { name: 'Forecaster' });
  const create = async (overrides: Record<string, unknown>, k = key, agent = mint) => {
    const res = await http(app, 'POST', '/v1/payment-links', { key: k, body: linkBody(agent, overrides) });
    t.is(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };
  const listed = await create({
    label: 'Storm alerts',
    price: '$0.05',
    metadata: { discoverable: true, description: 'Severe weather', capabilities: ['weather.alerts'] },
  });
  const pricey = await create({ label: 'Storm archive', price: '$2', metadata: { discoverable: true } });
  await create({ label: 'Storm private', metadata: { discoverable: false } });
  await create({ label: 'Storm unlisted' });
  const disabled = await create({ label: 'Storm disabled', metadata: { discoverable: true } });
  t.is((await http(app, 'PATCH', `/v1/payment-links/${disabled.id}`, { key, body: { disabled: true } })).status, 200);
  const mainnetKey = await issueKey(app, 'chain-mainnet');
  const mainnetAgent = await recordAgent(app, mainnetKey);
  await create({ label: 'Storm mainnet', metadata: { discoverable: true } }, mainnetKey, mainnetAgent.mint);
  const { mint: documentedMint, owner: documentedOwner } = await writeAgentAsset(app, 'chain-devnet', {
    uri: 'https://docs.example/storm.json',
    name: 'Storm registry agent',
  });
  const documented = await http(app, 'POST', '/v1/agents/record', {
    key,
    body: { mint: documentedMint, owner: documentedOwner, uri: 'https://docs.example/storm.json', name: 'Storm registry agent' },
  });
  t.is(documented.status, 200, JSON.stringify(documented.body));

  // Another principal of the network sees the catalogue (it is public); nothing else of the owner's.
  const reader = await issueKey(app);
  const res = await http(app, 'GET', '/v1/discover?q=storm', { key: reader });
  t.is(res.status, 200, JSON.stringify(res.body));
  const svc = res.body.data.filter((i: any) => i.source === 'svc');
  t.deepEqual(
    res.body.data.filter((i: any) => i.source === 'registry'),
    [
      {
        source: 'registry',
        id: documentedMint,
        network: 'chain-devnet',
        name: 'Storm registry agent',
        description: null,
        capabilities: [],
        agent: documentedMint,
        url: 'https://docs.example/storm.json',
        method: null,
        price_usd: null,
        currencies: [],
        protocol: null,
        settled_calls: null,
      },
    ],
    'agents without a registration URI (recordAgent’s) are not in the registry catalogue',
  );
  t.deepEqual(svc.map((i: any) => i.id).sort(), [listed.id, pricey.id].sort());
  const item = svc.find((i: any) => i.id === listed.id);
  t.deepEqual(item, {
    source: 'svc',
    id: listed.id,
    network: 'chain-devnet',
    name: 'Storm alerts',
    description: 'Severe weather',
    capabilities: ['weather.alerts'],
    agent: mint,
    url: listed.share_url,
    method: 'GET',
    price_usd: '0.05',
    currencies: ['USDC'],
    protocol: 'x402',
    settled_calls: 0,
  });
  const cheap = await http(app, 'GET', '/v1/discover?q=storm&max_price_usd=1&source=svc', { key: reader });
  t.deepEqual(
    cheap.body.data.map((i: any) => i.id),
    [listed.id],
  );
  const byCap = await http(app, 'GET', '/v1/discover?capability=weather.alerts', { key: reader });
  t.deepEqual(
    byCap.body.data.map((i: any) => i.id),
    [listed.id],
  );

  const registry = await http(app, 'GET', '/v1/discover?source=registry', { key: reader });
  t.true(registry.body.data.every((i: any) => i.source === 'registry' && i.price_usd === null));

  const g = await gql(app, reader, '{ discover(q: "storm", source: SVC) { source id priceUsd url capabilities } }');
  t.falsy(g.errors, JSON.stringify(g.errors));
  t.deepEqual(g.data.discover.map((i: any) => i.id).sort(), [listed.id, pricey.id].sort());

  const bad = await http(app, 'GET', '/v1/discover?max_price_usd=abc', { key: reader });
  t.is(bad.status, 400);
  t.is(bad.body.error, 'invalid_request');
  const badSource = await http(app, 'GET', '/v1/discover?source=elsewhere', { key: reader });
  t.is(badSource.status, 400);

  // fee-facilitator-mpp-tools §4.3: svc_discover is public — the same catalogues with no key, on the network named
  // (chain-mainnet unless named), counted per client IP in the public bucket; REST and tRPC
  const anonymous = await http(app, 'GET', '/v1/discover/public?q=storm&network=chain-devnet');
  t.is(anonymous.status, 200, JSON.stringify(anonymous.body));
  t.deepEqual(anonymous.body, res.body);
  t.is(anonymous.headers.get('ratelimit-policy'), '600;w=60');
  const mainnet = await http(app, 'GET', '/v1/discover/public?q=storm&source=svc');
  t.deepEqual(
    mainnet.body.data.map((i: any) => [i.name, i.network]),
    [['Storm mainnet', 'chain-mainnet']],
  );
  const viaTrpc = await createClient({ url: app.url }).discovery.discoverPublic.query({ q: 'storm', network: 'chain-devnet', source: 'svc' });
  t.deepEqual(viaTrpc.data.map((i) => i.id).sort(), [listed.id, pricey.id].sort());
  t.is((await http(app, 'GET', '/v1/discover/public?network=chain-moon')).status, 400);
  t.is((await http(app, 'GET', '/v1/discover?q=storm')).status, 401, 'the keyed search still needs its key');
});
