#!/usr/bin/env node
// Identity in a real headless Chromium (issue 36):
//
// 1. Passkeys, with the DevTools protocol's virtual authenticator (WebAuthn domain: CTAP2,
//    resident keys, user verification): a person adds a passkey on the account page, signs
//    out, and signs in with it (no email typed) during an MCP client's authorization (the
//    official TypeScript SDK client gets its token and lists tools) and again afterwards;
//    then removes it after the confirmation page. Gatehouse is named `localhost` here: a
//    WebAuthn relying party id cannot be an IP address.
// 2. node-oidc-provider (oidc-idp.mjs) as the organisation's OpenID Provider: `gatehouse idp
//    add` registers it (an http issuer on loopback), and Chromium signs in to Gatehouse through
//    its login and consent pages during an MCP client's authorization; the client gets its token.
//
// Screenshots at 1280 and 390 px go to ARTIFACTS.
// Env: GATEHOUSE_BIN, CHROMIUM, ARTIFACTS (as browser.mjs).
// Prints one PASS/FAIL line per check and finally "identity: N passed, N failed".

import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { chromium } from 'playwright-core';

import { FatalCheck, HeadlessOAuthProvider, Reporter, assert } from '../interop/lib/harness.mjs';
import { freePort, startGatehouse } from '../interop/lib/server.mjs';
import { startOidcIdp } from './oidc-idp.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const BIN = resolve(process.env.GATEHOUSE_BIN || join(HERE, '../../target/debug/gatehouse'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = resolve(process.env.ARTIFACTS || join(HERE, 'artifacts'));
const STEP_TIMEOUT = 20_000;
const SECRET_KEY = 'MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY';
const clientInfo = { name: 'gatehouse-identity-test', version: '1.32.2' };

const rep = new Reporter('identity');

async function startCallbackServer() {
  const port = await freePort();
  const waiters = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, `http://127.0.0.1:${port}`);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html lang="en"><title>Done</title><p>Authorization finished.</p></html>');
    while (waiters.length) waiters.shift()(url);
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return {
    redirectUrl: `http://127.0.0.1:${port}/callback`,
    next: () => new Promise((r) => waiters.push(r)),
    close: () => new Promise((r) => server.close(r)),
  };
}

/** The SDK's authorization URL is opened in `page`; `signIn(page)` signs in there. */
class BrowserProvider extends HeadlessOAuthProvider {
  async redirectToAuthorization(authorizationUrl) {
    const { page, callbacks, signIn } = this.o;
    const arrived = callbacks.next();
    await page.goto(authorizationUrl.href);
    assert(new URL(page.url()).pathname === '/signin', `the authorization sent the browser to ${page.url()}`);
    await signIn(page);
    const allow = page.getByRole('button', { name: 'Allow', exact: true });
    await allow.waitFor({ timeout: STEP_TIMEOUT });
    await allow.click();
    const cb = await Promise.race([
      arrived,
      new Promise((_, rej) => setTimeout(() => rej(new Error(`no callback (at ${page.url()})`)), STEP_TIMEOUT)),
    ]);
    this.lastCode = cb.searchParams.get('code');
  }
}

/** An MCP client authorizes through `page`, signing in with `signIn`; returns its tool count. */
async function authorizeWithSdk(s, page, signIn) {
  const callbacks = await startCallbackServer();
  try {
    const provider = new BrowserProvider({ redirectUrl: callbacks.redirectUrl, clientName: 'Identity test', email: s.email, password: s.password, page, callbacks, signIn });
    const serverUrl = new URL(s.mcpUrl);
    let transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
    try {
      await new Client(clientInfo).connect(transport);
      throw new Error('connect() succeeded without any token');
    } catch (err) {
      if (!(err instanceof UnauthorizedError)) throw err;
    }
    assert(provider.lastCode, 'no code at the callback');
    await transport.finishAuth(provider.lastCode);
    assert(provider.tokens()?.access_token, 'no access token after finishAuth');
    transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
    const client = new Client(clientInfo);
    await client.connect(transport);
    const tools = (await client.listTools()).tools.length;
    await client.close();
    return tools;
  } finally {
    await callbacks.close();
  }
}

