// The explorer page: the key's recent events and then its live ones (graphql-ws, authenticated with a stream token),
// each paid call gathered from settlement to fee, and through REST /v1 the payment links with their counters, an
// agent's treasury balances and receipt chain, and a link's 402 offer. It uses the public API only, as a dashboard
// would. Bundled by interfaces/explorer/build.ts (esbuild) into dist/explorer/. Lists come from REST so GraphQL enum
// spellings barely matter here: the GraphQL document below uses no enum literal, and a delivery's phase is lowered
// to REST's spelling (timeline.js liveEvent).
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { createClient } from 'graphql-ws';
import { amountOf, decimal, localTime, short } from './format.ts';
import { callSteps, isFinal, liveEvent, mergeEvents, resumeAfter, settledOf, timeline } from './timeline.ts';

const html = htm.bind(h);

// `after`: the cursor the history page ends on (timeline.js resumeAfter): the subscription replays what was committed
// since, then goes live, so the page shows no gap between history and live and (merged by id) no event twice.
// Aliases give the delivery the REST list's field names.
const EVENTS = `subscription($after: ID) { events(after: $after) {
  id kind phase signature metadata agent_asset: agentAsset created_at: createdAt
} }`;
/** the history shown on connect (one page of GET /v1/events, newest first) */
const HISTORY = 100;

/** REST /v1 with the key; throws the envelope's code and message. */
async function api(key, path, init = {}) {
  const res = await fetch(path, { ...init, headers: { authorization: `Bearer ${key}`, ...(init.headers ?? {}) } });
  const text = await res.text();
  const body = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error(`${res.status} ${body?.error ?? ''}: ${body?.message ?? text}`);
  return body;
}

/** A fresh single-use stream token for the key (POST /v1/auth/stream-token). */
async function streamToken(key) {
  return (await api(key, '/v1/auth/stream-token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).token;
}

function wsUrl() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
}

/** base64 → JSON (the PAYMENT-REQUIRED header of x402 v2). */
function decodeHeader(value) {
  const bytes = Uint8Array.from(atob(value), (c) => c.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes));
}

/** mint → { symbol, decimals } of the curated stables of every network (GET /v1/seller/networks). */
function stablesOf(networks) {
  return new Map((networks?.data ?? []).flatMap((n) => n.stables.map((s) => [s.mint, s])));
}

function Time({ iso }) {
  return html`<time datetime=${iso ?? ''} title=${iso ?? ''}>${localTime(iso)}</time>`;
}

/** An agent by its name when the key can read it (GET /v1/agents/{mint}), else its shortened address. */
function AgentName({ mint, agents }) {
  if (!mint) return '';
  const name = agents[mint];
  return html`<span class="agent-name" title=${mint}>${name || short(mint)}</span>`;
}

function Credentials({ onConnect, status }) {
  const [key, setKey] = useState('');
  const [token, setToken] = useState('');
  const submit = (e) => {
    e.preventDefault();
    onConnect({ key: key.trim(), token: token.trim() });
  };
  return html`<form class="credentials" onSubmit=${submit}>
    <label>API key <input id="key" type="password" autocomplete="off" placeholder="svc_test_…" value=${key} onInput=${(e) => setKey(e.target.value)} /></label>
    <label>or stream token <input id="token" autocomplete="off" placeholder="svc_stream_test_…" value=${token} onInput=${(e) => setToken(e.target.value)} /></label>
    <span class="actions"><button id="connect" type="submit">Connect</button><span id="status" class="status">${status}</span></span>
  </form>`;
}

/** What an event moved, in the stable's units. */
function eventAmount(e, stables) {
  const m = e.metadata ?? {};
  if (e.kind === 'payment_link.settled') return amountOf(m.amount_atomic, m.asset, stables);
  if (e.kind === 'protocol.fee.collected') return amountOf(m.fee_atomic, m.mint, stables);
  return '';
}

/** The short word for a step of a paid call, with what it says at a glance. */
function stepLabel(kind, e) {
  const m = e?.metadata ?? {};
  switch (kind) {
    case 'payment_link.settled':
      return 'settled';
    case 'payment_link.served':
      return e ? `served ${m.status}` : 'served';
    case 'receipt.published':
      return e ? `receipt #${m.nonce}` : 'receipt';
    case 'receipt.verified':
      return e?.kind === 'receipt.mismatch' ? 'mismatch' : 'verified';
    case 'protocol.fee.collected':
      return 'fee';
    default:
      return kind;
  }
}

