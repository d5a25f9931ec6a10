#!/usr/bin/env node
// Official TypeScript SDK 1.x machine-to-machine providers (MCP's client credentials
// extension) against Gatehouse's service clients, through the SDK's own discovery and token
// request:
// - `ClientCredentialsProvider`: a service client with a secret (`client_secret_basic`), made
//   with `gatehouse client add … --service`;
// - `PrivateKeyJwtProvider`: a service client whose public key set is kept with it
//   (`gatehouse client add … --service --jwks-file FILE`), the SDK signing RS256 assertions
//   (RFC 7523 §2.2) with the PKCS #8 key the npm package `jose` made.
// Each connects, lists the tools and calls `list_projects`; introspection then names the grant
// (`client_credentials`). A third provider, with a key outside the set, is refused.
//
// Env: MCP_URL, ISSUER, GATEHOUSE_EMAIL, GATEHOUSE_BIN, DATABASE_URL, PROJECT_ID.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { exportJWK, exportPKCS8, generateKeyPair } from 'jose';

import { Reporter, assert, runScript, settings, short, structured } from './lib/harness.mjs';
import { gatehouse, postForm } from './lib/keyserver.mjs';

const rep = new Reporter('sdk-v1-service');
const s = settings();
const clientInfo = { name: 'gatehouse-interop-sdk-v1-service', version: '1.32.2' };

/** `gatehouse client add NAME --service --owner EMAIL ARGS…`: its printed fields. */
function addService(name, args) {
  const out = gatehouse(['client', 'add', name, '--service', '--owner', s.email, ...args]);
  const field = (f) => out.match(new RegExp(`^${f}: (\\S+)$`, 'm'))?.[1];
  assert(field('client_id'), `no client_id in ${short(out)}`);
  return { clientId: field('client_id'), secret: field('client_secret'), out };
}

/** Connects with `provider`, lists the tools and calls list_projects. */
async function exercise(label, provider) {
  const client = new Client(clientInfo);
  const transport = new StreamableHTTPClientTransport(new URL(s.mcpUrl), { authProvider: provider });
  await rep.check(`${label}: connect (the SDK discovers the server and asks for a token itself)`, () => client.connect(transport), { fatal: true });
  await rep.check(`${label}: tools/list`, async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert(names.includes('list_projects'), `list_projects missing: ${names.join(', ')}`);
    return `${names.length} tools`;
  });
  await rep.check(`${label}: tools/call list_projects`, async () => {
    const sc = structured(await client.callTool({ name: 'list_projects', arguments: {} }), 'list_projects');
    assert(
      sc.projects.some((p) => String(p.id) === String(s.projectId)),
      `project ${s.projectId} missing: ${JSON.stringify(sc)}`,
    );
    return `${sc.projects.length} project(s)`;
  });
  await client.close().catch(() => {});
  return provider.tokens();
}

await runScript(rep, async () => {
  // An introspection client, to see what the tokens are.
  const auditor = addIntrospector();

  // A secret: client_secret_basic.
  let secretClient;
  await rep.check('cli: gatehouse client add … --service (a secret)', () => {
    secretClient = addService('interop-sdk-secret', ['--write']);
    assert(secretClient.secret, `no secret printed: ${short(secretClient.out)}`);
    return secretClient.clientId;
  }, { fatal: true });
  const secretTokens = await exercise('ClientCredentialsProvider', new ClientCredentialsProvider({
    clientId: secretClient.clientId,
    clientSecret: secretClient.secret,
    expectedIssuer: s.issuer,
  }));

  // Signed assertions: the key pair made by jose, the public half kept with the client.
  const pair = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'interop-sdk-1', alg: 'RS256', use: 'sig' };
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-sdk-service-'));
  const jwksFile = join(dir, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [jwk] }));
  let keyClient;
  await rep.check('cli: gatehouse client add … --service --jwks-file (no secret)', () => {
    keyClient = addService('interop-sdk-key', ['--write', '--jwks-file', jwksFile]);
    assert(!keyClient.secret, `a signing client got a secret: ${short(keyClient.out)}`);
    assert(keyClient.out.includes('private_key_jwt'), short(keyClient.out));
    return keyClient.clientId;
  }, { fatal: true });
  const keyTokens = await exercise('PrivateKeyJwtProvider (RS256)', new PrivateKeyJwtProvider({
    clientId: keyClient.clientId,
    privateKey: await exportPKCS8(pair.privateKey),
    algorithm: 'RS256',
    expectedIssuer: s.issuer,
  }));

  await rep.check('introspection names both tokens client_credentials, for the owner', async () => {
    for (const tokens of [secretTokens, keyTokens]) {
      const { status, body } = await postForm(`${s.issuer}/oauth/introspect`, { token: tokens.access_token }, auditor);
      assert(status === 200 && body.active === true, `${status}: ${JSON.stringify(body)}`);
      assert(body.grant_type === 'client_credentials', JSON.stringify(body));
    }
  });

  await rep.check('PrivateKeyJwtProvider with a key outside the set is refused (invalid_client)', async () => {
    const stranger = await generateKeyPair('RS256', { extractable: true });
    const provider = new PrivateKeyJwtProvider({
      clientId: keyClient.clientId,
      privateKey: await exportPKCS8(stranger.privateKey),
      algorithm: 'RS256',
      expectedIssuer: s.issuer,
    });
    const client = new Client(clientInfo);
    const transport = new StreamableHTTPClientTransport(new URL(s.mcpUrl), { authProvider: provider });
    let error;
    try {
      await client.connect(transport);
    } catch (e) {
      error = e;
    }
    await client.close().catch(() => {});
    assert(error, 'connected with a key the client does not have');
    // The SDK turns the token endpoint's `invalid_client` into its InvalidClientError.
    assert(error?.constructor?.name === 'InvalidClientError', `another error: ${error}`);
    return short(String(error?.message ?? error));
  });
});

/** `gatehouse client add … --introspect`: Basic credentials for the introspection endpoint. */
function addIntrospector() {
  const out = gatehouse(['client', 'add', 'interop-sdk-auditor', '--introspect']);
  const id = out.match(/^client_id: (\S+)$/m)?.[1];
  const secret = out.match(/^client_secret: (\S+)$/m)?.[1];
  assert(id && secret, `no credentials in ${short(out)}`);
  return { authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` };
}
