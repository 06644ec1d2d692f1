import { createServer, type IncomingMessage } from 'node:http';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { boundedServerOptions, DEFAULT_REQUEST_BOUNDS } from '../../domain/shared/request-bounds.ts';
import { ConfigError, loadToolEnv, readConfigFile, writeConfigFile } from './config.ts';
import { ToolContext } from './context.ts';
import { createToolServer } from './server.ts';

// `npm run mcp`: the agent tool server (fee-facilitator-mpp-tools §2.8, §4.3) over stdio, or `--http PORT` for
// streamable HTTP (POST /mcp, stateless). `export FILE` / `import FILE` round-trip the configuration file (0600).
// stdout belongs to the protocol: messages go to stderr, and no message ever carries the executive key.

const USAGE = `usage: npm run mcp [-- --http PORT [--host HOST]]
       npm run mcp -- export FILE     copy the configuration file to FILE (mode 0600)
       npm run mcp -- import FILE     validate FILE and install it as the configuration file (mode 0600)`;

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 4 * 1024 * 1024) throw new Error('request body over 4 MiB');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

async function serveHttp(ctx: ToolContext, port: number, host: string): Promise<void> {
  // bounded like the gateway's listeners (domain/shared/request-bounds.ts): a client that never finishes holds no socket
  const http = createServer(boundedServerOptions(DEFAULT_REQUEST_BOUNDS), (req, res) => {
    void (async () => {
      if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not_found', message: 'The MCP endpoint is POST /mcp.' }));
        return;
      }
      // stateless: one server and transport per request, over the one shared ToolContext
      const server = createToolServer(ctx);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(req, res, req.method === 'POST' ? await readBody(req) : undefined);
      } catch (e) {
        if (!res.headersSent)
          res
            .writeHead(400, { 'content-type': 'application/json' })
            .end(JSON.stringify({ error: 'invalid_request', message: e instanceof Error ? e.message : String(e) }));
      }
    })();
  });
  await new Promise<void>((resolve) => http.listen(port, host, resolve));
  const address = http.address();
  process.stderr.write(`svc agent tools: streamable HTTP on http://${host}:${typeof address === 'object' && address ? address.port : port}/mcp\n`);
  const stop = () => http.close(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

async function main(argv: string[]): Promise<void> {
  const env = loadToolEnv();
  const [command, arg] = argv;
  if (command === 'export' || command === 'import') {
    if (!arg) throw new ConfigError(USAGE);
    const from = command === 'export' ? env.configPath : arg;
    const to = command === 'export' ? arg : env.configPath;
    const config = await readConfigFile(from);
    if (!config) throw new ConfigError(`${from} does not exist.`);
    await writeConfigFile(to, config);
    process.stderr.write(`${command === 'export' ? 'exported' : 'imported'} ${from} → ${to} (mode 0600)\n`);
    return;
  }
  const ctx = new ToolContext(env);
  await ctx.load();
  if (command === '--http') {
    const port = Number(arg);
    if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new ConfigError(USAGE);
    const hostIndex = argv.indexOf('--host');
    await serveHttp(ctx, port, hostIndex >= 0 ? (argv[hostIndex + 1] ?? '127.0.0.1') : '127.0.0.1');
    return;
  }
  if (command !== undefined) throw new ConfigError(USAGE);
  const server = createToolServer(ctx);
  await server.connect(new StdioServerTransport());
  process.stderr.write(`svc agent tools: stdio, ${ctx.network}, API ${env.apiUrl}, config ${env.configPath}\n`);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`${e instanceof ConfigError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
