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

  // --- replaying the superseded refresh token must fail --------------------
  await rep.check('replayed (rotated-out) refresh token is rejected with invalid_grant', async () => {
    const nt = refresher.tokens();
    assert(nt.refresh_token && nt.refresh_token !== stored.refresh_token, 'refresh token was not rotated, replay test impossible');
    const r = await rawRefresh(asMeta.token_endpoint, provider.clientInformation().client_id, stored.refresh_token, s.mcpUrl);
    assert(r.status === 400, `expected 400, got ${r.status} ${JSON.stringify(r.body)}`);
    assert(r.body?.error === 'invalid_grant', `error is ${JSON.stringify(r.body?.error)}`);
    // Informational: RFC 9700 §4.14.2 reuse detection revokes the family.
    const again = await rawRefresh(asMeta.token_endpoint, provider.clientInformation().client_id, nt.refresh_token, s.mcpUrl);
    return `after replay the newest refresh token ${again.status === 200 ? 'still works' : `is revoked (${again.status} ${again.body?.error})`}`;
  });
});