async function signInWithPassword(page, s) {
  await page.goto(`${s.issuer}/signin`);
  await page.getByLabel('Email', { exact: true }).fill(s.email);
  await page.getByLabel('Password', { exact: true }).fill(s.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForLoadState();
}

async function signOut(page, s) {
  await page.goto(`${s.issuer}/account`);
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();
  await page.waitForURL((u) => u.pathname === '/signin');
}

/** Clicks "Sign in with a passkey" (the virtual authenticator answers) and waits to leave /signin. */
async function passkeySignIn(page) {
  const button = page.getByRole('button', { name: 'Sign in with a passkey' });
  await button.waitFor({ state: 'visible' });
  await button.click();
  await page.waitForURL((u) => u.pathname !== '/signin', { timeout: STEP_TIMEOUT }).catch(async () => {
    const error = await page.locator('#passkey-signin .error').textContent();
    throw new Error(`still on the sign-in page: ${error}`);
  });
}

async function passkeys(browser) {
  const s = await rep.check('start gatehouse as http://localhost:PORT', () => startGatehouse({ bin: BIN, projectName: 'Passkeys', host: 'localhost' }), {
    fatal: true,
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });

    await rep.check('account page: add a named passkey (virtual authenticator), listed with its times', async () => {
      await signInWithPassword(page, s);
      await page.goto(`${s.issuer}/account`);
      await page.getByLabel('Name of the new passkey (for example, the device)').fill('Test laptop');
      await page.getByRole('button', { name: 'Add a passkey' }).click();
      await page.getByText('Passkey \u201cTest laptop\u201d added.').waitFor();
      const row = page.locator('#passkeys tbody tr');
      assert((await row.count()) === 1, `${await row.count()} passkeys listed`);
      const text = await row.first().innerText();
      assert(text.includes('Test laptop') && text.includes('never'), text);
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      assert(credentials.length === 1 && credentials[0].isResidentCredential, JSON.stringify(credentials));
      await page.screenshot({ path: join(ARTIFACTS, 'passkey-account-desktop.png'), fullPage: true });
      await page.setViewportSize({ width: 390, height: 844 });
      await page.screenshot({ path: join(ARTIFACTS, 'passkey-account-phone.png'), fullPage: true });
      const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
      assert(!wide, 'the account page scrolls sideways at 390 px');
      await page.setViewportSize({ width: 1280, height: 800 });
      return 'resident credential in the authenticator';
    }, { fatal: true });

    await rep.check('signed out, an MCP client authorizes: "Sign in with a passkey" (no email typed), Allow, token, tools', async () => {
      await signOut(page, s);
      await page.screenshot({ path: join(ARTIFACTS, 'passkey-signin-desktop.png'), fullPage: true });
      const tools = await authorizeWithSdk(s, page, async (p) => {
        const email = await p.getByLabel('Email', { exact: true }).inputValue();
        assert(email === '', 'an email was filled in');
        await passkeySignIn(p);
      });
      return `${tools} tools listed`;
    });

    await rep.check('afterwards: signed out again, the passkey signs in from the sign-in page at phone width', async () => {
      await signOut(page, s);
      await page.setViewportSize({ width: 390, height: 844 });
      await page.goto(`${s.issuer}/signin`);
      await page.screenshot({ path: join(ARTIFACTS, 'passkey-signin-phone.png'), fullPage: true });
      await passkeySignIn(page);
      assert(new URL(page.url()).pathname === '/', `at ${page.url()}`);
      await page.goto(`${s.issuer}/account`);
      const used = await page.locator('#passkeys tbody tr').first().innerText();
      assert(!used.includes('never'), `last used not recorded: ${used}`);
      await page.setViewportSize({ width: 1280, height: 800 });
    });

    await rep.check('remove the passkey after the confirmation page; it no longer signs in', async () => {
      await page.goto(`${s.issuer}/account`);
      await page.getByRole('button', { name: 'Remove passkey Test laptop' }).click();
      await page.getByRole('heading', { name: 'Remove the passkey \u201cTest laptop\u201d?' }).waitFor();
      await page.screenshot({ path: join(ARTIFACTS, 'passkey-remove-confirm-desktop.png'), fullPage: true });
      await page.getByRole('button', { name: 'Remove passkey', exact: true }).click();
      await page.getByText('Passkey \u201cTest laptop\u201d removed.').waitFor();
      assert((await page.locator('#passkeys-none').count()) === 1, 'still listed');
      await signOut(page, s);
      await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
      const error = page.locator('#passkey-signin .error');
      await error.waitFor({ state: 'visible' });
      const text = await error.textContent();
      assert(/not registered/.test(text), text);
      await page.screenshot({ path: join(ARTIFACTS, 'passkey-removed-refused-desktop.png'), fullPage: true });
      return text;
    });
  } finally {
    await context.close();
    if (rep.failed > 0) console.log(s.log().split('\n').slice(-30).join('\n'));
    await s.stop({ keep: rep.failed > 0 });
  }
}

