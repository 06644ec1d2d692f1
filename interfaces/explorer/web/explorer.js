// The explorer page: live events over graphql-ws (authenticated with a stream token), and through REST /v1
// the payment links with their counters, an agent's treasury balances and receipt chain, and a link's 402 offer.
// Bundled by interfaces/explorer/build.ts (esbuild) into dist/explorer/. Lists come from REST so GraphQL enum spellings
// never matter here; the GraphQL document below uses no enum literal.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { createClient } from 'graphql-ws';

const html = htm.bind(h);

// `after`: the newest event when the page connected, so nothing committed while the subscription attaches is missed.
const EVENTS = `subscription($after: ID) { events(after: $after) { id kind phase network agentAsset signature createdAt metadata } }`;
const MAX_EVENTS = 200;

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

/** An atomic amount as a decimal string (bigint arithmetic, no float). */
function decimal(atomic, decimals) {
  const n = BigInt(atomic);
  const d = 10n ** BigInt(decimals);
  const frac = (n % d).toString().padStart(decimals, '0').replace(/0+$/, '');
  return frac ? `${n / d}.${frac}` : `${n / d}`;
}

const short = (s) => (s && s.length > 14 ? `${s.slice(0, 6)}…${s.slice(-6)}` : s ?? '');

function Credentials({ onConnect, status }) {
  const [key, setKey] = useState('');
  const [token, setToken] = useState('');
  const submit = (e) => {
    e.preventDefault();
    onConnect({ key: key.trim(), token: token.trim() });
  };
  return html`<form onSubmit=${submit}>
    <label>API key <input id="key" type="password" autocomplete="off" placeholder="svc_test_…" value=${key} onInput=${(e) => setKey(e.target.value)} /></label>
    <label> or stream token <input id="token" autocomplete="off" placeholder="svc_stream_test_…" value=${token} onInput=${(e) => setToken(e.target.value)} /></label>
    <button id="connect" type="submit">Connect</button>
    <span id="status" class="status">${status}</span>
  </form>`;
}

function Events({ events }) {
  return html`<h2>Live events</h2>
    <table id="events">
      <thead><tr><th>time</th><th>kind</th><th>phase</th><th>agent</th><th>link</th><th>signature</th></tr></thead>
      <tbody>
        ${events.map(
          (e) => html`<tr key=${e.id} data-id=${e.id} data-kind=${e.kind} data-link=${e.metadata?.payment_link_id ?? ''}>
            <td>${e.createdAt}</td><td>${e.kind}</td><td>${e.phase}</td><td><code>${short(e.agentAsset)}</code></td>
            <td><code>${e.metadata?.payment_link_id ?? ''}</code></td><td><code>${short(e.signature)}</code></td>
          </tr>`,
        )}
      </tbody>
    </table>`;
}

function Links({ links, onOffer, onAgent }) {
  return html`<h2>Payment links</h2>
    <table id="links">
      <thead><tr><th>label</th><th>price</th><th>calls</th><th>settled</th><th>last settled</th><th></th></tr></thead>
      <tbody>
        ${links.map(
          (l) => html`<tr key=${l.id} data-link-id=${l.id}>
            <td>${l.label}</td><td>${l.price} ${l.currency}</td>
            <td class="calls">${l.counters.call_count}</td><td class="settled">${l.counters.settled_count}</td>
            <td>${l.counters.last_settled_at ?? '—'}</td>
            <td><button class="offer" onClick=${() => onOffer(l)}>402 offer</button><button class="agent" onClick=${() => onAgent(l.owner_agent)}>agent</button></td>
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
    <h2>402 offer of ${offer.linkId}</h2>
    <p>HTTP ${offer.status}, x402 version ${offer.required?.x402Version ?? '?'}</p>
    <table>
      <thead><tr><th>scheme</th><th>network</th><th>amount (atomic)</th><th>asset</th><th>pay to</th></tr></thead>
      <tbody>
        ${accepts.map(
          (a, i) => html`<tr key=${i} class="accept"><td>${a.scheme}</td><td>${a.network}</td><td>${a.amount ?? a.maxAmountRequired}</td><td><code>${short(a.asset)}</code></td><td><code>${short(a.payTo)}</code></td></tr>`,
        )}
      </tbody>
    </table>
    <pre>${JSON.stringify(offer.required, null, 2)}</pre>
  </div>`;
}

function Agent({ agent }) {
  if (!agent) return null;
  if (agent.error) return html`<div id="agent"><h2>Agent</h2><p class="error">${agent.error}</p></div>`;
  const { mint, balances, receipts, chain } = agent;
  return html`<div id="agent">
    <h2>Agent <code>${mint}</code></h2>
    <p>Treasury <code>${balances.treasury}</code>: ${decimal(balances.lamports, 9)} SOL (slot ${balances.slot})</p>
    <table id="balances">
      <thead><tr><th>token</th><th>amount</th><th>account</th></tr></thead>
      <tbody>
        ${balances.tokens.map(
          (b) => html`<tr key=${b.token_account} data-symbol=${b.symbol ?? ''}><td>${b.symbol ?? short(b.mint)}</td><td class="amount">${decimal(b.amount_atomic, b.decimals)}</td><td><code>${short(b.token_account)}</code></td></tr>`,
        )}
      </tbody>
    </table>
    <h2>Receipt chain (${chain.length}, ${chain.ok ? 'intact' : `broken at nonce ${chain.first_break?.nonce}: ${chain.first_break?.problem}`})</h2>
    <table id="receipts">
      <thead><tr><th>nonce</th><th>kind</th><th>amount</th><th>hash</th><th>prev</th><th>verification</th></tr></thead>
      <tbody>
        ${receipts.map(
          (r) => html`<tr key=${r.receipt_hash} data-nonce=${r.nonce} data-verification=${r.verification.status}>
            <td>${r.nonce}</td><td>${r.kind}</td><td>${r.price.amount} ${r.price.currency}</td>
            <td><code>${short(r.receipt_hash)}</code></td><td><code>${short(r.prev_receipt_hash)}</code></td>
            <td class=${r.verification.status} title=${r.verification.reason ?? ''}>${r.verification.status}</td>
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
  const session = useRef({ key: '', client: null, agentMint: '', refresh: null });

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
      setEvents([]);
      if (!key && !token) return setStatus('paste an API key or a stream token');
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
      let after;
      if (key) {
        try {
          after = (await api(key, '/v1/events?limit=1')).data[0]?.id;
        } catch (e) {
          setStatus(`events: ${e.message}`);
        }
      }
      client.subscribe(
        { query: EVENTS, variables: after ? { after } : {} },
        {
          next: (result) => {
            const event = result.data?.events;
            if (result.errors?.length) setStatus(`error: ${result.errors[0].message}`);
            if (!event) return;
            // a phase change of an event already shown replaces its row
            setEvents((list) => (list.some((e) => e.id === event.id) ? list.map((e) => (e.id === event.id ? event : e)) : [event, ...list].slice(0, MAX_EVENTS)));
            scheduleRefresh();
          },
          error: (e) => setStatus(`error: ${e?.reason ?? e?.message ?? 'connection refused'}`),
          complete: () => {},
        },
      );
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
    <div class="grid">
      <section><${Events} events=${events} /></section>
      <section>
        <${Links} links=${links} onOffer=${showOffer} onAgent=${loadAgent} />
        <${Offer} offer=${offer} />
        <${Agent} agent=${agent} />
      </section>
    </div>
  </main>`;
}

render(html`<${App} />`, document.getElementById('root'));
