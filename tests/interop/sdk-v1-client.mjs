#!/usr/bin/env node
// Official TypeScript SDK 1.x client against Gatehouse, starting with no token:
// 401 -> protected resource metadata -> AS metadata -> dynamic registration ->
// authorization (sign-in + consent walked headlessly) -> token -> MCP tools ->
// refresh without any form.
//
// Env: MCP_URL (required), ISSUER, PROJECT_ID, GATEHOUSE_EMAIL,
// GATEHOUSE_PASSWORD, REDIRECT_URL, TOKEN_FILE (written for auth-proxy.mjs).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

import {
  HeadlessOAuthProvider,
  Reporter,
  assert,
  badSignin,
  exerciseTools,
  fetchJson,
  probeUnauthenticated,
  runScript,
  settings,
  structured,
  writeTokenFile,
} from './lib/harness.mjs';

const rep = new Reporter('sdk-v1');
const s = settings();
const serverUrl = new URL(s.mcpUrl);
const clientInfo = { name: 'gatehouse-interop-sdk-v1', version: '1.32.2' };

/** The auth proxy in front of the conformance suite reads this file. */
function saveForProxy(tokens, provider) {
  if (!process.env.TOKEN_FILE || !tokens?.access_token) return;
  writeTokenFile(process.env.TOKEN_FILE, {
    access_token: tokens.access_token,
    refresh_token: tokens.refresh_token,
    client_id: provider.clientInformation()?.client_id,
    token_endpoint: asMetaForProxy?.token_endpoint,
    resource: s.mcpUrl,
  });
}
let asMetaForProxy;

function apiFor(client) {
  return {
    listTools: () => client.listTools(),
    callTool: (name, args) => client.callTool({ name, arguments: args }),
  };
}

