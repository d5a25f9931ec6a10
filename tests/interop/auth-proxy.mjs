#!/usr/bin/env node
// Tiny forwarding proxy for the conformance suite's server mode, which sends
// no credentials. Listens on a random loopback port, forwards every request
// to --target and adds `Authorization: Bearer <token>` (read from
// --token-file on every request, a JSON file with access_token, written by
// sdk-v1-client.mjs). Host, Origin and every other header pass through
// unchanged, so the server's DNS-rebinding checks see the client's own values
// (a loopback Origin naming the proxy's port included: Gatehouse on a loopback
// listener serves loopback origins on any port).
// On a 401 from upstream it refreshes once with the refresh_token in the
// token file (if any), rewrites the file and retries.
//
// Usage: node auth-proxy.mjs --target http://127.0.0.1:PORT --token-file F [--port-file P]
// Prints "auth-proxy listening on http://127.0.0.1:<port>" and writes the
// port to --port-file.

import http from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    target: { type: 'string' },
    'token-file': { type: 'string' },
    'port-file': { type: 'string' },
    port: { type: 'string', default: '0' },
    verbose: { type: 'boolean', default: false },
  },
});
if (!args.target || !args['token-file']) {
  console.error('usage: auth-proxy.mjs --target URL --token-file FILE [--port-file FILE] [--port N]');
  process.exit(2);
}
const target = new URL(args.target);
const tokenFile = args['token-file'];

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function readToken() {
  return JSON.parse(readFileSync(tokenFile, 'utf8'));
}

let refreshing = null;
async function refresh(staleAccessToken) {
  const cur = readToken();
  if (cur.access_token !== staleAccessToken) return; // someone already refreshed
  if (!cur.refresh_token || !cur.token_endpoint || !cur.client_id) throw new Error('token file has no refresh data');
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: cur.refresh_token, client_id: cur.client_id });
  if (cur.resource) body.set('resource', cur.resource);
  const res = await fetch(cur.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: body.toString(),
  });
  const json = await res.json().catch(() => ({}));
  if (res.status !== 200 || !json.access_token) throw new Error(`refresh failed: ${res.status} ${JSON.stringify(json)}`);
  writeFileSync(tokenFile, JSON.stringify({ ...cur, access_token: json.access_token, refresh_token: json.refresh_token ?? cur.refresh_token }, null, 2) + '\n', { mode: 0o600 });
  console.log('auth-proxy: refreshed the access token after a 401');
}

function forward(req, body, accessToken) {
  return new Promise((resolve, reject) => {
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(k)) headers[k] = v;
    }
    if (!headers.authorization && accessToken) headers.authorization = `Bearer ${accessToken}`;
    if (body.length > 0) headers['content-length'] = String(body.length);
    else if (req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'DELETE') headers['content-length'] = '0';
    const up = http.request(
      {
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers, // includes the client's own Host header, unchanged
        setHost: false,
      },
      resolve,
    );
    up.on('error', reject);
    up.end(body);
  });
}

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  try {
    let token;
    try {
      token = readToken().access_token;
    } catch (e) {
      console.error(`auth-proxy: cannot read token file: ${e.message}`);
    }
    let upstream = await forward(req, body, token);
    if (upstream.statusCode === 401 && token && !req.headers.authorization) {
      upstream.resume();
      try {
        refreshing ??= refresh(token).finally(() => (refreshing = null));
        await refreshing;
        upstream = await forward(req, body, readToken().access_token);
      } catch (e) {
        console.error(`auth-proxy: ${e.message}`);
        upstream = await forward(req, body, token);
      }
    }
    if (args.verbose) console.log(`auth-proxy: ${req.method} ${req.url} host=${req.headers.host} origin=${req.headers.origin ?? '-'} -> ${upstream.statusCode}`);
    const outHeaders = {};
    for (const [k, v] of Object.entries(upstream.headers)) {
      if (!HOP_BY_HOP.has(k)) outHeaders[k] = v;
    }
    res.writeHead(upstream.statusCode, upstream.statusMessage, outHeaders);
    res.flushHeaders();
    upstream.pipe(res);
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
  } catch (e) {
    console.error(`auth-proxy: upstream error for ${req.method} ${req.url}: ${e.message}`);
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`auth-proxy upstream error: ${e.message}`);
  }
});

server.listen(Number(args.port), '127.0.0.1', () => {
  const { port } = server.address();
  if (args['port-file']) writeFileSync(args['port-file'], `${port}\n`);
  console.log(`auth-proxy listening on http://127.0.0.1:${port} -> ${target.origin}`);
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 100).unref();
  });
}
