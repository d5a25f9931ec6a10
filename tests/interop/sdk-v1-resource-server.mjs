#!/usr/bin/env node
// Official TypeScript SDK 1.x client against an MCP server that is not Gatehouse (the Python
// SDK's resource server, python-resource-server.py) but uses Gatehouse as its authorization
// server: 401 from that server -> its protected-resource metadata -> Gatehouse's metadata ->
// dynamic registration -> authorization for that server's resource (sign-in + consent walked
// headlessly) -> token -> tool call. Then no token crosses over: the Python server refuses a
// token issued for Gatehouse's own MCP endpoint and Gatehouse refuses the Python server's.
//
// Env: RS_URL (the Python server's MCP URL), MCP_URL (Gatehouse's), ISSUER, GATEHOUSE_EMAIL,
// GATEHOUSE_PASSWORD, TOKEN_FILE (a Gatehouse token, written by sdk-v1-client.mjs).

import { readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { HeadlessOAuthProvider, Reporter, assert, env, fetchJson, runScript, settings } from './lib/harness.mjs';

const rep = new Reporter('resource-server');
const s = settings();
const rsUrl = env('RS_URL');
const clientInfo = { name: 'gatehouse-interop-resource-server', version: '1.32.2' };

/** POSTs `initialize` to `url` with `token`; returns the HTTP status. */
async function initializeWith(url, token) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`,
      'mcp-protocol-version': '2025-11-25',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'probe', version: '0' } },
    }),
  });
  await res.text();
  return res.status;
}

await runScript(rep, async () => {
  rep.info(`resource server ${rsUrl}, authorization server ${s.issuer}`);

  await rep.check('the resource server names Gatehouse in its protected-resource metadata', async () => {
    const res = await fetch(rsUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    await res.text();
    assert(res.status === 401, `expected 401, got ${res.status}`);
    const wa = res.headers.get('www-authenticate') ?? '';
    const rm = wa.match(/resource_metadata="([^"]*)"/);
    assert(rm, `no resource_metadata in ${JSON.stringify(wa)}`);
    const prm = await fetchJson(rm[1]);
    assert(prm.resource === rsUrl, `resource is ${prm.resource}`);
    const servers = (prm.authorization_servers ?? []).map((u) => u.replace(/\/$/, ''));
    assert(servers.includes(s.issuer), `authorization_servers is ${JSON.stringify(prm.authorization_servers)}`);
    return `authorization_servers ${JSON.stringify(prm.authorization_servers)}`;
  }, { fatal: true });

  const provider = new HeadlessOAuthProvider({
    redirectUrl: s.redirectUrl,
    clientName: 'Gatehouse interop (resource server)',
    email: s.email,
    password: s.password,
  });
  let transport = new StreamableHTTPClientTransport(new URL(rsUrl), { authProvider: provider });
  let client = new Client(clientInfo);
  await rep.check('connect discovers Gatehouse from the 401, registers and authorizes', async () => {
    try {
      await client.connect(transport);
    } catch (err) {
      if (err instanceof UnauthorizedError) {
        assert(provider.lastWalk, `UnauthorizedError without a walk: ${err.message}`);
        return `registered client ${provider.clientInformation()?.client_id}`;
      }
      throw err;
    }
    throw new Error('connect() succeeded without any token');
  }, { fatal: true });

  const walk = provider.lastWalk;
  await rep.check('the authorization request is for the resource server, consent shown', () => {
    const u = new URL(walk.authorizationUrl);
    assert(u.origin === s.issuer, `authorization at ${u.origin}, expected ${s.issuer}`);
    assert(u.searchParams.get('resource') === rsUrl, `resource is ${u.searchParams.get('resource')}`);
    assert(walk.consentShown, `no consent page (steps: ${walk.steps.join(', ')})`);
    return `scope="${u.searchParams.get('scope')}"`;
  }, { fatal: true });

  await rep.check('finishAuth exchanges the code for a token of that resource', async () => {
    await transport.finishAuth(walk.code);
    const t = provider.tokens();
    assert(t?.access_token, 'no access_token');
    assert((t.scope ?? '').split(' ').includes('files:read'), `scope is ${t.scope}`);
    assert(!(t.scope ?? '').includes('mcp:'), `scope is ${t.scope}`);
    return `scope="${t.scope}" expires_in=${t.expires_in}`;
  }, { fatal: true });

  transport = new StreamableHTTPClientTransport(new URL(rsUrl), { authProvider: provider });
  client = new Client(clientInfo);
  await rep.check('the tool call is answered with the token Gatehouse issued', async () => {
    await client.connect(transport);
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    const text = (result.content ?? []).map((c) => c.text ?? '').join('');
    assert(!result.isError, `isError: ${text}`);
    assert(text.includes('files:read') && text.includes(`client=${provider.clientInformation()?.client_id}`), text);
    await client.close();
    return text;
  });

  await rep.check('Gatehouse refuses the resource server\'s token', async () => {
    const status = await initializeWith(s.mcpUrl, provider.tokens().access_token);
    assert(status === 401, `expected 401, got ${status}`);
  });
  await rep.check('the resource server refuses a token issued for Gatehouse', async () => {
    const own = JSON.parse(readFileSync(env('TOKEN_FILE'), 'utf8')).access_token;
    assert(own, 'no Gatehouse token in TOKEN_FILE');
    assert((await initializeWith(s.mcpUrl, own)) !== 401, 'the Gatehouse token no longer works at Gatehouse');
    const status = await initializeWith(rsUrl, own);
    assert(status === 401, `expected 401, got ${status}`);
  });
});