await runScript(rep, async () => {
  rep.info(`server ${s.mcpUrl}, SDK protocol ${LATEST_PROTOCOL_VERSION}`);

  await rep.check('POST /mcp without token -> 401 + WWW-Authenticate (resource_metadata, scope)', () => probeUnauthenticated(s.mcpUrl, s.issuer).then(() => undefined));

  let asMeta;
  await rep.check('AS metadata issuer matches', async () => {
    asMeta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
    asMetaForProxy = asMeta;
    assert(asMeta.issuer === s.issuer, `issuer is ${asMeta.issuer}, expected ${s.issuer}`);
  });

  // --- 1. full authorization through the SDK ------------------------------
  const provider = new HeadlessOAuthProvider({
    redirectUrl: s.redirectUrl,
    clientName: 'Gatehouse interop (SDK v1)',
    email: s.email,
    password: s.password,
  });

  let transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  let client = new Client(clientInfo);

  await rep.check(
    'connect without token triggers discovery, registration and authorization',
    async () => {
      try {
        await client.connect(transport);
      } catch (err) {
        if (err instanceof UnauthorizedError) {
          assert(provider.lastWalk, `UnauthorizedError but the authorization page was never walked: ${err.message}`);
          return `registered client ${provider.clientInformation()?.client_id}`;
        }
        throw err;
      }
      throw new Error('connect() succeeded without any token');
    },
    { fatal: true },
  );

  const walk = provider.lastWalk;
  await rep.check('authorization request carries PKCE S256, resource and scope', () => {
    const u = new URL(walk.authorizationUrl);
    assert(u.searchParams.get('code_challenge_method') === 'S256', 'code_challenge_method is not S256');
    assert(u.searchParams.get('resource') === s.mcpUrl, `resource is ${u.searchParams.get('resource')}`);
    return `scope="${u.searchParams.get('scope')}"`;
  });
  await rep.check('sign-in and consent walked headlessly', () => {
    assert(walk.signedIn, `never signed in (steps: ${walk.steps.join(', ')})`);
    assert(walk.consentShown, `consent page not shown on first authorization (steps: ${walk.steps.join(', ')})`);
    return walk.steps.join(' | ');
  });
  await rep.check(
    'redirect carries code, matching state and iss == issuer',
    () => {
      const cb = new URL(walk.callbackUrl);
      assert(`${cb.origin}${cb.pathname}` === s.redirectUrl, `redirected to ${cb.origin}${cb.pathname}, expected ${s.redirectUrl}`);
      assert(walk.code, 'no code in redirect');
      assert(walk.state === walk.sentState, `state ${walk.state} != sent ${walk.sentState}`);
      assert(walk.iss === s.issuer, `iss is ${walk.iss}, expected ${s.issuer}`);
    },
    { fatal: true },
  );

  await rep.check(
    'finishAuth exchanges the code for tokens',
    async () => {
      await transport.finishAuth(walk.code);
      const t = provider.tokens();
      assert(t?.access_token, 'no access_token saved');
      assert(/^bearer$/i.test(t.token_type ?? ''), `token_type is ${t.token_type}`);
      assert(t.refresh_token, 'no refresh_token issued');
      return `scope="${t.scope ?? ''}" expires_in=${t.expires_in}`;
    },
    { fatal: true },
  );

  saveForProxy(provider.tokens(), provider);

  transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  client = new Client(clientInfo);
  await rep.check(
    'reconnect with the access token (initialize)',
    async () => {
      await client.connect(transport);
      const v = client.getServerVersion();
      return `server ${v?.name} ${v?.version}, session ${transport.sessionId ?? '(stateless)'}`;
    },
    { fatal: true },
  );

  const { projectId } = await exerciseTools(rep, apiFor(client), s, { tag: 'sdkv1' });

  // --- prompts and completion (the user's ready-made requests) ------------
  await rep.check('prompts/list returns the Gatehouse prompts (with draft_note for a write token)', async () => {
    const caps = client.getServerCapabilities();
    assert(caps?.prompts && caps?.completions, `capabilities lack prompts/completions: ${JSON.stringify(caps)}`);
    const r = await client.listPrompts();
    const names = (r.prompts ?? []).map((p) => p.name);
    const expected = ['summarize_project', 'weekly_review', 'draft_note'];
    assert(JSON.stringify(names) === JSON.stringify(expected), `prompts ${names.join(', ')}, expected ${expected.join(', ')}`);
    const arg = r.prompts[0].arguments?.find((a) => a.name === 'project_id');
    assert(arg?.required === true, `summarize_project's project_id is not required: ${JSON.stringify(r.prompts[0])}`);
    return names.join(', ');
  });
  await rep.check('prompts/get summarize_project names the project and links it', async () => {
    const r = await client.getPrompt({ name: 'summarize_project', arguments: { project_id: String(projectId), focus: 'interop' } });
    const text = r.messages?.[0]?.content?.text ?? '';
    assert(text.includes(`"${s.projectName}"`) && text.includes('search_notes') && text.includes('get_note'), `unexpected text: ${text.slice(0, 200)}`);
    const link = r.messages.find((m) => m.content?.type === 'resource_link');
    assert(link?.content?.uri === `gatehouse://projects/${projectId}`, `no project link in ${JSON.stringify(r.messages).slice(0, 300)}`);
    return `${r.messages.length} messages`;
  });
  await rep.check('prompts/get draft_note stops for approval before create_note', async () => {
    const r = await client.getPrompt({ name: 'draft_note', arguments: { project_id: String(projectId) } });
    const text = r.messages?.[0]?.content?.text ?? '';
    const wait = text.indexOf('wait for my answer');
    const save = text.indexOf('call create_note');
    assert(wait >= 0 && save > wait, `no approval checkpoint before create_note: ${text.slice(0, 300)}`);
  });
  await rep.check('prompts/get with an unknown argument is refused with -32602', async () => {
    try {
      await client.getPrompt({ name: 'weekly_review', arguments: { project_id: String(projectId), colour: 'red' } });
    } catch (e) {
      assert(e?.code === -32602, `error code ${e?.code}: ${e?.message}`);
      return e.message;
    }
    throw new Error('the unknown argument was accepted');
  });
  await rep.check('completion/complete offers the project for project_id', async () => {
    const r = await client.complete({
      ref: { type: 'ref/prompt', name: 'summarize_project' },
      argument: { name: 'project_id', value: s.projectName.slice(0, 3).toLowerCase() },
    });
    const values = r.completion?.values ?? [];
    assert(values.includes(String(projectId)), `values ${JSON.stringify(values)} lack ${projectId}`);
    return `values ${JSON.stringify(values)}`;
  });
  await client.close().catch(() => {});

  // --- 2. a second authorization skips the consent page -------------------
  await rep.check('second authorization for the same client skips consent', async () => {
    const p2 = new HeadlessOAuthProvider({
      redirectUrl: s.redirectUrl,
      clientName: 'unused',
      email: s.email,
      password: s.password,
      clientInformation: provider.clientInformation(),
      jar: provider.jar, // same browser: already signed in
    });
    const t2 = new StreamableHTTPClientTransport(serverUrl, { authProvider: p2 });
    const c2 = new Client(clientInfo);
    try {
      await c2.connect(t2);
      throw new Error('connect() succeeded without any token');
    } catch (err) {
      if (!(err instanceof UnauthorizedError)) throw err;
    }
    assert(p2.registrations === 0, 'client registered again although client information was stored');
    const w = p2.lastWalk;
    assert(w, 'authorization not walked');
    assert(!w.consentShown, `consent page shown again (steps: ${w.steps.join(', ')})`);
    assert(!w.signedIn, `sign-in shown again although the session cookie was sent (steps: ${w.steps.join(', ')})`);
    assert(w.code && w.state === w.sentState && w.iss === s.issuer, `bad redirect ${w.callbackUrl}`);
    await t2.finishAuth(w.code);
    assert(p2.tokens()?.access_token, 'no token from the second code');
    await t2.close().catch(() => {});
    return w.steps.join(' | ');
  });

  // --- 2b. wrong password and a denied consent -----------------------------
  await rep.check('sign-in with a wrong password does not sign in', async () => {
    const r = await badSignin(walk.authorizationUrl, s.email, `${s.password}-wrong`);
    assert(!(r.status >= 300 && r.status < 400 && r.location && !new URL(r.location, s.issuer).pathname.startsWith('/signin')), `wrong password answered ${r.status} to ${r.location}`);
    assert(r.stillAnonymous, 'authorize no longer redirects to /signin after a failed sign-in');
    return `POST /signin -> ${r.status}`;
  });
  await rep.check('denying consent redirects with error=access_denied, state and iss', async () => {
    const pd = new HeadlessOAuthProvider({
      redirectUrl: s.redirectUrl,
      clientName: 'Gatehouse interop (denied)',
      email: s.email,
      password: s.password,
      decision: 'deny',
    });
    const td = new StreamableHTTPClientTransport(serverUrl, { authProvider: pd });
    try {
      await new Client(clientInfo).connect(td);
      throw new Error('connect() succeeded without any token');
    } catch (err) {
      if (!(err instanceof UnauthorizedError)) throw err;
    }
    const w = pd.lastWalk;
    assert(w?.consentShown, 'consent page not shown to a new client');
    const p = new URL(w.callbackUrl).searchParams;
    assert(p.get('error') === 'access_denied', `error is ${p.get('error')} (${w.callbackUrl})`);
    assert(!p.has('code'), 'a code was issued although consent was denied');
    assert(w.state === w.sentState, `state ${w.state} != sent ${w.sentState}`);
    assert(w.iss === s.issuer, `iss is ${w.iss}`);
    await td.close().catch(() => {});
  });

  // --- 3. refresh through the SDK, no form allowed ------------------------
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
  const c3 = new Client(clientInfo);
  await rep.check(
    'rejected access token is refreshed by the SDK without any form',
    async () => {
      await c3.connect(t3);
      assert(refresher.authorizationUrls.length === 0, 'the SDK asked for interactive authorization');
      assert(refresher.savedTokens.length >= 1, 'no refreshed tokens were saved');
      const nt = refresher.tokens();
      assert(nt.access_token && nt.access_token !== stored.access_token, 'refresh returned no new access token');
      return nt.refresh_token !== stored.refresh_token ? 'refresh token rotated' : 'refresh token NOT rotated';
    },
    { fatal: true },
  );
  await rep.check('tool call works with the refreshed token', async () => {
    const sc = structured(await c3.callTool({ name: 'list_projects', arguments: {} }), 'list_projects');
    assert(sc.projects.some((p) => String(p.id) === String(projectId)), 'project missing after refresh');
  });
  await rep.check('public-client refresh token is rotated (OAuth 2.1 §4.3.1)', () => {
    const nt = refresher.tokens();
    assert(nt.refresh_token, 'refresh response carried no refresh_token');
    assert(nt.refresh_token !== stored.refresh_token, 'same refresh token returned');
  });
  await c3.close().catch(() => {});

  // --- 4. hand the live token to the conformance proxy --------------------
  saveForProxy(refresher.tokens(), provider);
  if (process.env.TOKEN_FILE) rep.info('refreshed token written for the auth proxy');
});

