#!/usr/bin/env node
// Workload identity with an issuer of its own, shaped like a Kubernetes cluster's: the npm
// package `jose` makes the issuer's RSA key pair and signs a service-account token; the
// issuer's OpenID Connect discovery document and key set are served from this script over
// http on loopback. A service client is mapped to the workload with `gatehouse client add …
// --service --workload-issuer URL --workload-subject SUB`; the workload redeems its token with
// the JWT-bearer grant (RFC 7523 §2.1, aud with a trailing slash as SDKs derive it), lists the
// tools, is refused a replay and a wrong audience, and is accepted again after the issuer
// rotates its key (a new kid fetches the key set again).
//
// Env: MCP_URL, ISSUER, GATEHOUSE_EMAIL, GATEHOUSE_BIN, DATABASE_URL.

import { randomBytes } from 'node:crypto';

import { SignJWT, exportJWK, generateKeyPair } from 'jose';

import { Reporter, assert, fetchJson, runScript, settings, short } from './lib/harness.mjs';
import { gatehouse, postForm, startKeyServer, toolsList } from './lib/keyserver.mjs';

const rep = new Reporter('workload+jose');
const s = settings();
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const SUBJECT = 'system:serviceaccount:interop:runner';

await runScript(rep, async () => {
  const meta = await fetchJson(`${s.issuer}/.well-known/oauth-authorization-server`);
  const keys = await startKeyServer();
  const jwks = [];
  const addKey = async (kid) => {
    const pair = await generateKeyPair('RS256');
    jwks.push({ ...(await exportJWK(pair.publicKey)), kid, alg: 'RS256', use: 'sig' });
    keys.serve('/openid/v1/jwks', { keys: [...jwks] });
    return { kid, privateKey: pair.privateKey };
  };
  keys.serve('/.well-known/openid-configuration', {
    issuer: keys.origin,
    jwks_uri: `${keys.origin}/openid/v1/jwks`,
    response_types_supported: ['id_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
  });
  const first = await addKey('sa-1');

  let clientId;
  await rep.check('cli: gatehouse client add … --service --workload-issuer (http on loopback) --workload-subject', () => {
    const out = gatehouse(['client', 'add', 'interop-workload', '--service', '--owner', s.email,
      '--workload-issuer', keys.origin, '--workload-subject', SUBJECT]);
    assert(!out.includes('client_secret'), 'a workload client got a secret');
    clientId = out.match(/^client_id: (\S+)$/m)?.[1];
    assert(clientId, `no client_id in ${short(out)}`);
    return clientId;
  }, { fatal: true });

  const token = (key, aud = `${s.issuer}/`) => new SignJWT({ 'kubernetes.io': { namespace: 'interop' } })
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
    .setIssuer(keys.origin)
    .setSubject(SUBJECT)
    .setAudience([aud])
    .setJti(randomBytes(16).toString('base64url'))
    .setIssuedAt()
    .setNotBefore('0s')
    .setExpirationTime('10m')
    .sign(key.privateKey);

  const assertion = await token(first);
  let tokens;
  await rep.check('the workload token is redeemed for an access token (no refresh token)', async () => {
    const { status, body } = await postForm(meta.token_endpoint, { grant_type: JWT_BEARER, assertion, client_id: clientId });
    assert(status === 200, `token endpoint answered ${status}: ${JSON.stringify(body)}`);
    assert(body.token_type === 'Bearer' && !body.refresh_token, JSON.stringify(body));
    assert(body.scope === 'mcp:read', `scope ${body.scope}`);
    tokens = body;
  }, { fatal: true });

  await rep.check('tools/list with the access token', async () => {
    const { status, text } = await toolsList(s.mcpUrl, tokens.access_token);
    assert(status === 200 && text.includes('list_projects'), `answered ${status}: ${short(text)}`);
  });

  await rep.check('a replay and a wrong audience are refused (invalid_grant)', async () => {
    const replay = await postForm(meta.token_endpoint, { grant_type: JWT_BEARER, assertion });
    assert(replay.status === 400 && replay.body.error === 'invalid_grant', `replay answered ${replay.status}: ${JSON.stringify(replay.body)}`);
    const wrong = await postForm(meta.token_endpoint, { grant_type: JWT_BEARER, assertion: await token(first, 'https://elsewhere.example') });
    assert(wrong.status === 400 && wrong.body.error === 'invalid_grant', `wrong aud answered ${wrong.status}: ${JSON.stringify(wrong.body)}`);
  });

  await rep.check('after the issuer rotates its key, a token with the new kid is accepted', async () => {
    const second = await addKey('sa-2');
    const { status, body } = await postForm(meta.token_endpoint, { grant_type: JWT_BEARER, assertion: await token(second, s.issuer) });
    assert(status === 200 && body.access_token, `answered ${status}: ${JSON.stringify(body)}`);
  });
  keys.close();
});
