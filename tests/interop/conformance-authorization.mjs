#!/usr/bin/env node
// Drives the conformance suite's authorization-server mode headlessly.
//
// `conformance authorization` (0.2 alpha; 0.1.x has no such mode) runs the
// scenarios authorization-server-metadata-endpoint and
// authorization-code-grant. The second one needs a pre-registered client
// whose redirect URI is http://127.0.0.1:<port>/callback; it prints the
// authorization URL on stdout ("Access the following URL in your browser
// ...") and waits up to 5 minutes for the browser to land on its own
// callback listener. We register that client with DCR, watch stdout for the
// URL, walk the sign-in and consent forms over plain HTTP and then GET the
// final Location ourselves, which completes the suite's callback.
//
// Env: ISSUER, MCP_URL, GATEHOUSE_EMAIL, GATEHOUSE_PASSWORD,
//      CONFORMANCE_NODE (a Node >= 22 binary), CONFORMANCE_CLI (dist/index.js of
//      @modelcontextprotocol/conformance 0.2.x), CONFORMANCE_OUT (results dir).

import { spawn } from 'node:child_process';
import net from 'node:net';
import { createInterface } from 'node:readline';

import { env, fetchJson, short, walkAuthorization } from './lib/harness.mjs';

const issuer = env('ISSUER');
const mcpUrl = env('MCP_URL');
const email = env('GATEHOUSE_EMAIL', 'alice@example.com');
const password = env('GATEHOUSE_PASSWORD', 'correct-horse-battery');
const node = env('CONFORMANCE_NODE', process.execPath);
const cli = env('CONFORMANCE_CLI');
const out = process.env.CONFORMANCE_OUT;
const timeoutMs = Number(process.env.CONFORMANCE_TIMEOUT_MS || 120000);

function log(msg) {
  console.log(`  [as-driver] ${msg}`);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function main() {
  const meta = await fetchJson(`${issuer}/.well-known/oauth-authorization-server`);
  if (!meta.registration_endpoint) throw new Error('AS metadata has no registration_endpoint');
  const port = await freePort();
  const redirectUri = `http://127.0.0.1:${port}/callback`;

  const reg = await fetch(meta.registration_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({
      client_name: 'MCP conformance suite (authorization mode)',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  const regText = await reg.text();
  if (reg.status !== 201 && reg.status !== 200) throw new Error(`registration answered ${reg.status}: ${short(regText)}`);
  const client = JSON.parse(regText);
  log(`registered client ${client.client_id} with redirect ${redirectUri} (HTTP ${reg.status})`);

  const argv = [cli, 'authorization', '--url', issuer, '--client-id', client.client_id, '--resource', mcpUrl, '--port', String(port)];
  if (client.client_secret) argv.push('--client-secret', client.client_secret);
  if (out) argv.push('--output-dir', out);
  log(`running: node ${argv.map((a) => (a === cli ? '<conformance>/dist/index.js' : a)).join(' ')}`);

  const child = spawn(node, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  const killer = setTimeout(() => {
    log(`timeout after ${timeoutMs} ms, killing the suite`);
    child.kill('SIGTERM');
  }, timeoutMs);

  let walked = false;
  let walkError = null;
  const rl = createInterface({ input: child.stdout });
  rl.on('line', async (line) => {
    console.log(`  | ${line}`);
    const m = line.trim().match(/^(https?:\/\/\S+)$/);
    if (!m || walked) return;
    let u;
    try {
      u = new URL(m[1]);
    } catch {
      return;
    }
    if (u.searchParams.get('response_type') !== 'code') return;
    walked = true;
    try {
      // Give the suite a moment to have its callback listener up (it starts it
      // before printing, but the listen() is asynchronous).
      await new Promise((r) => setTimeout(r, 200));
      const w = await walkAuthorization(u.href, { email, password, returnErrors: true });
      log(`walked: ${w.steps.join(' | ')}`);
      log(`delivering callback ${w.callbackUrl.replace(/code=[^&]+/, 'code=…')}`);
      const cb = await fetch(w.callbackUrl);
      await cb.text();
    } catch (e) {
      walkError = e;
      log(`browser step failed: ${e.message}`);
      child.kill('SIGTERM');
    }
  });
  createInterface({ input: child.stderr }).on('line', (l) => console.log(`  ! ${l}`));

  const code = await new Promise((resolve) => child.on('close', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  clearTimeout(killer);
  if (walkError) return 1;
  if (!walked) log('the suite never printed an authorization URL');
  return code;
}

main().then(
  (code) => {
    console.log(`conformance authorization: exit ${code}`);
    process.exit(code);
  },
  (err) => {
    console.log(`conformance authorization: driver error: ${err.message}`);
    process.exit(1);
  },
);
