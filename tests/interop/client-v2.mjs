#!/usr/bin/env node
// @modelcontextprotocol/client 2.x against Gatehouse, starting with no token.
// Same OAuth flow as sdk-v1-client.mjs, but through the v2 package: the
// callback's code *and* iss go to finishAuth(URLSearchParams) (RFC 9207 check
// inside the SDK), the connection negotiates the protocol era
// (server/discover, 2026-07-28 stateless) and is then repeated in the legacy
// (initialize) era with the same token.
//
// Env: MCP_URL (required), ISSUER, PROJECT_ID, GATEHOUSE_EMAIL,
// GATEHOUSE_PASSWORD, REDIRECT_URL, V2_MODE (auto|legacy|<version to pin>,
// default auto).

import {
  Client,
  LATEST_PROTOCOL_VERSION,
  StreamableHTTPClientTransport,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnauthorizedError,
} from '@modelcontextprotocol/client';

import {
  HeadlessOAuthProvider,
  Reporter,
  assert,
  exerciseTools,
  fetchJson,
  probeUnauthenticated,
  rawRefresh,
  runScript,
  settings,
  structured,
} from './lib/harness.mjs';

const rep = new Reporter('client-v2');
const s = settings();
const serverUrl = new URL(s.mcpUrl);
const clientInfo = { name: 'gatehouse-interop-client-v2', version: '2.4.0' };
const modeEnv = process.env.V2_MODE || 'auto';
const mode = modeEnv === 'auto' || modeEnv === 'legacy' ? modeEnv : { pin: modeEnv };

function newClient(m = mode) {
  return new Client(clientInfo, m === 'legacy' ? {} : { versionNegotiation: { mode: m } });
}

function apiFor(client) {
  return {
    listTools: () => client.listTools(),
    callTool: (name, args) => client.callTool({ name, arguments: args }),
  };
}

function isUnauthorized(err) {
  for (let e = err; e; e = e.cause) if (e instanceof UnauthorizedError || e?.name === 'UnauthorizedError') return true;
  return false;
}

