#!/usr/bin/env node
// Connections in a real headless Chromium (issue 35, "Real components"): the upstream is a
// second Gatehouse (its own authorization server and MCP endpoint) named `localhost`, the
// front one `127.0.0.1`, so that their session cookies stay apart. The front registers the
// upstream per person (`gatehouse upstream add up --per-person-oauth`: discovery and dynamic
// registration at the upstream). The official TypeScript SDK client, authorized at the
// front, calls `up__list_projects` declaring URL elicitation and gets the URL-mode
// elicitation (-32042) pointing at the front's own page; Chromium opens it, signs in at the
// front, continues to the upstream, signs in there and clicks Allow, and lands on "up is
// connected". The SDK client's retried call succeeds with the upstream's own data. Then the
// person disconnects on the Connections page and the next call asks to connect again.
// Screenshots of each page go to ARTIFACTS (connect-*.png).
//
// Env: GATEHOUSE_BIN, CHROMIUM, ARTIFACTS (as browser.mjs).
// Prints one PASS/FAIL line per check and finally "connections: N passed, N failed".

import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { chromium } from 'playwright-core';

import { FatalCheck, HeadlessOAuthProvider, Reporter, assert } from '../interop/lib/harness.mjs';
import { startGatehouse } from '../interop/lib/server.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const BIN = resolve(process.env.GATEHOUSE_BIN || join(HERE, '../../target/debug/gatehouse'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = resolve(process.env.ARTIFACTS || join(HERE, 'artifacts'));
const STEP_TIMEOUT = 20_000;
const SERVER_KEY = '0303030303030303030303030303030303030303030303030303030303030303';
const TOOL = 'up__list_projects';

const rep = new Reporter('connections');
const clientInfo = { name: 'gatehouse-connections-test', version: '1.32.2' };

/** The front's SDK client, authorized through the front's own pages (no browser needed), and
 * its OAuth provider (which holds its tokens). */
