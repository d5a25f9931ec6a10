#!/usr/bin/env node
// The device authorization grant (RFC 8628) by a command-line client that authenticates with
// private_key_jwt assertions (RFC 7523 §2.2) made by the npm package `jose`: dynamic
// registration with its public key inline (`jwks`) for the device grant alone, the device
// authorization request, polls (authorization_pending, then the tokens), the person's side over
// plain HTTP (sign-in, /device, the code, the consent page), a tools/list with the access token,
// a refresh, and a replayed assertion refused.
//
// Env: MCP_URL, ISSUER, GATEHOUSE_EMAIL, GATEHOUSE_PASSWORD.

import { randomBytes } from 'node:crypto';

import { SignJWT, exportJWK, generateKeyPair } from 'jose';

import { CookieJar, Reporter, assert, fetchJson, findForm, runScript, settings, short } from './lib/harness.mjs';

const rep = new Reporter('device+jose');
const s = settings();
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

async function page(method, url, jar, fields) {
  const headers = { accept: 'text/html' };
  const cookie = jar.header();
  if (cookie) headers.cookie = cookie;
  const init = { method, headers, redirect: 'manual' };
  if (fields) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    headers.origin = s.issuer;
    headers.referer = `${s.issuer}/`;
    init.body = new URLSearchParams(fields).toString();
  }
  const res = await fetch(url, init);
  jar.store(res);
  return { status: res.status, location: res.headers.get('location'), body: await res.text() };
}

async function postForm(url, fields) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(fields).toString(),
  });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { raw: text }; }
  return { status: res.status, body };
}

await runScript(rep, async () => {
  const meta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
  await rep.check('metadata advertises the device endpoint, the grant and private_key_jwt', () => {
    assert(meta.device_authorization_endpoint === `${s.issuer}/oauth/device_authorization`, `device_authorization_endpoint ${meta.device_authorization_endpoint}`);
    assert(meta.grant_types_supported.includes(DEVICE_GRANT), `grant_types_supported ${meta.grant_types_supported}`);
    assert(meta.token_endpoint_auth_methods_supported.includes('private_key_jwt'), 'private_key_jwt not advertised');
    assert(meta.token_endpoint_auth_signing_alg_values_supported.includes('ES256'), 'ES256 not advertised');
  }, { fatal: true });

  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'cli-1', alg: 'ES256', use: 'sig' };
  let clientId;
  await rep.check('registration: private_key_jwt with jwks inline, device grant alone, no redirect URI', async () => {
    const res = await fetch(meta.registration_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Gatehouse interop (device, jose)',
        grant_types: [DEVICE_GRANT],
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: { keys: [jwk] },
      }),
    });
    const body = await res.json();
    assert(res.status === 201, `registration answered ${res.status}: ${JSON.stringify(body)}`);
    assert(!body.client_secret, 'a private_key_jwt client got a secret');
    assert(JSON.stringify(body.grant_types) === JSON.stringify([DEVICE_GRANT, 'refresh_token']), `grant_types ${JSON.stringify(body.grant_types)}`);
    clientId = body.client_id;
    return clientId;
  }, { fatal: true });

  const assertion = () => new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: jwk.kid, typ: 'JWT' })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(meta.token_endpoint)
    .setIssuedAt()
    .setExpirationTime('2m')
    .setJti(randomBytes(16).toString('base64url'))
    .sign(privateKey);
  const authenticated = async (fields) => ({
    ...fields,
    client_assertion_type: ASSERTION_TYPE,
    client_assertion: await assertion(),
  });

  let started;
  await rep.check('device authorization request (RFC 8628 §3.1–3.2)', async () => {
    const { status, body } = await postForm(meta.device_authorization_endpoint, await authenticated({ scope: 'mcp:read' }));
    assert(status === 200, `answered ${status}: ${JSON.stringify(body)}`);
    assert(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/.test(body.user_code), `user_code ${body.user_code}`);
    assert(body.verification_uri === `${s.issuer}/device`, `verification_uri ${body.verification_uri}`);
    assert(body.expires_in > 0 && body.interval >= 5, `expires_in ${body.expires_in}, interval ${body.interval}`);
    started = body;
    return `user_code ${body.user_code}`;
  }, { fatal: true });

  const poll = async () => postForm(meta.token_endpoint, await authenticated({ grant_type: DEVICE_GRANT, device_code: started.device_code }));

  await rep.check('a poll before the person answers: authorization_pending', async () => {
    const { status, body } = await poll();
    assert(status === 400 && body.error === 'authorization_pending', `answered ${status}: ${JSON.stringify(body)}`);
  }, { fatal: true });

  await rep.check('the person signs in, types the code at /device and allows on the consent page', async () => {
    const jar = new CookieJar();
    let r = await page('GET', started.verification_uri_complete, jar);
    assert(r.status === 303 && r.location.startsWith('/signin'), `GET /device answered ${r.status} ${r.location}`);
    r = await page('GET', new URL(r.location, s.issuer).href, jar);
    const signin = findForm(r.body, '/signin');
    assert(!signin.missing, 'no sign-in form');
    r = await page('POST', `${s.issuer}/signin`, jar, { ...signin.fields, email: s.email, password: s.password });
    assert(r.status === 303, `sign-in answered ${r.status}`);
    r = await page('GET', new URL(r.location, s.issuer).href, jar);
    const codeForm = findForm(r.body, '/device');
    assert(!codeForm.missing, `no code form: ${short(r.body)}`);
    assert(codeForm.fields.user_code === started.user_code, `the code is not filled in: ${codeForm.fields.user_code}`);
    r = await page('POST', `${s.issuer}/device`, jar, codeForm.fields);
    assert(r.status === 200 && r.body.includes(started.user_code), `the consent page was not shown: ${r.status} ${short(r.body)}`);
    const consent = findForm(r.body, '/oauth/authorize/decision');
    assert(!consent.missing, 'no consent form');
    r = await page('POST', `${s.issuer}/oauth/authorize/decision`, jar, { ...consent.fields, decision: 'approve' });
    assert(r.status === 200 && r.body.includes('Device connected'), `the decision answered ${r.status}: ${short(r.body)}`);
  }, { fatal: true });

  let tokens;
  await rep.check('the next poll gets a token pair bound to the MCP resource', async () => {
    const { status, body } = await poll();
    assert(status === 200, `answered ${status}: ${JSON.stringify(body)}`);
    assert(body.token_type === 'Bearer' && body.scope === 'mcp:read' && body.refresh_token, JSON.stringify({ ...body, access_token: '…', refresh_token: '…' }));
    tokens = body;
  }, { fatal: true });

  await rep.check('tools/list with the access token', async () => {
    const res = await fetch(s.mcpUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
        authorization: `Bearer ${tokens.access_token}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    const text = await res.text();
    assert(res.status === 200 && text.includes('list_projects'), `answered ${res.status}: ${short(text)}`);
  });

  await rep.check('refresh with a new assertion; a replayed assertion is refused', async () => {
    const signed = await assertion();
    const fields = { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_assertion_type: ASSERTION_TYPE, client_assertion: signed };
    const first = await postForm(meta.token_endpoint, fields);
    assert(first.status === 200 && first.body.refresh_token, `refresh answered ${first.status}: ${JSON.stringify(first.body)}`);
    const again = await postForm(meta.token_endpoint, { ...fields, refresh_token: first.body.refresh_token });
    assert(again.status === 401 && again.body.error === 'invalid_client', `replay answered ${again.status}: ${JSON.stringify(again.body)}`);
  });
});
