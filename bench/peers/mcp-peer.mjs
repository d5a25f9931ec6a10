// The official MCP TypeScript SDK as a stateless Streamable HTTP server with a bearer check,
// set up as their READMEs show: for every POST a new server and a new transport
// (sessionIdGenerator undefined, JSON responses), the SDK's own requireBearerAuth with
// requiredScopes, resourceMetadataUrl and expectedResource, and one tool, `echo`.
// The verifier is an in-memory map of 100,000 random tokens (no database).
//
//   node mcp-peer.mjs v1|v2 PORT TOKEN_FILE
//
// Writes 16 of the valid tokens to TOKEN_FILE (one a line) once listening.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import express from 'express';
import * as z from 'zod';

const [generation, portArg, tokenFile] = process.argv.slice(2);
const port = Number(portArg);
const mcpUrl = `http://127.0.0.1:${port}/mcp`;
const prmUrl = `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`;
const SCOPE = 'mcp:tools';

const tokens = new Map();
const expiresAt = Math.floor(Date.now() / 1000) + 24 * 3600;
for (let i = 0; i < 100_000; i++) {
  tokens.set(randomBytes(24).toString('base64url'), { clientId: `client-${i % 100}` });
}
const verifier = {
  async verifyAccessToken(token) {
    const t = tokens.get(token);
    if (!t) {
      throw new InvalidTokenError('unknown token');
    }
    return { token, clientId: t.clientId, scopes: [SCOPE], expiresAt, resource: new URL(mcpUrl) };
  },
};

let InvalidTokenError;
let app;
let handle;
if (generation === 'v1') {
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const { requireBearerAuth } = await import('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
  ({ InvalidTokenError } = await import('@modelcontextprotocol/sdk/server/auth/errors.js'));
  app = express();
  app.use(express.json());
  app.use('/mcp', requireBearerAuth({ verifier, requiredScopes: [SCOPE], resourceMetadataUrl: prmUrl }));
  handle = async (req, res) => {
    const server = new McpServer({ name: 'bench-v1', version: '1.0.0' });
    server.registerTool(
      'echo',
      { description: 'Echoes the text', inputSchema: { text: z.string() } },
      async ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  };
} else if (generation === 'v2') {
  const { McpServer, OAuthError } = await import('@modelcontextprotocol/server');
  const { NodeStreamableHTTPServerTransport } = await import('@modelcontextprotocol/node');
  const { createMcpExpressApp, requireBearerAuth } = await import('@modelcontextprotocol/express');
  InvalidTokenError = class extends OAuthError {
    constructor(message) {
      super('invalid_token', message);
    }
  };
  app = createMcpExpressApp();
  app.use(
    '/mcp',
    requireBearerAuth({ verifier, requiredScopes: [SCOPE], resourceMetadataUrl: prmUrl, expectedResource: new URL(mcpUrl) }),
  );
  handle = async (req, res) => {
    const server = new McpServer({ name: 'bench-v2', version: '2.0.0' });
    server.registerTool(
      'echo',
      { description: 'Echoes the text', inputSchema: z.object({ text: z.string() }) },
      async ({ text }) => ({ content: [{ type: 'text', text }] }),
    );
    const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  };
} else {
  console.error('usage: node mcp-peer.mjs v1|v2 PORT TOKEN_FILE');
  process.exit(2);
}

app.post('/mcp', (req, res) => {
  handle(req, res).catch((e) => {
    console.error(e);
    if (!res.headersSent) res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null });
  });
});

app.listen(port, '127.0.0.1', () => {
  writeFileSync(tokenFile, [...tokens.keys()].slice(0, 16).join('\n') + '\n');
  console.log(`mcp ${generation} peer on ${mcpUrl}`);
});