async function sdkClient(front) {
  const provider = new HeadlessOAuthProvider({
    redirectUrl: 'http://127.0.0.1:9/callback',
    clientName: 'Connections browser test',
    email: front.email,
    password: front.password,
  });
  const url = new URL(front.mcpUrl);
  let transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  try {
    await new Client(clientInfo).connect(transport);
    throw new Error('connect() succeeded without any token');
  } catch (err) {
    if (!provider.lastWalk?.code) throw err;
  }
  await transport.finishAuth(provider.lastWalk.code);
  transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  // Declares URL-mode elicitation (MCP 2025-11-25); a form elicitation is declined.
  const client = new Client(clientInfo, { capabilities: { elicitation: { url: {}, form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));
  await client.connect(transport);
  return { client, provider };
}

/** Calls TOOL; returns {result} or {elicitation: {url, ...}} for a -32042 answer. */
async function callTool(client) {
  try {
    return { result: await client.callTool({ name: TOOL, arguments: {} }) };
  } catch (err) {
    const elicitations = err?.elicitations ?? err?.data?.elicitations;
    if (err?.code === -32042 && Array.isArray(elicitations) && elicitations[0]?.url) {
      return { elicitation: elicitations[0], message: err.message };
    }
    throw err;
  }
}

const textOf = (result) => (result?.content ?? []).map((c) => c.text ?? '').join(' ');

async function signIn(page, s) {
  await page.getByLabel('Email', { exact: true }).fill(s.email);
  await page.getByLabel('Password', { exact: true }).fill(s.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForLoadState();
}

async function shot(page, name) {
  await page.screenshot({ path: join(ARTIFACTS, `connect-${name}.png`), fullPage: true });
}

async function main() {
  mkdirSync(ARTIFACTS, { recursive: true });
  let upstream;
  let front;
  let browser;
  try {
    upstream = await rep.check(
      'start the upstream gatehouse as localhost',
      () => startGatehouse({ bin: BIN, projectName: 'Upstream side', host: 'localhost' }),
      { fatal: true },
    );
    front = await rep.check(
      'start the front gatehouse as 127.0.0.1 with a server key',
      () =>
        startGatehouse({
          bin: BIN,
          projectName: 'Front side',
          // The upstream may also be a person's own server, though on loopback over http.
          env: { GATEHOUSE_SECRET_KEY: SERVER_KEY, GATEHOUSE_UPSTREAM_ALLOW_HOSTS: `localhost:${upstream.port}` },
        }),
      { fatal: true },
    );
    rep.info(`upstream ${upstream.issuer}, front ${front.issuer}`);
    await rep.check(
      'gatehouse upstream add up --per-person-oauth: discovery and registration at the upstream',
      async () => {
        const { stdout } = await promisify(execFile)(
          BIN,
          ['upstream', 'add', 'up', '--url', upstream.mcpUrl, '--per-person-oauth', '--trust-definitions'],
          { env: front.env },
        );
        assert(stdout.includes('per person'), stdout);
        return stdout.trim().split('\n')[0];
      },
      { fatal: true },
    );

    const { client, provider } = await rep.check('the SDK client is authorized at the front', () => sdkClient(front), { fatal: true });

    let link;
    await rep.check(
      `${TOOL} before connecting: URL-mode elicitation (-32042) to the front's own page`,
      async () => {
        // The registry reaches the running front within a second of `upstream add`.
        let answer;
        for (let i = 0; i < 40; i++) {
          try {
            answer = await callTool(client);
            break;
          } catch (err) {
            if (!/Unknown tool/i.test(String(err?.message))) throw err;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
        assert(answer?.elicitation, `no elicitation: ${JSON.stringify(answer?.result ?? answer)}`);
        link = answer.elicitation.url;
        assert(link.startsWith(`${front.issuer}/connections/up/start?request=`), `the link is ${link}`);
        assert(answer.elicitation.mode === 'url', `mode ${answer.elicitation.mode}`);
        return link.replace(/request=.*/, 'request=…');
      },
      { fatal: true },
    );

    browser = await rep.check(
      'launch headless Chromium',
      () => chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] }),
      { fatal: true },
    );
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);

    await rep.check(
      'Chromium: the link, sign-in at the front, the confirm page, sign-in and Allow at the upstream, "up is connected"',
      async () => {
        await page.goto(link);
        if (new URL(page.url()).pathname === '/signin') {
          await shot(page, 'front-signin');
          await signIn(page, front);
        }
        await page.getByRole('heading', { name: 'Connect your account at up' }).waitFor();
        await shot(page, 'confirm');
        await page.getByRole('button', { name: /^Continue to / }).click();
        await page.waitForURL((u) => u.origin === upstream.issuer, { timeout: STEP_TIMEOUT });
        if (new URL(page.url()).pathname === '/signin') {
          await shot(page, 'upstream-signin');
          await signIn(page, upstream);
        }
        const allow = page.getByRole('button', { name: 'Allow', exact: true });
        await allow.waitFor();
        await shot(page, 'upstream-consent');
        await allow.click();
        await page.getByRole('heading', { name: 'up is connected' }).waitFor();
        assert(page.url().startsWith(`${front.issuer}/connections/callback`), `landed at ${page.url()}`);
        await shot(page, 'done');
        return 'connected';
      },
      { fatal: true },
    );

    await rep.check(`the SDK client's retried ${TOOL} succeeds with the upstream's own data`, async () => {
      const { result, elicitation } = await callTool(client);
      assert(!elicitation, `asked to connect again: ${elicitation?.url}`);
      assert(result && !result.isError, `isError: ${textOf(result)}`);
      const text = textOf(result);
      assert(text.includes('Upstream side') && !text.includes('Front side'), text);
      return text.slice(0, 80);
    });

    await rep.check('the Connections page shows up connected; Disconnect ends access', async () => {
      await page.goto(`${front.issuer}/connections`);
      await shot(page, 'connections');
      await page.getByRole('button', { name: 'Disconnect up' }).click();
      await page.waitForLoadState();
      await page.getByText('up is disconnected').waitFor();
      await shot(page, 'disconnected');
      const { result, elicitation } = await callTool(client);
      assert(elicitation, `the call still went through: ${textOf(result)}`);
      return 'the next call asks to connect again';
    });

    await rep.check(
      "a server of one's own: added on the page with a key of the upstream, its tool approved, then listed and called",
      async () => {
        const { stdout } = await promisify(execFile)(BIN, ['key', 'create', '--account', upstream.email], { env: upstream.env });
        const key = stdout.split('\n').find((l) => l.startsWith('key: '))?.slice(5);
        assert(key, `no key printed: ${stdout}`);
        await page.goto(`${front.issuer}/connections`);
        await page.getByLabel('Name (a-z, 0-9 and -, up to 16)').fill('mine');
        await page.getByLabel('MCP address (https)').fill(upstream.mcpUrl);
        await page.getByLabel('Bearer token (optional; kept encrypted, never shown again)').fill(key);
        await page.getByRole('button', { name: 'Add server' }).click();
        await page.waitForLoadState();
        await page.getByText('Waiting for your approval').waitFor();
        assert(!(await page.content()).includes(key), 'the token is shown on the page');
        await shot(page, 'own-server-pending');
        const before = (await client.listTools()).tools.map((t) => t.name);
        assert(!before.some((n) => n.startsWith('p_mine_')), `listed before approval: ${before.join(', ')}`);
        await page.getByRole('button', { name: 'Approve these tools of mine' }).click();
        await page.waitForLoadState();
        await shot(page, 'own-server-approved');
        let name;
        for (let i = 0; i < 40 && !name; i++) {
          name = (await client.listTools()).tools.map((t) => t.name).find((n) => /^p_mine_[0-9a-f]{6}__list_projects$/.test(n));
          if (!name) await new Promise((r) => setTimeout(r, 250));
        }
        assert(name, 'never listed after approval');
        const result = await client.callTool({ name, arguments: {} });
        assert(!result.isError && textOf(result).includes('Upstream side'), textOf(result));
        return name;
      },
    );

    await rep.check('the connections activity lists, newest first, the own server, the disconnect, the calls and the connect', async () => {
      await page.goto(`${front.issuer}/connections`);
      await page.getByRole('link', { name: 'What happened with your connections and servers (activity)' }).click();
      await page.getByRole('heading', { name: 'Activity of your connections' }).waitFor();
      await shot(page, 'connections-activity');
      const rows = (await page.locator('tr.event').allInnerTexts()).map((r) => r.split('\t').map((c) => c.trim()));
      const what = rows.map((r) => r[1]);
      // Each step is looked for below the one before (the list is newest first).
      const order = ['Approved tools of your server mine', 'Added your server mine', 'Disconnected your account at up', 'Tool list_projects on up', 'Connected your account at up'];
      const found = [];
      for (const text of order) {
        const from = found.length ? found[found.length - 1] + 1 : 0;
        const i = what.findIndex((w, k) => k >= from && w.startsWith(text));
        assert(i >= 0, `"${text}" missing or out of order in ${what.join(' | ')}`);
        found.push(i);
      }
      const call = rows[found[3]];
      assert(call[3] === 'Done', `the call between connecting and disconnecting: ${call.join(' | ')}`);
      return rows.map((r) => `${r[0]} · ${r[1]} · ${r[2]} · ${r[3]}`).join('\n    ');
    });

    await rep.check("revoking the app on the front's Connected apps ends its access to the upstream's tools (401)", async () => {
      const token = (await provider.tokens())?.access_token;
      assert(token, 'the provider holds no access token');
      const call = () =>
        fetch(front.mcpUrl, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: TOOL, arguments: {} } }),
        });
      const before = await call();
      assert(before.status === 200, `before revoking: ${before.status}`);
      await page.goto(`${front.issuer}/apps`);
      await page.getByRole('button', { name: 'Revoke Connections browser test…' }).click();
      await page.getByRole('button', { name: 'Revoke Connections browser test', exact: true }).click();
      await page.waitForURL((u) => u.pathname === '/apps');
      const after = await call();
      assert(after.status === 401, `after revoking: ${after.status}`);
      return `${before.status} before, ${after.status} after; WWW-Authenticate: ${after.headers.get('www-authenticate')}`;
    });

    await client.close().catch(() => {});
    await context.close();
  } catch (err) {
    if (err instanceof FatalCheck) console.log(`  ${err.message}`);
    else rep.fail('unexpected error', err);
  } finally {
    await browser?.close().catch(() => {});
    for (const s of [front, upstream]) {
      if (s?.stop) {
        if (rep.failed > 0) console.log(s.log().split('\n').slice(-30).join('\n'));
        await s.stop({ keep: rep.failed > 0 });
      }
    }
  }
  console.log(`connections: ${rep.passed} passed, ${rep.failed} failed`);
  process.exitCode = rep.failed === 0 ? 0 : 1;
  setTimeout(() => process.exit(process.exitCode), 200).unref();
}

await main();
