import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { toToolError, type ToolContext } from './context.ts';
import { TOOLS } from './tools/index.ts';

// The MCP server: the 17 tools over one ToolContext. A tool answers JSON text; a failure answers isError with
// { error, message, details } — the API's envelope without request_id — so a host branches on `error`.

export const SERVER_NAME = 'svc-agent-tools';
export const SERVER_VERSION = '0.1.0';

const text = (value: unknown): CallToolResult['content'] => [
  { type: 'text', text: JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2) },
];

export function createToolServer(ctx: ToolContext): McpServer {
  const server = new McpServer({ name: SERVER_NAME, version: SERVER_VERSION });
  for (const tool of TOOLS) {
    server.registerTool(tool.name, { title: tool.title, description: tool.description, inputSchema: tool.input }, (async (args: unknown) => {
      try {
        return { content: text(await tool.run(ctx, args as never)) };
      } catch (e) {
        const err = toToolError(e);
        return { isError: true, content: text({ error: err.code, message: err.message, details: err.details }) };
      }
    }) as never);
  }
  return server;
}