function EventRow({ e, link, agents, stables, step }) {
  const kind = step ? stepLabel(e.kind === 'receipt.mismatch' ? 'receipt.verified' : e.kind, e) : e.kind;
  return html`<tr key=${e.id} class=${step ? 'step' : 'event'} data-id=${e.id} data-kind=${e.kind} data-link=${link ?? ''}>
    <td class="time"><${Time} iso=${e.created_at} /></td>
    <td class="kind" title=${e.kind}>${step ? '↳ ' : ''}${kind}${e.phase === 'confirmed' ? '' : html` <span class=${`phase ${e.phase}`}>${e.phase}</span>`}</td>
    <td class="agent"><${AgentName} mint=${e.agent_asset} agents=${agents} /></td>
    <td class="link"><code title=${link ?? ''}>${link ?? ''}</code></td>
    <td class="amount">${eventAmount(e, stables)}</td>
    <td class="tx"><code title=${e.signature ?? ''}>${short(e.signature)}</code></td>
  </tr>`;
}

/** One paid call: a summary row (what was paid, which steps have happened) and a row per step's event. */
function CallRows({ call, agents, stables }) {
  const settled = settledOf(call);
  const first = call.events[0];
  const m = settled?.metadata ?? {};
  const paid = settled ? amountOf(m.amount_atomic, m.asset, stables) : '';
  const fee = settled && m.fee_atomic !== '0' ? amountOf(m.fee_atomic, m.asset, stables) : '';
  return html`<tbody class="call" data-tx=${call.tx} data-link=${call.link ?? ''}>
    <tr class="call-summary">
      <td class="time"><${Time} iso=${call.at} /></td>
      <td class="kind">
        <strong>paid call</strong>
        <span class="steps">${callSteps(call).map(
          ({ kind, event }) =>
            html`<span key=${kind} class=${`chip ${event ? (event.kind === 'receipt.mismatch' ? 'bad' : 'done') : 'waiting'}`} data-step=${kind}>${stepLabel(kind, event)}</span>`,
        )}</span>
      </td>
      <td class="agent"><${AgentName} mint=${first?.agent_asset} agents=${agents} /></td>
      <td class="link"><code title=${call.link ?? ''}>${call.link ?? ''}</code></td>
      <td class="amount" title=${fee ? `plus a protocol fee of ${fee}` : ''}>${paid}</td>
      <td class="tx"><code title=${call.tx}>${short(call.tx)}</code></td>
    </tr>
    ${call.events.map((e) => html`<${EventRow} key=${e.id} e=${e} link=${call.link} agents=${agents} stables=${stables} step=${true} />`)}
  </tbody>`;
}

function Events({ events, agents, stables }) {
  const entries = timeline(events);
  return html`<h2>Events</h2>
    <table id="events" class="fixed">
      <colgroup><col class="c-time" /><col class="c-kind" /><col class="c-agent" /><col class="c-link" /><col class="c-amount" /><col class="c-tx" /></colgroup>
      <thead><tr><th>time</th><th>event</th><th>agent</th><th>link</th><th>amount</th><th>transaction</th></tr></thead>
      ${entries.map((entry) =>
        entry.type === 'call'
          ? html`<${CallRows} key=${entry.key} call=${entry} agents=${agents} stables=${stables} />`
          : html`<tbody key=${entry.key} class="single"><${EventRow} e=${entry.event} link=${entry.event.metadata?.payment_link_id} agents=${agents} stables=${stables} /></tbody>`,
      )}
    </table>
    ${entries.length === 0 ? html`<p class="empty">No events yet.</p>` : null}`;
}

function Links({ links, agents, onOffer, onAgent }) {
  return html`<h2>Payment links</h2>
    <table id="links" class="cards">
      <thead><tr><th>label</th><th>price</th><th>agent</th><th>calls</th><th>settled</th><th>last settled</th><th></th></tr></thead>
      <tbody>
        ${links.map(
          (l) => html`<tr key=${l.id} data-link-id=${l.id}>
            <td class="label">${l.label}</td><td class="nowrap" data-label="price">${l.price} ${l.currency}</td>
            <td data-label="agent"><${AgentName} mint=${l.owner_agent} agents=${agents} /></td>
            <td class="calls" data-label="calls">${l.counters.call_count}</td><td class="settled" data-label="settled">${l.counters.settled_count}</td>
            <td class="nowrap" data-label="last settled"><${Time} iso=${l.counters.last_settled_at} /></td>
            <td class="nowrap"><button class="offer" onClick=${() => onOffer(l)}>402 offer</button><button class="agent" onClick=${() => onAgent(l.owner_agent)}>agent</button></td>
          </tr>`,
        )}
      </tbody>
    </table>`;
}

