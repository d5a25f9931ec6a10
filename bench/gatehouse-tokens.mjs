// Gets Gatehouse's tokens for the benchmark through the real OAuth flow: discovery, dynamic
// registration of a public client, then for each chain the authorization request (PKCE,
// resource = the MCP URL), sign-in and consent walked headlessly by the interop harness, and the
// code redeemed at the token endpoint. Every chain is its own token family.
//
//   node gatehouse-tokens.mjs ISSUER MCP_URL EMAIL PASSWORD OUT_DIR [CHAINS]
//
// The first call (no OUT_DIR/client.txt yet) registers the client and writes into OUT_DIR:
//   client.txt   the registered client_id
//   access.txt   the access token of a first family (scopes mcp:read mcp:write)
// With CHAINS > 0 it also writes refresh.txt: CHAINS refresh tokens of new families, one a line
// (each rotation run starts on new chains).
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CookieJar, walkAuthorization } from '../tests/interop/lib/harness.mjs';

const [issuer, mcpUrl, email, password, outDir, chainsArg = '0'] = process.argv.slice(2);
const chains = Number(chainsArg);
const REDIRECT = 'http://127.0.0.1:1/callback';

async function json(res) {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${res.url} answered ${res.status}: ${text.slice(0, 300)}`);
  }
}

const meta = await json(await fetch(`${issuer}/.well-known/oauth-authorization-server`));
async function register() {
  const reg = await fetch(meta.registration_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Gatehouse benchmark',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  if (reg.status !== 201) throw new Error(`registration answered ${reg.status}: ${await reg.text()}`);
  return (await json(reg)).client_id;
}

const jar = new CookieJar();
async function family() {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const url = new URL(meta.authorization_endpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: randomBytes(8).toString('hex'),
    scope: 'mcp:read mcp:write',
    resource: mcpUrl,
  })) {
    url.searchParams.set(k, v);
  }
  const walk = await walkAuthorization(url.href, { email, password, jar });
  const res = await fetch(meta.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: walk.code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: REDIRECT,
      resource: mcpUrl,
    }).toString(),
  });
  const body = await json(res);
  if (res.status !== 200 || !body.access_token || !body.refresh_token) {
    throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
  }
  return body;
}

const clientFile = join(outDir, 'client.txt');
let clientId;
if (existsSync(clientFile)) {
  clientId = readFileSync(clientFile, 'utf8').trim();
} else {
  clientId = await register();
  const first = await family();
  writeFileSync(join(outDir, 'access.txt'), `${first.access_token}\n`);
  writeFileSync(clientFile, `${clientId}\n`);
}
if (chains > 0) {
  const refresh = [];
  for (let i = 0; i < chains; i++) refresh.push((await family()).refresh_token);
  writeFileSync(join(outDir, 'refresh.txt'), `${refresh.join('\n')}\n`);
}
