#!/usr/bin/env node
// Enterprise-managed authorization with an identity provider of its own: the npm package
// `jose` makes the provider's key pair and signs an Identity Assertion JWT Authorization Grant
// (ID-JAG, typ oauth-id-jag+jwt); the provider's key set is served from this script over http
// on loopback. The provider is trusted with `gatehouse idp add … --assertions`, a public client
// registers dynamically and redeems the ID-JAG with the JWT-bearer grant (RFC 7523 §2.1), then
// lists the tools with the access token; the same ID-JAG again is refused.
//
// Env: MCP_URL, ISSUER, GATEHOUSE_EMAIL, GATEHOUSE_BIN, DATABASE_URL.

import { randomBytes } from 'node:crypto';

import { SignJWT, exportJWK, generateKeyPair } from 'jose';

import { Reporter, assert, fetchJson, runScript, settings, short } from './lib/harness.mjs';
import { gatehouse, postForm, startKeyServer, toolsList } from './lib/keyserver.mjs';

const rep = new Reporter('id-jag+jose');
const s = settings();
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

await runScript(rep, async () => {
  const meta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
  await rep.check('metadata advertises the JWT-bearer grant', () => {
    assert(meta.grant_types_supported.includes(JWT_BEARER), `grant_types_supported ${meta.grant_types_supported}`);
  }, { fatal: true });

  const keys = await startKeyServer();
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const kid = 'idp-1';
  keys.serve('/jwks', { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] });
  const domain = s.email.split('@')[1];

  await rep.check('cli: gatehouse idp add … --jwks-uri (http on loopback) --assertions', () => {
    const out = gatehouse(['idp', 'add', 'josecorp', '--issuer', keys.origin, '--jwks-uri', `${keys.origin}/jwks`,
      '--assertions', '--domains', domain]);
    return short(out.trim(), 120);
  }, { fatal: true });

  let clientId;
  await rep.check('dynamic registration of a public client', async () => {
    const res = await fetch(meta.registration_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Gatehouse interop (ID-JAG, jose)',
        redirect_uris: ['http://127.0.0.1:1/callback'],
        token_endpoint_auth_method: 'none',
      }),
    });
    const body = await res.json();
    assert(res.status === 201, `registration answered ${res.status}: ${JSON.stringify(body)}`);
    clientId = body.client_id;
    return clientId;
  }, { fatal: true });

  const idJag = () => new SignJWT({
    client_id: clientId,
    resource: s.mcpUrl,
    scope: 'mcp:read mcp:write',
    email: s.email,
  })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'oauth-id-jag+jwt' })
    .setIssuer(keys.origin)
    .setSubject('jose-user-1')
    .setAudience(s.issuer)
    .setJti(randomBytes(16).toString('base64url'))
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(privateKey);

  const assertion = await idJag();
  let tokens;
  await rep.check('the ID-JAG is redeemed for an access token (no refresh token)', async () => {
    const { status, body } = await postForm(meta.token_endpoint, { grant_type: JWT_BEARER, assertion, client_id: clientId });
    assert(status === 200, `token endpoint answered ${status}: ${JSON.stringify(body)}`);
    assert(body.token_type === 'Bearer' && !body.refresh_token, JSON.stringify(body));
    assert(body.scope === 'mcp:read mcp:write', `scope ${body.scope}`);
    tokens = body;
  }, { fatal: true });

  await rep.check('tools/list with the access token', async () => {
    const { status, text } = await toolsList(s.mcpUrl, tokens.access_token);
    assert(status === 200 && text.includes('list_projects'), `answered ${status}: ${short(text)}`);
  });

  await rep.check('the same ID-JAG again is refused (invalid_grant)', async () => {
    const { status, body } = await postForm(meta.token_endpoint, { grant_type: JWT_BEARER, assertion, client_id: clientId });
    assert(status === 400 && body.error === 'invalid_grant', `answered ${status}: ${JSON.stringify(body)}`);
  });
  keys.close();
});
