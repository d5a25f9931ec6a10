#!/usr/bin/env node
// DPoP (RFC 9449) by a command-line client whose proofs the npm package `jose` signs: a public
// client registered for the device grant, the person's side over plain HTTP (sign-in, /device,
// the consent page), a poll with a DPoP proof (token_type DPoP), tools/list with
// `Authorization: DPoP` and a proof carrying `ath`, the same token refused as Bearer and with a
// replayed proof, and a refresh bound to the key (refused without a proof, accepted with one).
//
// Env: MCP_URL, ISSUER, GATEHOUSE_EMAIL, GATEHOUSE_PASSWORD.

import { createHash, randomBytes } from 'node:crypto';

import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair } from 'jose';

import { CookieJar, Reporter, assert, fetchJson, findForm, runScript, settings, short } from './lib/harness.mjs';

const rep = new Reporter('dpop+jose');
const s = settings();
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

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

async function postForm(url, fields, dpop) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (dpop) headers.dpop = dpop;
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(fields).toString() });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { raw: text }; }
  return { status: res.status, body };
}

await runScript(rep, async () => {
  const meta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
  await rep.check('metadata advertises dpop_signing_alg_values_supported (RFC 9449 §5.1)', () => {
    assert(Array.isArray(meta.dpop_signing_alg_values_supported) && meta.dpop_signing_alg_values_supported.includes('ES256'),
      `dpop_signing_alg_values_supported ${JSON.stringify(meta.dpop_signing_alg_values_supported)}`);
  }, { fatal: true });

  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = await exportJWK(publicKey);
  const jkt = await calculateJwkThumbprint(jwk, 'sha256');
  const proof = (htm, htu, accessToken) => {
    const claims = { htm, htu, jti: randomBytes(16).toString('base64url') };
    if (accessToken) claims.ath = createHash('sha256').update(accessToken).digest('base64url');
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
      .setIssuedAt()
      .sign(privateKey);
  };

  let clientId;
  await rep.check('registration: a public client for the device grant', async () => {
    const res = await fetch(meta.registration_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Gatehouse interop (DPoP, jose)',
        grant_types: [DEVICE_GRANT],
        token_endpoint_auth_method: 'none',
      }),
    });
    const body = await res.json();
    assert(res.status === 201, `registration answered ${res.status}: ${JSON.stringify(body)}`);
    clientId = body.client_id;
  }, { fatal: true });

  let started;
  await rep.check('device authorization request', async () => {
    const { status, body } = await postForm(meta.device_authorization_endpoint, { client_id: clientId, scope: 'mcp:read' });
    assert(status === 200 && body.device_code, `answered ${status}: ${JSON.stringify(body)}`);
    started = body;
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
    r = await page('POST', `${s.issuer}/device`, jar, codeForm.fields);
    const consent = findForm(r.body, '/oauth/authorize/decision');
    assert(!consent.missing, `no consent form: ${r.status} ${short(r.body)}`);
    r = await page('POST', `${s.issuer}/oauth/authorize/decision`, jar, { ...consent.fields, decision: 'approve' });
    assert(r.status === 200 && r.body.includes('Device connected'), `the decision answered ${r.status}: ${short(r.body)}`);
  }, { fatal: true });

  let tokens;
  await rep.check('the poll with a DPoP proof gets token_type DPoP', async () => {
    const { status, body } = await postForm(meta.token_endpoint,
      { grant_type: DEVICE_GRANT, device_code: started.device_code, client_id: clientId },
      await proof('POST', meta.token_endpoint));
    assert(status === 200, `answered ${status}: ${JSON.stringify(body)}`);
    assert(body.token_type === 'DPoP' && body.refresh_token, `token_type ${body.token_type}`);
    tokens = body;
  }, { fatal: true });

  const toolsList = async (scheme, dpop) => {
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      authorization: `${scheme} ${tokens.access_token}`,
    };
    if (dpop) headers.dpop = dpop;
    const res = await fetch(s.mcpUrl, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    return { status: res.status, challenge: res.headers.get('www-authenticate') || '', text: await res.text() };
  };

  let used;
  await rep.check('tools/list with Authorization: DPoP and a proof with ath', async () => {
    used = await proof('POST', s.mcpUrl, tokens.access_token);
    const r = await toolsList('DPoP', used);
    assert(r.status === 200 && r.text.includes('list_projects'), `answered ${r.status}: ${short(r.text)}`);
  });

  await rep.check('the same proof again: 401 invalid_dpop_proof', async () => {
    const r = await toolsList('DPoP', used);
    assert(r.status === 401 && r.challenge.includes('DPoP error="invalid_dpop_proof"'), `answered ${r.status}: ${r.challenge}`);
  });

  await rep.check('the bound token as Bearer: 401 with a DPoP challenge', async () => {
    const r = await toolsList('Bearer');
    assert(r.status === 401 && r.challenge.includes('DPoP error="invalid_token"') && r.challenge.includes('algs="'),
      `answered ${r.status}: ${r.challenge}`);
  });

  await rep.check('refresh: refused without a proof, accepted with one by the key', async () => {
    const fields = { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId };
    const bare = await postForm(meta.token_endpoint, fields);
    assert(bare.status === 400 && bare.body.error === 'invalid_grant', `without a proof: ${bare.status} ${JSON.stringify(bare.body)}`);
    const bound = await postForm(meta.token_endpoint, fields, await proof('POST', meta.token_endpoint));
    assert(bound.status === 200 && bound.body.token_type === 'DPoP', `with a proof: ${bound.status} ${JSON.stringify(bound.body)}`);
    return `key thumbprint ${jkt.slice(0, 8)}…`;
  });
});
