import { randomBytes } from 'node:crypto';
import QRCode from 'qrcode';
import { escapeHtml } from '../pages/html.ts';
import type { PaywallPageModel } from '../../domain/paywall/page.ts';
import { PAGE_SESSION_MS, type PageSession } from '../../domain/paywall/solana-pay.ts';

// The paywall page (docs/paywall.md "In a browser"): a person opening a share_url gets, with the same 402 status, a
// page instead of the x402 JSON — the offer in human units, how to pay from code, and a Solana Pay transaction request
// (link + QR code, drawn here as inline SVG: the page loads nothing from another host). API clients keep the JSON
// answer byte for byte: only a request that prefers text/html over JSON is shown the page.

/** A value for an inline script: JSON with `<` escaped, so no string can close the script element. */
const scriptValue = (value: unknown): string => JSON.stringify(value).replace(/</g, '\\u003c');

export interface PageLinks {
  /** the https transaction request link (Solana Pay) */
  transactionRequest: string;
  /** the status route of this page's payment */
  status: string;
}

/** `solana:` + the URL-encoded https link (Solana Pay: a link with a query must be encoded). */
export const solanaPayUrl = (https: string): string => `solana:${encodeURIComponent(https)}`;

function snippets(model: PaywallPageModel): { title: string; code: string }[] {
  // keypair / signer: the buyer's; rpcUrl: a JSON-RPC node of the link's network
  const url = JSON.stringify(model.url);
  const method = model.method === 'GET' ? '' : `, { method: '${model.method}' }`;
  const out = [
    {
      title: 'The buyer kit (both rails, the protocol fee included)',
      code: [
        "import { createPayingFetch } from 'svc-gateway/client/pay';",
        `const pay = createPayingFetch({ signer: keypair, rpcUrl, network: '${model.network}' });`,
        `const res = await pay(${url}${method});`,
      ].join('\n'),
    },
  ];
  if (model.protocol === 'x402') {
    out.push({
      title: 'The official x402 client (@x402/fetch) with the fee scheme',
      code: [
        "import { x402Client, wrapFetchWithPayment } from '@x402/fetch';",
        "import { ExactSvmFeeScheme } from 'svc-gateway/x402';",
        `const client = new x402Client().register('solana:*', new ExactSvmFeeScheme(signer, { rpcUrl }));`,
        `const res = await wrapFetchWithPayment(fetch, client)(${url}${method});`,
      ].join('\n'),
    });
  } else {
    out.push({
      title: 'The reference MPP client (mppx) with the Solana charge method',
      code: [
        "import { Mppx } from 'mppx/client';",
        "import { solanaCharge } from 'svc-gateway/mpp';",
        `const mppx = Mppx.create({ methods: [solanaCharge({ signer: keypair, rpcUrl, network: '${model.network}' })], polyfill: false });`,
        `const res = await mppx.fetch(${url}${method});`,
      ].join('\n'),
    });
  }
  return out;
}