function cli(s, args, stdin) {
  return new Promise((resolve, reject) => {
    const child = execFile(BIN, args, { env: s.env }, (err, stdout, stderr) => (err ? reject(new Error(`${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout)));
    child.stdin.end(stdin);
  });
}

async function provider(browser) {
  const port = await freePort();
  const gatehouse = `http://127.0.0.1:${port}`;
  const idp = await rep.check('start node-oidc-provider (a client for Gatehouse, an account with a verified email)', () =>
    startOidcIdp({ redirectUri: `${gatehouse}/signin/idp/corp/callback`, email: 'alice@example.com' }), { fatal: true });
  const s = await rep.check('start gatehouse and `gatehouse idp add corp --issuer http://127.0.0.1:…`', async () => {
    const started = await startGatehouse({ bin: BIN, projectName: 'Provider', port, env: { GATEHOUSE_SECRET_KEY: SECRET_KEY } });
    await cli(started, ['idp', 'add', 'corp', '--issuer', idp.issuer, '--client-id', idp.clientId, '--client-secret-stdin', '--display-name', 'Corp SSO', '--domains', 'example.com'], `${idp.clientSecret}\n`);
    return started;
  }, { fatal: true });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);
    await rep.check('an MCP client authorizes: "Sign in with Corp SSO", the provider\'s login and consent, Allow, token, tools', async () => {
      const tools = await authorizeWithSdk(s, page, async (p) => {
        await p.screenshot({ path: join(ARTIFACTS, 'provider-signin-desktop.png'), fullPage: true });
        await p.getByRole('link', { name: 'Sign in with Corp SSO' }).click();
        await p.waitForURL((u) => u.href.startsWith(idp.issuer));
        await p.locator('input[name="login"]').fill(idp.login);
        await p.locator('input[name="password"]').fill('any');
        await p.screenshot({ path: join(ARTIFACTS, 'provider-login-desktop.png'), fullPage: true });
        await p.locator('button[type="submit"]').click();
        // The provider's consent page, then back to Gatehouse.
        await p.waitForURL((u) => u.href.startsWith(idp.issuer) && u.pathname.includes('/interaction/'));
        await p.locator('button[type="submit"]').last().click();
        await p.waitForURL((u) => u.href.startsWith(s.issuer), { timeout: STEP_TIMEOUT });
      });
      return `${tools} tools listed`;
    });
    await rep.check('the sign-in page at phone width shows the provider button without sideways scrolling', async () => {
      const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
      const p = await phone.newPage();
      await p.goto(`${s.issuer}/signin`);
      await p.getByRole('link', { name: 'Sign in with Corp SSO' }).waitFor();
      await p.screenshot({ path: join(ARTIFACTS, 'provider-signin-phone.png'), fullPage: true });
      const wide = await p.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
      await phone.close();
      assert(!wide, 'scrolls sideways');
    });
  } finally {
    await context.close();
    if (rep.failed > 0) console.log(s.log().split('\n').slice(-30).join('\n'));
    await s.stop({ keep: rep.failed > 0 });
    await idp.close();
  }
}

async function main() {
  mkdirSync(ARTIFACTS, { recursive: true });
  let browser;
  try {
    browser = await rep.check('launch headless Chromium', () => chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] }), { fatal: true });
    try {
      await passkeys(browser);
    } catch (err) {
      if (err instanceof FatalCheck) console.log(`  ${err.message}`);
      else rep.fail('passkeys: unexpected error', err);
    }
    await provider(browser);
  } catch (err) {
    if (err instanceof FatalCheck) console.log(`  ${err.message}`);
    else rep.fail('unexpected error', err);
  } finally {
    await browser?.close().catch(() => {});
  }
  console.log(`identity: ${rep.passed} passed, ${rep.failed} failed`);
  process.exitCode = rep.failed === 0 ? 0 : 1;
  setTimeout(() => process.exit(process.exitCode), 200).unref();
}

await main();