function Offer({ offer }) {
  if (!offer) return null;
  if (offer.error) return html`<div id="offer"><h2>402 offer</h2><p class="error">${offer.error}</p></div>`;
  const accepts = offer.required?.accepts ?? [];
  return html`<div id="offer">
    <h2>402 offer of <code>${offer.linkId}</code></h2>
    <p>HTTP ${offer.status}, x402 version ${offer.required?.x402Version ?? '?'}</p>
    <div class="scroll">
      <table>
        <thead><tr><th>scheme</th><th>network</th><th>amount (atomic)</th><th>asset</th><th>pay to</th></tr></thead>
        <tbody>
          ${accepts.map(
            (a, i) =>
              html`<tr key=${i} class="accept"><td>${a.scheme}</td><td>${a.network}</td><td>${a.amount ?? a.maxAmountRequired}</td><td><code>${short(a.asset)}</code></td><td><code>${short(a.payTo)}</code></td></tr>`,
          )}
        </tbody>
      </table>
    </div>
    <pre>${JSON.stringify(offer.required, null, 2)}</pre>
  </div>`;
}

function Agent({ agent, agents }) {
  if (!agent) return null;
  if (agent.error) return html`<div id="agent"><h2>Agent</h2><p class="error">${agent.error}</p></div>`;
  const { mint, balances, receipts, chain } = agent;
  return html`<div id="agent">
    <h2>Agent ${agents[mint] ? `${agents[mint]} ` : ''}<code class="wrap">${mint}</code></h2>
    <p>Treasury <code class="wrap">${balances.treasury}</code>: ${decimal(balances.lamports, 9)} SOL (slot ${balances.slot})</p>
    <div class="scroll">
      <table id="balances">
        <thead><tr><th>token</th><th>amount</th><th>account</th></tr></thead>
        <tbody>
          ${balances.tokens.map(
            (b) =>
              html`<tr key=${b.token_account} data-symbol=${b.symbol ?? ''}><td>${b.symbol ?? short(b.mint)}</td><td class="amount">${decimal(b.amount_atomic, b.decimals)}</td><td><code>${short(b.token_account)}</code></td></tr>`,
          )}
        </tbody>
      </table>
    </div>
    <h2>Receipt chain (${chain.length}, ${chain.ok ? 'intact' : `broken at nonce ${chain.first_break?.nonce}: ${chain.first_break?.problem}`})</h2>
    <table id="receipts" class="cards">
      <thead><tr><th>nonce</th><th>kind</th><th>amount</th><th>hash</th><th>prev</th><th>verification</th></tr></thead>
      <tbody>
        ${receipts.map(
          (r) => html`<tr key=${r.receipt_hash} data-nonce=${r.nonce} data-verification=${r.verification.status}>
            <td data-label="nonce">${r.nonce}</td><td data-label="kind">${r.kind}</td><td class="nowrap" data-label="amount">${r.price.amount} ${r.price.currency}</td>
            <td data-label="hash"><code title=${r.receipt_hash}>${short(r.receipt_hash)}</code></td>
            <td data-label="prev"><code title=${r.prev_receipt_hash ?? ''}>${short(r.prev_receipt_hash)}</code></td>
            <td class=${r.verification.status} data-label="verification" title=${r.verification.reason ?? ''}>${r.verification.status}</td>
          </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

function App() {
  const [status, setStatus] = useState('not connected');
  const [events, setEvents] = useState([]);
  const [links, setLinks] = useState([]);
  const [offer, setOffer] = useState(null);
  const [agent, setAgent] = useState(null);
  const [agents, setAgents] = useState({});
  const [stables, setStables] = useState(new Map());
  const session = useRef({ key: '', client: null, agentMint: '', refresh: null, named: new Set() });

  const loadLinks = useCallback(async () => {
    const { key } = session.current;
    if (!key) return;
    try {
      setLinks((await api(key, '/v1/payment-links?limit=50')).data);
    } catch (e) {
      setStatus(`links: ${e.message}`);
    }
  }, []);

  const loadAgent = useCallback(async (mint) => {
    const { key } = session.current;
    if (!key || !mint) return;
    session.current.agentMint = mint;
    const path = encodeURIComponent(mint);
    try {
      const [balances, receipts, chain] = await Promise.all([
        api(key, `/v1/agents/${path}/treasury/balances`),
        api(key, `/v1/receipts/${path}?limit=50`),
        api(key, `/v1/receipts/${path}/verify-chain`),
      ]);
      setAgent({ mint, balances, receipts: receipts.data, chain });
    } catch (e) {
      setAgent({ mint, error: e.message });
    }
  }, []);

  // Agent names: each agent the page shows is read once per connection (GET /v1/agents/{mint}); one the key may not
  // read (another principal's) stays a shortened address.
  useEffect(() => {
    const { key, named } = session.current;
    if (!key) return;
    const mints = new Set([...events.map((e) => e.agent_asset), ...links.map((l) => l.owner_agent)]);
    for (const mint of mints) {
      if (!mint || named.has(mint)) continue;
      named.add(mint);
      api(key, `/v1/agents/${encodeURIComponent(mint)}`).then(
        (a) => a.name && session.current.key === key && setAgents((known) => ({ ...known, [mint]: a.name })),
        () => {},
      );
    }
  }, [events, links]);

  /** Lists follow the live events: a change re-reads them (coalesced). */
  const scheduleRefresh = useCallback(() => {
    if (session.current.refresh) return;
    session.current.refresh = setTimeout(() => {
      session.current.refresh = null;
      void loadLinks();
      if (session.current.agentMint) void loadAgent(session.current.agentMint);
    }, 150);
  }, [loadLinks, loadAgent]);

  const connect = useCallback(
    async ({ key, token }) => {
      session.current.client?.dispose();
      session.current.key = key;
      session.current.named = new Set();
      setEvents([]);
      setAgents({});
      if (!key && !token) return setStatus('paste an API key or a stream token');
      // A key reads the history first; the subscription then resumes after it. A stream token alone reads nothing
      // over REST: live events only.
      let after;
      if (key) {
        setStatus('reading history');
        try {
          const [history, networks] = await Promise.all([api(key, `/v1/events?limit=${HISTORY}`), api(key, '/v1/seller/networks').catch(() => null)]);
          setStables(stablesOf(networks));
          setEvents(mergeEvents([], history.data));
          after = resumeAfter(history.data);
        } catch (e) {
          setStatus(`events: ${e.message}`);
        }
      }
      let given = token || undefined;
      // A key fetches a fresh single-use token for every (re)connection; a pasted token serves one connection.
      const client = createClient({
        url: wsUrl(),
        lazy: false,
        retryAttempts: key ? 5 : 0,
        connectionParams: async () => {
          if (given) {
            const once = given;
            given = undefined;
            return { token: once };
          }
          if (!key) throw new Error('the stream token was used; paste a new one');
          return { token: await streamToken(key) };
        },
        on: {
          connected: () => setStatus('live'),
          closed: (e) => setStatus(`closed${e?.reason ? `: ${e.reason}` : ''}`),
        },
      });
      session.current.client = client;
      setStatus('connecting');
      // graphql-ws sends this request again on each reconnection: its `after` follows the newest delivered event in a
      // final phase (deliveries come in commit order), so a reconnection replays only what it missed; were the
      // request copied instead, it would replay from the first cursor, merged by id all the same.
      const request = { query: EVENTS, variables: after ? { after } : {} };
      client.subscribe(request, {
        next: (result) => {
          const delivered = result.data?.events;
          if (result.errors?.length) setStatus(`error: ${result.errors[0].message}`);
          if (!delivered) return;
          const event = liveEvent(delivered);
          if (isFinal(event)) request.variables = { after: event.id };
          setEvents((list) => mergeEvents(list, [event]));
          scheduleRefresh();
        },
        error: (e) => setStatus(`error: ${e?.reason ?? e?.message ?? 'connection refused'}`),
        complete: () => {},
      });
      await loadLinks();
    },
    [loadLinks, scheduleRefresh],
  );

  const showOffer = useCallback(async (link) => {
    // The link's own paywall URL, on this origin: its unpaid answer is the offer (x402 v2 header, v1 body).
    const share = new URL(link.share_url, location.href);
    try {
      const res = await fetch(`${share.pathname}${share.search}`, { method: link.method === 'GET' ? 'GET' : link.method });
      const header = res.headers.get('payment-required');
      const required = header ? decodeHeader(header) : await res.json();
      setOffer({ linkId: link.id, status: res.status, required });
    } catch (e) {
      setOffer({ linkId: link.id, error: e.message });
    }
  }, []);

  useEffect(() => () => session.current.client?.dispose(), []);

  return html`<main>
    <h1>svc gateway explorer</h1>
    <${Credentials} onConnect=${connect} status=${status} />
    <section class="events"><${Events} events=${events} agents=${agents} stables=${stables} /></section>
    <div class="grid">
      <section><${Links} links=${links} agents=${agents} onOffer=${showOffer} onAgent=${loadAgent} /><${Offer} offer=${offer} /></section>
      <section><${Agent} agent=${agent} agents=${agents} /></section>
    </div>
  </main>`;
}

render(html`<${App} />`, document.getElementById('root'));
