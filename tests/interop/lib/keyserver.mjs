// A tiny issuer for the assertion makers: serves JSON documents (an OpenID Connect discovery
// document, a JWK Set) over plain http on a loopback port, where Gatehouse fetches an
// operator's key sets (plain http is accepted only on a loopback host). The documents may be
// replaced while it runs (key rotation).

import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';

import { env } from './harness.mjs';

/** Starts the server; returns { origin, serve(path, doc), close() }. */
export async function startKeyServer() {
  const docs = new Map();
  const server = createServer((req, res) => {
    const doc = docs.get(new URL(req.url, 'http://x').pathname);
    if (doc === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' });
    res.end(JSON.stringify(doc));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    origin,
    serve: (path, doc) => docs.set(path, doc),
    close: () => server.close(),
  };
}

/** Runs `gatehouse ARGS…` on the run's database (GATEHOUSE_BIN, DATABASE_URL, MCP_URL). */
export function gatehouse(args) {
  return execFileSync(env('GATEHOUSE_BIN'), args, {
    encoding: 'utf8',
    env: { ...process.env, MCP_SERVER_URL: env('MCP_URL') },
  });
}

/** POSTs `fields` as a form, with `headers` too; returns { status, body } (JSON, or { raw }). */
export async function postForm(url, fields, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', ...headers },
    body: new URLSearchParams(fields).toString(),
  });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { raw: text }; }
  return { status: res.status, body };
}

/** tools/list at `mcpUrl` with `token` (2025-06-18); returns { status, text }. */
export async function toolsList(mcpUrl, token) {
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  return { status: res.status, text: await res.text() };
}
