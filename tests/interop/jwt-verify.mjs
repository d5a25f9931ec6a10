#!/usr/bin/env node
// JWT access tokens (RFC 9068) of a resource registered with `--token-format jwt`, verified
// by the `jose` npm package against the JWKS Gatehouse publishes at its metadata's jwks_uri,
// before and after `gatehouse signing-key rotate`: typ at+jwt, ES256, iss, aud (the resource),
// sub, client_id, scope, exp, iat, jti. The authorization (registration, sign-in, consent,
// code, token) is walked over plain HTTP like the SDK clients' (lib/harness.mjs).
//
// Env: JWT_RS_URL (the registered resource), ISSUER, GATEHOUSE_EMAIL, GATEHOUSE_PASSWORD,
// GATEHOUSE_BIN and DATABASE_URL (for `gatehouse signing-key rotate`).

import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';

import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';

import { Reporter, assert, env, fetchJson, rawRefresh, runScript, settings, walkAuthorization } from './lib/harness.mjs';

const rep = new Reporter('jwt');
const s = settings();
const resource = env('JWT_RS_URL');

async function verify(token, jwksUri) {
  // A fresh key set each time: what a verifier holds after fetching the JWKS again.
  const keys = createRemoteJWKSet(new URL(jwksUri));
  const { payload, protectedHeader } = await jwtVerify(token, keys, {
    issuer: s.issuer,
    audience: resource,
    typ: 'at+jwt',
    algorithms: ['ES256'],
  });
  return { payload, protectedHeader };
}

await runScript(rep, async () => {
  const meta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
  await rep.check('metadata names jwks_uri and the resource', () => {
    assert(meta.jwks_uri === `${s.issuer}/oauth/jwks`, `jwks_uri is ${meta.jwks_uri}`);
    assert((meta.protected_resources ?? []).includes(resource), `protected_resources ${JSON.stringify(meta.protected_resources)}`);
  }, { fatal: true });

  let clientId;
  let tokens;
  await rep.check('registration, sign-in, consent and code exchange for the JWT resource', async () => {
    const reg = await fetch(meta.registration_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [s.redirectUrl], token_endpoint_auth_method: 'none', client_name: 'Gatehouse interop (JWT)' }),
    });
    assert(reg.status === 201, `registration answered ${reg.status}`);
    clientId = (await reg.json()).client_id;
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const url = new URL(meta.authorization_endpoint);
    for (const [k, v] of Object.entries({
      response_type: 'code', client_id: clientId, redirect_uri: s.redirectUrl, code_challenge: challenge,
      code_challenge_method: 'S256', state: 'jwt-state', scope: 'files:read', resource,
    })) url.searchParams.set(k, v);
    const walk = await walkAuthorization(url.href, { email: s.email, password: s.password });
    assert(walk.code, `no code (steps: ${walk.steps.join(', ')})`);
    const res = await fetch(meta.token_endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: walk.code, code_verifier: verifier, client_id: clientId, redirect_uri: s.redirectUrl, resource }).toString(),
    });
    tokens = await res.json();
    assert(res.status === 200, `token endpoint answered ${res.status}: ${JSON.stringify(tokens)}`);
    return `expires_in=${tokens.expires_in}`;
  }, { fatal: true });

  let first;
  await rep.check('jose verifies the access token against the JWKS', async () => {
    first = await verify(tokens.access_token, meta.jwks_uri);
    const p = first.payload;
    assert(p.client_id === clientId, `client_id ${p.client_id}`);
    assert(p.scope === 'files:read', `scope ${p.scope}`);
    assert(typeof p.sub === 'string' && p.sub.length > 0, 'no sub');
    assert(typeof p.jti === 'string' && p.jti.length >= 16, 'no jti');
    assert(p.exp - p.iat === tokens.expires_in, `exp - iat = ${p.exp - p.iat}, expires_in ${tokens.expires_in}`);
    return `kid=${first.protectedHeader.kid}`;
  }, { fatal: true });

  await rep.check('the refresh token stays opaque', () => {
    assert(tokens.refresh_token && tokens.refresh_token.split('.').length === 1, 'the refresh token looks like a JWT');
  });

  await rep.check('after gatehouse signing-key rotate, the new token and the old one both verify', async () => {
    const out = execFileSync(env('GATEHOUSE_BIN'), ['signing-key', 'rotate'], { encoding: 'utf8', env: process.env });
    assert(out.includes(first.protectedHeader.kid), `rotate output: ${out}`);
    const refreshed = await rawRefresh(meta.token_endpoint, clientId, tokens.refresh_token, resource);
    assert(refreshed.status === 200, `refresh answered ${refreshed.status}: ${JSON.stringify(refreshed.body)}`);
    const second = await verify(refreshed.body.access_token, meta.jwks_uri);
    assert(second.protectedHeader.kid !== first.protectedHeader.kid, 'the same kid after rotation');
    assert(decodeProtectedHeader(tokens.access_token).kid === first.protectedHeader.kid, 'kid changed');
    await verify(tokens.access_token, meta.jwks_uri);
    return `old kid ${first.protectedHeader.kid} still published, new kid ${second.protectedHeader.kid}`;
  });
});