/** The page and the nonce its one inline script runs under (the CSP names it). */
export async function renderPaywallPage(model: PaywallPageModel, session: PageSession, links: PageLinks): Promise<{ html: string; nonce: string }> {
  const nonce = randomBytes(16).toString('base64');
  const solanaPay = solanaPayUrl(links.transactionRequest);
  const qr = await QRCode.toString(solanaPay, { type: 'svg', errorCorrectionLevel: 'M', margin: 2, width: 240 });
  const prices = model.prices
    .map((p) => {
      const fee = p.feePct
        ? ` <span class="fee">+ ${escapeHtml(p.fee)} ${escapeHtml(p.currency)} protocol fee (${escapeHtml(p.feePct)}%): ${escapeHtml(p.gross)} ${escapeHtml(p.currency)} in all</span>`
        : '';
      return `<li data-asset="${escapeHtml(p.asset)}"><strong class="price">${escapeHtml(p.amount)} ${escapeHtml(p.currency)}</strong>${fee}</li>`;
    })
    .join('');
  const code = snippets(model)
    .map((s) => `<h3>${escapeHtml(s.title)}</h3><pre class="snippet"><code>${escapeHtml(s.code)}</code></pre>`)
    .join('');
  const wallet =
    model.protocol === 'x402'
      ? `<section id="wallet"><h2>Pay with a wallet</h2>
<p>Scan with a Solana Pay wallet, or open the link on a device that has one. The wallet asks this gateway for the
transaction (the exact payment, its network fees paid by the gateway's facilitator), you approve it, and this page
shows what you bought. A wallet can start the payment for ${PAGE_SESSION_MS / 60_000} minutes after the page loaded.</p>
<div id="qr">${qr}</div>
<p><a id="solana-pay" href="${escapeHtml(solanaPay)}">Open in wallet</a></p>
<p id="status" data-state="waiting">Waiting for the payment…</p>
<div id="paid" hidden><h3>Your response</h3><p id="paid-meta"></p><pre id="paid-body"></pre></div>
</section>`
      : `<section id="wallet"><h2>Pay with a wallet</h2><p>This link is paid on the MPP rail: pay it from code (below).</p></section>`;
  const script =
    model.protocol === 'x402'
      ? `<script nonce="${nonce}">
(() => {
  const session = ${scriptValue({ status: links.status, secret: session.secret })};
  const status = document.getElementById('status');
  const show = (state, text) => { status.dataset.state = state; status.textContent = text; };
  const decode = (b64) => { const bin = atob(b64); const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0)); return new TextDecoder().decode(bytes); };
  async function poll() {
    let answer;
    try {
      const res = await fetch(session.status, { headers: { 'x-svc-page-secret': session.secret, accept: 'application/json' }, cache: 'no-store' });
      answer = await res.json();
      if (!res.ok) { show('error', answer.message || ('HTTP ' + res.status)); if (res.status !== 429 && res.status < 500) return; }
    } catch (e) { show('error', 'Cannot reach the gateway; retrying.'); }
    if (answer && answer.state === 'paid') {
      show('paid', 'Paid: transaction ' + answer.signature);
      if (answer.response) {
        document.getElementById('paid-meta').textContent = 'HTTP ' + answer.response.status + ' · ' + (answer.response.headers['content-type'] || '');
        document.getElementById('paid-body').textContent = decode(answer.response.body);
        document.getElementById('paid').hidden = false;
      }
      return;
    }
    if (answer && answer.state === 'refused') { show('refused', answer.message); return; }
    if (answer && answer.state === 'pending') show('pending', 'Payment seen on the ledger; recording it…');
    setTimeout(poll, 1000);
  }
  poll();
})();
</script>`
      : '';
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(model.label)} — payment required</title>
<style>
body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1b1b1f;line-height:1.45}
h1{margin-bottom:.25rem}.fee{color:#555;font-size:.9em}dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}
dt{font-weight:600}pre{background:#f4f4f6;padding:.75rem;overflow-x:auto;border-radius:6px}#qr svg{width:240px;height:240px}
#status[data-state=paid]{color:#11692b;font-weight:600}#status[data-state=refused],#status[data-state=error]{color:#a1120f}
</style></head>
<body>
<main>
<p>402 · Payment required</p>
<h1 id="label">${escapeHtml(model.label)}</h1>
${model.description ? `<p id="description">${escapeHtml(model.description)}</p>` : ''}
<ul id="prices">${prices}</ul>
<dl>
<dt>Network</dt><dd id="network">${escapeHtml(model.network)}</dd>
<dt>You receive</dt><dd id="receive">the answer to <code>${escapeHtml(model.method)} ${escapeHtml(model.url)}</code> (<code>${escapeHtml(model.mimeType)}</code>)</dd>
<dt>Protocol</dt><dd>${model.protocol === 'x402' ? 'x402 (HTTP 402, Solana exact scheme)' : 'MPP (Solana charge)'}</dd>
</dl>
${wallet}
<section id="code"><h2>Pay from code</h2>${code}
<p>API clients asking for JSON get the machine-readable 402 offer at the same address.</p></section>
</main>
${script}
</body></html>
`;
  return { html, nonce };
}
