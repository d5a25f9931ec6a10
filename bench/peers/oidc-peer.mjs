// node-oidc-provider (pinned in package.json) as the peer for token introspection and
// refresh-token rotation: the library's in-memory adapter, an ES256 key generated at start,
// two static clients (a public native client for rotation, a client_secret_basic client for
// introspection), rotateRefreshToken, opaque access tokens bound by resource indicators to
// the MCP URL, access-token TTL 3600 s.
//
//   node oidc-peer.mjs PORT CONTROL_PORT OUT_DIR
//
// Once listening, writes into OUT_DIR introspect.json ({"client_id", "client_secret",
// "tokens": [16 access tokens]}) and then `ready`; fresh refresh chains are handed out on the
// control port (below). Chains are minted directly through the provider's Grant/RefreshToken models (bound to a
// session id, not expiring with it), which skips the browser flow without changing what the
// token endpoint does with them.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import Provider from 'oidc-provider';

const [portArg, controlPortArg, outDir] = process.argv.slice(2);
const port = Number(portArg);
const controlPort = Number(controlPortArg);
const issuer = `http://127.0.0.1:${port}`;
const resource = `http://127.0.0.1:${port}/mcp`;
const SCOPE = 'mcp:tools';
const INTROSPECT_SECRET = randomBytes(24).toString('base64url');

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'bench', alg: 'ES256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'rotate',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      application_type: 'native',
      id_token_signed_response_alg: 'ES256',
      redirect_uris: ['http://127.0.0.1/callback'],
    },
    {
      client_id: 'introspector',
      client_secret: INTROSPECT_SECRET,
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'ES256',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
  ],
  jwks: { keys: [jwk] },
  scopes: ['openid', 'offline_access', SCOPE],
  rotateRefreshToken: true,
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  ttl: { AccessToken: 3600, RefreshToken: 14 * 24 * 3600, Grant: 14 * 24 * 3600 },
  features: {
    devInteractions: { enabled: false },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => resource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async () => ({ scope: SCOPE, accessTokenFormat: 'opaque', accessTokenTTL: 3600 }),
    },
  },
});

async function mintGrant(accountId) {
  const grant = new provider.Grant({ accountId, clientId: 'rotate' });
  grant.addOIDCScope('offline_access');
  grant.addResourceScope(resource, SCOPE);
  return grant.save();
}

async function mintChain(i) {
  const accountId = `bench-${i}`;
  const grantId = await mintGrant(accountId);
  const client = await provider.Client.find('rotate');
  const rt = new provider.RefreshToken({
    accountId,
    client,
    grantId,
    gty: 'authorization_code',
    scope: `offline_access ${SCOPE}`,
    resource,
    sessionUid: randomBytes(16).toString('hex'),
    expiresWithSession: false,
    authTime: Math.floor(Date.now() / 1000),
  });
  return rt.save();
}

/** An access token as a client gets it: a refresh of a fresh chain at the token endpoint. */
async function mintAccessToken(i) {
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', client_id: 'rotate', refresh_token: await mintChain(`at-${i}`) }),
  });
  const body = await res.json();
  if (!body.access_token) throw new Error(`refresh answered ${res.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

await new Promise((resolve) => provider.listen(port, '127.0.0.1', resolve));
const accessTokens = [];
for (let i = 0; i < 16; i++) accessTokens.push(await mintAccessToken(i));
writeFileSync(
  join(outDir, 'introspect.json'),
  JSON.stringify({ client_id: 'introspector', client_secret: INTROSPECT_SECRET, tokens: accessTokens }) + '\n',
);

// Fresh tokens on demand, on a separate control port, outside the measured one:
//   GET /chains?n=16  n refresh tokens, one a line, each the head of a new chain (a wrk run
//                     cannot hand back the token rotated by the request in flight when it
//                     stops, so every rotation run starts on new chains)
//   GET /access?n=16  n access tokens, one a line (the library's MemoryAdapter is an LRU of
//                     1,000 entries: rotation runs evict older tokens, so every introspection
//                     run gets new ones)
let minted = 0;
const control = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  const n = Math.min(Number(url.searchParams.get('n') ?? '16'), 256);
  const out = [];
  try {
    for (let i = 0; i < n; i++) {
      out.push(url.pathname === '/access' ? await mintAccessToken(minted++) : await mintChain(minted++));
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`${out.join('\n')}\n`);
  } catch (e) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(`${e.message}\n`);
  }
});
control.listen(controlPort, '127.0.0.1', () => {
  writeFileSync(join(outDir, 'ready'), 'ready\n');
  console.log(`oidc peer on ${issuer} (token ${issuer}/token, introspection ${issuer}/token/introspection, chains on port ${controlPort})`);
});
