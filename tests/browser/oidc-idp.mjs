// node-oidc-provider (the version bench/peers pins) as a real upstream OpenID Provider for
// Gatehouse's "Sign in with …" (issue 36): one confidential client for Gatehouse
// (client_secret_basic, authorization code with PKCE), one account whose email is verified,
// the library's own development login and consent pages (any password; the login name must be
// the account's), an ES256 key made at start. ID tokens carry email and email_verified
// (conformIdTokenClaims off), as hosted providers send them.
//
// Imported: startOidcIdp({ redirectUri, email }) -> { issuer, clientId, clientSecret, login,
// close() }. Run: `node oidc-idp.mjs PORT REDIRECT_URI EMAIL` prints that (less close) as one
// JSON line once listening, and serves until killed.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

import Provider from 'oidc-provider';

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export async function startOidcIdp({ redirectUri, email, port }) {
  port = port || (await freePort());
  const issuer = `http://127.0.0.1:${port}`;
  const clientId = 'gatehouse';
  const clientSecret = randomBytes(24).toString('base64url');
  const login = email.split('@')[0];
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'idp', alg: 'ES256', use: 'sig' };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [redirectUri],
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys: [jwk] },
    scopes: ['openid', 'email'],
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    findAccount: async (_ctx, sub) => ({
      accountId: sub,
      claims: async () => (sub === login ? { sub, email, email_verified: true } : { sub, email_verified: false }),
    }),
    features: { devInteractions: { enabled: true } },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
  });
  // The development pages warn on every start; they are what this test provider is for.
  provider.on('server_error', (_ctx, err) => console.error(`oidc-idp: ${err.message}`));
  const server = await new Promise((resolve) => {
    const s = provider.listen(port, '127.0.0.1', () => resolve(s));
  });
  return {
    issuer,
    clientId,
    clientSecret,
    login,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [portArg, redirectUri, email] = process.argv.slice(2);
  const idp = await startOidcIdp({ port: Number(portArg) || 0, redirectUri, email });
  const { close: _close, ...shown } = idp;
  console.log(JSON.stringify(shown));
}