await runScript(rep, async () => {
  rep.info(`server ${s.mcpUrl}, negotiation ${JSON.stringify(mode)}, SDK latest ${LATEST_PROTOCOL_VERSION}, supports ${SUPPORTED_PROTOCOL_VERSIONS.join(',')}`);

  await rep.check('POST /mcp without token -> 401 + WWW-Authenticate (resource_metadata, scope)', () => probeUnauthenticated(s.mcpUrl, s.issuer).then(() => undefined));

  let asMeta;
  await rep.check('AS metadata advertises RFC 9207 iss and S256', async () => {
    asMeta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
    assert(asMeta.issuer === s.issuer, `issuer is ${asMeta.issuer}`);
    assert((asMeta.code_challenge_methods_supported ?? []).includes('S256'), 'S256 not advertised');
    assert(asMeta.authorization_response_iss_parameter_supported === true, 'authorization_response_iss_parameter_supported is not true');
  });

  const provider = new HeadlessOAuthProvider({
    redirectUrl: s.redirectUrl,
    clientName: 'Gatehouse interop (client v2)',
    email: s.email,
    password: s.password,
  });

  let transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  let client = newClient();
  await rep.check(
    'connect without token triggers discovery, registration and authorization',
    async () => {
      try {
        await client.connect(transport);
      } catch (err) {
        if (provider.lastWalk && isUnauthorized(err)) return `registered client ${provider.clientInformation()?.client_id}`;
        if (provider.lastWalk) return `authorization walked; connect ended with ${err?.name}: ${err?.message}`;
        throw err;
      }
      throw new Error('connect() succeeded without any token');
    },
    { fatal: true },
  );
  await client.close().catch(() => {});

  const walk = provider.lastWalk;
  await rep.check('sign-in and consent walked headlessly', () => {
    assert(walk.signedIn && walk.consentShown, `steps: ${walk.steps.join(', ')}`);
    const u = new URL(walk.authorizationUrl);
    assert(u.searchParams.get('resource') === s.mcpUrl, `resource is ${u.searchParams.get('resource')}`);
    return walk.steps.join(' | ');
  });
  await rep.check(
    'redirect carries code, matching state and iss == issuer',
    () => {
      assert(walk.code, 'no code in redirect');
      assert(walk.state === walk.sentState, `state ${walk.state} != sent ${walk.sentState}`);
      assert(walk.iss === s.issuer, `iss is ${walk.iss}, expected ${s.issuer}`);
    },
    { fatal: true },
  );
  await rep.check(
    'finishAuth(callback params) validates iss and exchanges the code',
    async () => {
      await transport.finishAuth(new URL(walk.callbackUrl).searchParams);
      const t = provider.tokens();
      assert(t?.access_token && t.refresh_token, 'access or refresh token missing');
      return `scope="${t.scope ?? ''}"`;
    },
    { fatal: true },
  );

  transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  client = newClient();
  await rep.check(
    `reconnect with the access token (${JSON.stringify(mode)} negotiation)`,
    async () => {
      await client.connect(transport);
      return `era ${client.getProtocolEra?.()} version ${client.getNegotiatedProtocolVersion?.()} server ${client.getServerVersion()?.name}`;
    },
    { fatal: true },
  );
  if (mode === 'auto') {
    await rep.check('auto negotiation selects the 2026-07-28 stateless era', () => {
      assert(client.getProtocolEra() === 'modern', `era is ${client.getProtocolEra()}`);
      assert(client.getNegotiatedProtocolVersion() === '2026-07-28', `version is ${client.getNegotiatedProtocolVersion()}`);
    });
  }

  const { projectId } = await exerciseTools(rep, apiFor(client), s, { tag: 'clientv2' });
  await client.close().catch(() => {});

  // --- legacy era with the same token -------------------------------------
  if (mode !== 'legacy') {
    await rep.check('legacy (initialize) era works with the same token', async () => {
      const t = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
      const c = newClient('legacy');
      await c.connect(t);
      const v = c.getNegotiatedProtocolVersion?.();
      const sc = structured(await c.callTool({ name: 'list_projects', arguments: {} }), 'list_projects');
      assert(sc.projects.some((p) => String(p.id) === String(projectId)), 'project missing');
      await c.close().catch(() => {});
      return `version ${v}`;
    });
  }

  // --- refresh without any form -------------------------------------------
  const stored = provider.tokens();
  const refresher = new HeadlessOAuthProvider({
    redirectUrl: s.redirectUrl,
    clientName: 'unused',
    email: s.email,
    password: s.password,
    interactive: false,
    clientInformation: provider.clientInformation(),
    tokens: { ...stored, access_token: `invalidated-${stored.access_token.slice(0, 8)}` },
  });
  const t3 = new StreamableHTTPClientTransport(serverUrl, { authProvider: refresher });
  const c3 = newClient();
  await rep.check(
    'rejected access token is refreshed by the SDK without any form',
    async () => {
      await c3.connect(t3);
      assert(refresher.authorizationUrls.length === 0, 'the SDK asked for interactive authorization');
      const nt = refresher.tokens();
      assert(nt.access_token && nt.access_token !== stored.access_token, 'no new access token');
      const sc = structured(await c3.callTool({ name: 'list_projects', arguments: {} }), 'list_projects');
      assert(sc.projects.some((p) => String(p.id) === String(projectId)), 'project missing after refresh');
    },
    { fatal: true },
  );
  await c3.close().catch(() => {});

  // --- rotation, grace replay and reuse detection (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2)
  // Gatehouse's documented rule: a rotated-out refresh token presented again
  // within the grace window *while its successor is unused* gets the same
  // successor pair; any other reuse revokes the whole family.
  const tokenEndpoint = asMeta.token_endpoint;
  const clientId = provider.clientInformation().client_id;
  const rt1 = stored.refresh_token; // rotated out by the SDK's refresh above
  const pair2 = refresher.tokens(); // its successor (unused so far)
  let pair3;
  await rep.check('replaying a rotated-out refresh token before its successor is used: invalid_grant or the same successor pair', async () => {
    assert(pair2.refresh_token && pair2.refresh_token !== rt1, 'refresh token was not rotated');
    const r = await rawRefresh(tokenEndpoint, clientId, rt1, s.mcpUrl);
    if (r.status === 400) {
      assert(r.body?.error === 'invalid_grant', `error is ${JSON.stringify(r.body)}`);
      return 'invalid_grant (no grace window)';
    }
    assert(r.status === 200, `expected 400 or 200, got ${r.status} ${JSON.stringify(r.body)}`);
    assert(r.body.refresh_token === pair2.refresh_token, 'grace replay minted a different refresh token (a second live branch of the family)');
    assert(r.body.access_token === pair2.access_token, 'grace replay minted a different access token');
    return 'same successor pair (grace window)';
  });
  await rep.check('the successor refresh token still works', async () => {
    const r = await rawRefresh(tokenEndpoint, clientId, pair2.refresh_token, s.mcpUrl);
    assert(r.status === 200 && r.body.access_token && r.body.refresh_token, `got ${r.status} ${JSON.stringify(r.body)}`);
    pair3 = r.body;
  });
  if (pair3) {
    await rep.check('replaying a refresh token whose successor was used is rejected and revokes the family', async () => {
      const r = await rawRefresh(tokenEndpoint, clientId, rt1, s.mcpUrl);
      assert(r.status === 400 && r.body?.error === 'invalid_grant', `replay answered ${r.status} ${JSON.stringify(r.body)}`);
      const r3 = await rawRefresh(tokenEndpoint, clientId, pair3.refresh_token, s.mcpUrl);
      assert(r3.status === 400 && r3.body?.error === 'invalid_grant', `newest refresh token still usable after reuse: ${r3.status} ${JSON.stringify(r3.body)}`);
      const mcp = await fetch(s.mcpUrl, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${pair3.access_token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'probe', version: '0' } } }),
      });
      await mcp.text();
      assert(mcp.status === 401, `access token of the revoked family still accepted by /mcp (HTTP ${mcp.status})`);
    });
  }
});
