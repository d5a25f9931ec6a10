#!/usr/bin/env node
// Gatehouse in a real headless Chromium, driven by the official MCP TypeScript
// SDK client: the SDK's redirectToAuthorization hands the authorization URL to
// the browser, which signs in and approves on the real pages; the browser
// lands on the client's loopback callback and the SDK redeems the code. Then
// the browser revokes the app on Connected apps and the client's next call is
// refused. A device-grant client's user code is typed at /device and allowed in the same
// browser, and the client's poll gets its tokens. Every console page is screenshot at a desktop and a phone width and
// checked for horizontal scrolling, input labels and <html lang>.
//
// Env: GATEHOUSE_BIN (server binary), CHROMIUM (default /usr/bin/chromium),
// ARTIFACTS (screenshot folder, default ./artifacts next to this script).
// Prints one PASS/FAIL line per check and finally "browser: N passed, N failed".

import { createServer } from 'node:http';
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { chromium } from 'playwright-core';

import { EXPECTED_TOOLS, FatalCheck, HeadlessOAuthProvider, Reporter, assert, short } from '../interop/lib/harness.mjs';
import { freePort, startGatehouse } from '../interop/lib/server.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const BIN = resolve(process.env.GATEHOUSE_BIN || join(HERE, '../../target/debug/gatehouse'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = resolve(process.env.ARTIFACTS || join(HERE, 'artifacts'));
const DESKTOP = { name: 'desktop', width: 1280, height: 800 };
const PHONE = { name: 'phone', width: 390, height: 844 };
const STEP_TIMEOUT = 20_000;
// axe-core, injected into each page (the contexts bypass the pages' CSP, which allows no script).
const AXE = join(HERE, 'node_modules/axe-core/axe.min.js');
// WCAG 2.2 AA: 1.4.11 non-text contrast (focus indicator, input borders) at least 3:1.
const MIN_NON_TEXT_CONTRAST = 3;

/** WCAG relative luminance of "rgb(r, g, b)". */
function luminance(rgb) {
  const [r, g, b] = rgb.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number).map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG contrast ratio of two "rgb(...)" colours. */
function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

const rep = new Reporter('browser');
const clientInfo = { name: 'gatehouse-browser-test', version: '1.32.2' };

// ---------------------------------------------------------------------------
// The client's redirect URI: a loopback server that records each arrival.
// ---------------------------------------------------------------------------

async function startCallbackServer() {
  const port = await freePort();
  const waiters = [];
  const arrivals = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url, `http://127.0.0.1:${port}`);
    if (url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html lang="en"><title>Done</title><p>Authorization finished. You can close this window.</p></html>');
    arrivals.push(url);
    while (waiters.length) waiters.shift()(url);
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return {
    redirectUrl: `http://127.0.0.1:${port}/callback`,
    arrivals,
    next: () => new Promise((r) => waiters.push(r)),
    close: () => new Promise((r) => server.close(r)),
  };
}

// ---------------------------------------------------------------------------
// A server on an empty database, as on a fresh machine: no account, the one-time
// setup link printed on standard output.
// ---------------------------------------------------------------------------

async function startEmpty() {
  const work = mkdtempSync(join(tmpdir(), 'gatehouse-first-run-'));
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    DATABASE_URL: `sqlite://${work}/gatehouse.db?mode=rwc`,
    GATEHOUSE_BIND: `127.0.0.1:${port}`,
    MCP_SERVER_URL: `${issuer}/mcp`,
  };
  delete env.GATEHOUSE_BOOTSTRAP_EMAIL;
  delete env.GATEHOUSE_BOOTSTRAP_PASSWORD;
  const child = spawn(BIN, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    }
    rmSync(work, { recursive: true, force: true });
  };
  for (let i = 0; i < 300; i++) {
    const link = output.match(/create the first one within 24 hours at: (\S+)/i)?.[1];
    if (link) return { issuer, link, stop, output: () => output };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error(`no setup link printed:\n${output}`);
}

// ---------------------------------------------------------------------------
// Page checks: screenshot, no horizontal scrolling on a phone, labels, lang.
// ---------------------------------------------------------------------------

async function auditPage(page, name, viewport) {
  const file = join(ARTIFACTS, `${name}-${viewport.name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  const facts = await page.evaluate(() => ({
    lang: document.documentElement.getAttribute('lang'),
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    unlabelled: [...document.querySelectorAll('input, select, textarea')]
      .filter((el) => el.type !== 'hidden' && el.labels.length === 0)
      .map((el) => el.outerHTML.slice(0, 120)),
  }));
  const where = `${name} at ${viewport.width}x${viewport.height}`;
  await rep.check(`${where}: axe-core finds no serious or critical violation`, async () => {
    if (!(await page.evaluate(() => typeof window.axe !== 'undefined'))) await page.addScriptTag({ path: AXE });
    const violations = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) }));
    });
    const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert(bad.length === 0, bad.map((v) => `${v.id} (${v.impact}) at ${v.nodes.join(', ')}`).join('; '));
    return violations.length ? `minor: ${violations.map((v) => `${v.id} (${v.impact})`).join(', ')}` : 'none';
  });
  const colours = await page.evaluate(() => {
    const field = document.querySelector('input:not([type=hidden]), select');
    const button = document.querySelector('main button, main a');
    let focus = null;
    if (button) {
      button.focus({ focusVisible: true });
      const st = getComputedStyle(button, ':focus-visible');
      focus = button.matches(':focus-visible') ? getComputedStyle(button).outlineColor : st.outlineColor;
      button.blur();
    }
    return {
      background: getComputedStyle(document.querySelector('main')).backgroundColor,
      border: field ? getComputedStyle(field).borderTopColor : null,
      focus,
    };
  });
  if (colours.border) {
    await rep.check(`${where}: input borders contrast at least ${MIN_NON_TEXT_CONTRAST}:1`, () => {
      const ratio = contrast(colours.border, colours.background);
      assert(ratio >= MIN_NON_TEXT_CONTRAST, `${colours.border} on ${colours.background} is ${ratio.toFixed(2)}:1`);
      return `${ratio.toFixed(2)}:1`;
    });
  }
  if (colours.focus) {
    await rep.check(`${where}: the focus ring contrasts at least ${MIN_NON_TEXT_CONTRAST}:1`, () => {
      const ratio = contrast(colours.focus, colours.background);
      assert(ratio >= MIN_NON_TEXT_CONTRAST, `${colours.focus} on ${colours.background} is ${ratio.toFixed(2)}:1`);
      return `${ratio.toFixed(2)}:1`;
    });
  }
  await rep.check(`${where}: <html lang> is set`, () => {
    assert(facts.lang, 'no lang attribute on <html>');
    return `lang="${facts.lang}"`;
  });
  await rep.check(`${where}: every input has a label`, () => {
    assert(facts.unlabelled.length === 0, `unlabelled: ${facts.unlabelled.join(' | ')}`);
  });
  if (viewport === PHONE) {
    await rep.check(`${where}: no horizontal scrolling`, () => {
      assert(facts.scrollWidth <= facts.innerWidth, `scrollWidth ${facts.scrollWidth} > innerWidth ${facts.innerWidth}`);
      return `scrollWidth ${facts.scrollWidth} <= ${facts.innerWidth}`;
    });
  }
  return file;
}

// ---------------------------------------------------------------------------
// An OAuthClientProvider whose "browser" is the real Chromium.
// ---------------------------------------------------------------------------

class BrowserOAuthProvider extends HeadlessOAuthProvider {
  /** o.page: a Playwright page; o.viewport; o.consentBy: 'click' | 'keyboard'; o.callbacks */
  async redirectToAuthorization(authorizationUrl) {
    const url = new URL(authorizationUrl);
    this.authorizationUrls.push(url.href);
    if (!this.interactive) return; // recorded only: the test asserts what the SDK does next
    const { page, viewport, consentBy, callbacks } = this.o;
    const arrived = callbacks.next();
    const walk = { authorizationUrl: url.href, sentState: url.searchParams.get('state'), signedIn: false, consentShown: false };

    await page.goto(url.href);
    if (new URL(page.url()).pathname === '/signin') {
      await auditPage(page, 'signin', viewport);
      await page.getByLabel('Email', { exact: true }).fill(this.o.email);
      await page.getByLabel('Password', { exact: true }).fill(this.o.password);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      walk.signedIn = true;
    }
    const allow = page.getByRole('button', { name: 'Allow', exact: true });
    await allow.waitFor({ timeout: STEP_TIMEOUT });
    walk.consentShown = true;
    walk.consentUrl = page.url();
    await auditPage(page, 'consent', viewport);
    if (this.o.chooseProject) {
      // Per-app project choice: only the named project, ticked by its label.
      await page.getByLabel('Only the projects I tick:').check();
      await page.getByLabel(this.o.chooseProject, { exact: true }).check();
      await auditPage(page, 'consent-choice', viewport);
    }
    if (consentBy === 'keyboard') {
      // Only the keyboard: Tab from the top of the page until Allow has focus, then Enter.
      await page.evaluate(() => document.activeElement?.blur());
      let tabs = 0;
      for (; tabs < 30; tabs++) {
        if (await allow.evaluate((el) => el === document.activeElement)) break;
        await page.keyboard.press('Tab');
      }
      assert(await allow.evaluate((el) => el === document.activeElement), 'Allow never got focus with Tab');
      walk.tabs = tabs;
      await page.keyboard.press('Enter');
    } else {
      await allow.click();
    }
    const cb = await Promise.race([
      arrived,
      new Promise((_, rej) => setTimeout(() => rej(new Error(`browser did not reach ${this.o.redirectUrl} (at ${page.url()})`)), STEP_TIMEOUT)),
    ]);
    await page.waitForURL((u) => u.href.startsWith(this.o.redirectUrl), { timeout: STEP_TIMEOUT });
    walk.callbackUrl = cb.href;
    walk.code = cb.searchParams.get('code');
    walk.state = cb.searchParams.get('state');
    walk.iss = cb.searchParams.get('iss');
    this.walks.push(walk);
    this.lastWalk = walk;
  }
}

/** fetch for the SDK transport that remembers each response's status. */
function recordingFetch(log) {
  return async (input, init) => {
    const res = await fetch(input, init);
    const u = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    log.push({ method: init?.method ?? 'GET', path: u.pathname, status: res.status, wwwAuthenticate: res.headers.get('www-authenticate') });
    return res;
  };
}

/** SDK authorization through the browser; returns {provider, client, transport, walk, httpLog}. */
async function authorizeWithSdk(s, { clientName, page, viewport, consentBy, callbacks, chooseProject }) {
  const provider = new BrowserOAuthProvider({
    chooseProject,
    redirectUrl: callbacks.redirectUrl,
    clientName,
    email: s.email,
    password: s.password,
    page,
    viewport,
    consentBy,
    callbacks,
  });
  const httpLog = [];
  const serverUrl = new URL(s.mcpUrl);
  let transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch(httpLog) });
  try {
    await new Client(clientInfo).connect(transport);
    throw new Error('connect() succeeded without any token');
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const walk = provider.lastWalk;
  assert(walk, 'the SDK never asked for authorization');
  assert(walk.code, `no code at the callback: ${walk.callbackUrl}`);
  assert(walk.state === walk.sentState, `state ${walk.state} != sent ${walk.sentState}`);
  assert(walk.iss === s.issuer, `iss is ${walk.iss}, expected ${s.issuer}`);
  await transport.finishAuth(walk.code);
  assert(provider.tokens()?.access_token, 'no access token saved after finishAuth');
  transport = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider, fetch: recordingFetch(httpLog) });
  const client = new Client(clientInfo);
  await client.connect(transport);
  return { provider, client, transport, walk, httpLog };
}

async function listToolNames(client) {
  const names = (await client.listTools()).tools.map((t) => t.name);
  const missing = EXPECTED_TOOLS.filter((n) => !names.includes(n));
  assert(missing.length === 0, `missing tools ${missing.join(', ')}; got ${names.join(', ')}`);
  return names;
}

// ---------------------------------------------------------------------------

async function main() {
  rmSync(ARTIFACTS, { recursive: true, force: true });
  mkdirSync(ARTIFACTS, { recursive: true });
  console.log(`screenshots: ${ARTIFACTS}`);

  let server;
  let browser;
  let callbacks;
  try {
    server = await rep.check(
      'start gatehouse on a fresh SQLite database',
      async () => {
        const s = await startGatehouse({ bin: BIN, projectName: 'Browser test' });
        server = s;
        return s;
      },
      { fatal: true },
    );
    const s = server;
    rep.info(`server ${s.issuer}, project ${s.projectId}`);
    callbacks = await startCallbackServer();

    browser = await rep.check(
      'launch headless Chromium',
      async () => {
        browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
        return browser;
      },
      { fatal: true },
    );
    rep.info(`Chromium ${browser.version()}`);
    const desktop = await browser.newContext({ viewport: { width: DESKTOP.width, height: DESKTOP.height }, bypassCSP: true });
    const phone = await browser.newContext({ viewport: { width: PHONE.width, height: PHONE.height }, isMobile: true, hasTouch: true, bypassCSP: true });
    const dPage = await desktop.newPage();
    const pPage = await phone.newPage();
    for (const p of [dPage, pPage]) p.setDefaultTimeout(STEP_TIMEOUT);

    // --- 1. desktop browser, Allow clicked with the mouse ----------------------
    const appA = 'Browser test app (mouse)';
    const a = await rep.check(
      'SDK authorization in Chromium: sign in by label, click Allow, callback, finishAuth',
      async () => {
        const r = await authorizeWithSdk(s, { clientName: appA, page: dPage, viewport: DESKTOP, consentBy: 'click', callbacks });
        assert(r.walk.signedIn && r.walk.consentShown, 'sign-in or consent page not shown');
        return r;
      },
      { fatal: true },
    );
    await rep.check('SDK lists the Gatehouse tools (desktop approval)', async () => (await listToolNames(a.client)).join(', '));
    let noteId;
    await rep.check('create_note through the SDK (so the project and activity pages have content)', async () => {
      const r = await a.client.callTool({
        name: 'create_note',
        arguments: { project_id: s.projectId, title: 'Release checklist for the spring launch', body: 'Check the consent page on a phone.', tags: ['launch'] },
      });
      assert(!r.isError, `create_note returned isError: ${short(JSON.stringify(r.content))}`);
      noteId = r.structuredContent?.id;
      assert(noteId, `no note id in ${short(JSON.stringify(r.structuredContent))}`);
    });

    // --- 2. phone browser, Allow reached with Tab and pressed with Enter -------
    const appB = 'Browser test app (keyboard)';
    const b = await rep.check(
      'SDK authorization in Chromium at phone width: Tab to Allow, Enter',
      async () => {
        return authorizeWithSdk(s, { clientName: appB, page: pPage, viewport: PHONE, consentBy: 'keyboard', callbacks });
      },
    );
    if (b) {
      rep.info(`keyboard: Allow focused after ${b.walk.tabs} Tab press(es)`);
      await rep.check('SDK lists the Gatehouse tools (keyboard approval)', async () => (await listToolNames(b.client)).join(', '));
    }

    // --- 3. console pages at both widths ---------------------------------------
    let activityPath;
    let timelinePath;
    await rep.check('Connected apps lists the app with an activity link and a timeline link', async () => {
      await dPage.goto(`${s.issuer}/apps`);
      await dPage.getByRole('heading', { name: appA }).waitFor();
      const link = dPage.getByRole('link', { name: `What did ${appA} do? (activity)` });
      activityPath = new URL(await link.getAttribute('href'), s.issuer).pathname;
      const timeline = new URL(
        await dPage.getByRole('link', { name: `How ${appA} connected (timeline)` }).getAttribute('href'),
        s.issuer,
      );
      timelinePath = timeline.pathname + timeline.search;
      return `${activityPath}, ${timelinePath}`;
    });
    await rep.check('the timeline shows the steps of the connection in order, through the first MCP call', async () => {
      await dPage.goto(`${s.issuer}${timelinePath}`);
      const steps = await dPage.locator('tr.step').allInnerTexts();
      const index = (text) => steps.findIndex((row) => row.includes(text));
      const order = ['Registered with this server', 'Asked for access', 'Approved on the consent page', 'Authorization code redeemed', 'First MCP call: tool'];
      const found = order.map(index);
      assert(found.every((i) => i >= 0), `missing steps: ${order.filter((_, i) => found[i] < 0).join('; ')} in ${steps.join(' | ')}`);
      assert(found.every((i, k) => k === 0 || i > found[k - 1]), `out of order: ${steps.join(' | ')}`);
      return `${steps.length} steps`;
    });
    await rep.check('an API key and a personal URL made on /keys (so its tables have rows)', async () => {
      await dPage.goto(`${s.issuer}/keys`);
      await dPage.locator('#key-name').fill('Laptop with a rather long key name');
      await dPage.getByRole('button', { name: 'Create API key' }).click();
      await dPage.getByRole('heading', { name: 'Your new API key' }).waitFor();
      await auditPage(dPage, 'keys-created', DESKTOP);
      await dPage.goto(`${s.issuer}/keys`);
      await dPage.locator('#url-name').fill('Phone');
      await dPage.getByRole('button', { name: 'Create personal URL' }).click();
      await dPage.getByRole('heading', { name: 'Your new personal URL' }).waitFor();
    });
    const pages = [
      ['home', '/'],
      ['project', `/projects/${s.projectId}`],
      ['apps', '/apps'],
      ...(activityPath ? [['app-activity', activityPath]] : []),
      ...(timelinePath ? [['app-timeline', timelinePath]] : []),
      ['keys', '/keys'],
      ['connections-activity', '/connections/activity'],
      ['account', '/account'],
      ...(noteId ? [['note', `/projects/${s.projectId}/notes/${noteId}`]] : []),
      ['search', `/projects/${s.projectId}?q=phone`],
      ['confirm-sign-out', '/account/sign-out-everywhere'],
    ];
    for (const [page, viewport] of [
      [dPage, DESKTOP],
      [pPage, PHONE],
    ]) {
      for (const [name, path] of pages) {
        const ok = await rep.check(`${name} (${path}) at ${viewport.width}x${viewport.height} answers 200`, async () => {
          const res = await page.goto(`${s.issuer}${path}`);
          assert(res.status() === 200, `status ${res.status()}`);
          const at = new URL(page.url());
          assert(at.pathname + at.search === path, `ended at ${page.url()}`);
        });
        if (ok) await auditPage(page, name, viewport);
      }
    }
    for (const [page, viewport] of [
      [dPage, DESKTOP],
      [pPage, PHONE],
    ]) {
      const ok = await rep.check(`an unknown path at ${viewport.width}x${viewport.height} is Gatehouse's 404 page with navigation`, async () => {
        const res = await page.goto(`${s.issuer}/no-such-page`);
        assert(res.status() === 404, `status ${res.status()}`);
        await page.getByRole('navigation', { name: 'Gatehouse' }).getByRole('link', { name: 'Your projects' }).waitFor();
      });
      if (ok) await auditPage(page, 'not-found', viewport);
      await rep.check(`/keys at ${viewport.width}x${viewport.height}: every Revoke button is on screen`, async () => {
        await page.goto(`${s.issuer}/keys`);
        const buttons = page.getByRole('button', { name: /^Revoke/ });
        const n = await buttons.count();
        assert(n > 0, 'no key or URL to revoke');
        for (let i = 0; i < n; i++) {
          const box = await buttons.nth(i).boundingBox();
          assert(box && box.x >= 0 && box.x + box.width <= viewport.width, `button ${i} at x=${box?.x} width ${box?.width}`);
        }
        return `${n} button(s) inside ${viewport.width}px`;
      });
    }

    // --- 3b. the operators' upstream page: a pending definition, approved ---------
    const cli = (args) =>
      promisify(execFile)(BIN, args, { env: { ...process.env, DATABASE_URL: `sqlite://${s.work}/gatehouse.db?mode=rwc`, MCP_SERVER_URL: s.mcpUrl } });
    const upstreamReady = await rep.check('a stdio upstream with definitions waiting for approval; the account made an operator', async () => {
      const script = join(HERE, '../integration/upstreams/stdio_upstream.mjs');
      // The command lists the upstream itself and records its definitions as pending.
      const added = (await cli(['upstream', 'add', 'local', '--command', `node '${script}'`])).stdout;
      assert(/; \d+ tool definitions? recorded; clients see them once approved/.test(added), added);
      const { stdout } = await cli(['account', 'admin', s.email]);
      assert(stdout.includes('is now an operator'), stdout);
      const list = (await cli(['upstream', 'list'])).stdout;
      assert(/pending=[1-9]/.test(list), list);
      return list.trim();
    });
    if (upstreamReady) {
      for (const [page, viewport] of [
        [dPage, DESKTOP],
        [pPage, PHONE],
      ]) {
        const ok = await rep.check(`/upstreams at ${viewport.width}x${viewport.height} shows the pending definitions`, async () => {
          await page.goto(`${s.issuer}/upstreams`);
          await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Upstreams' }).waitFor();
          await page.getByRole('heading', { name: 'local', exact: true }).waitFor();
          await page.getByRole('heading', { name: /local__echo — a new tool/ }).waitFor();
          // wipe is destructive: the page says it stays hidden once approved.
          await page.getByText('hidden even once approved').first().waitFor();
          const box = await page.getByRole('button', { name: 'Approve the definitions of local' }).boundingBox();
          assert(box && box.x >= 0 && box.x + box.width <= viewport.width, `Approve at x=${box?.x} width ${box?.width}`);
        });
        if (ok) await auditPage(page, 'upstreams', viewport);
      }
      await rep.check('Approve on /upstreams asks first, then the SDK lists the upstream tools', async () => {
        await dPage.goto(`${s.issuer}/upstreams`);
        await dPage.getByRole('button', { name: 'Approve the definitions of local' }).click();
        await dPage.getByRole('heading', { name: /^Approve \d+ tool definitions? of local\?$/ }).waitFor();
        await auditPage(dPage, 'upstreams-confirm', DESKTOP);
        await dPage.getByRole('button', { name: "Approve local's definitions" }).click();
        await dPage.getByRole('status').filter({ hasText: /Approved \d+ tool definitions? of local/ }).waitFor();
        await auditPage(dPage, 'upstreams-approved', DESKTOP);
        for (let i = 0; i < 50; i++) {
          const names = (await a.client.listTools()).tools.map((t) => t.name);
          if (names.includes('local__echo')) return names.filter((n) => n.startsWith('local__')).join(', ');
          await new Promise((r) => setTimeout(r, 100));
        }
        throw new Error('local__echo never listed after approval');
      });
    }

    // --- 3c. an invitation: the operator invites, a newcomer joins at phone width ---
    if (upstreamReady) {
      let link;
      await rep.check('the owner (an operator) invites an email on the project page and gets the link', async () => {
        await dPage.goto(`${s.issuer}/projects/${s.projectId}`);
        await dPage.getByLabel('Email', { exact: true }).fill('invitee@example.com');
        await dPage.getByLabel('Role').selectOption('write');
        await dPage.getByRole('button', { name: 'Add or invite' }).click();
        const field = dPage.getByLabel('Invitation link');
        await field.waitFor();
        link = await field.inputValue();
        assert(link.startsWith(`${s.issuer}/invite?token=gate_inv_`), `link ${link}`);
        await auditPage(dPage, 'project-invited', DESKTOP);
        return link.replace(/gate_inv_.*/, 'gate_inv_…');
      });
      if (link) {
        await rep.check('the newcomer opens the link in another browser at phone width, chooses a password and lands in the project', async () => {
          const fresh = await browser.newContext({ viewport: { width: PHONE.width, height: PHONE.height }, isMobile: true, hasTouch: true, bypassCSP: true });
          try {
            const page = await fresh.newPage();
            const res = await page.goto(link);
            assert(res.status() === 200, `status ${res.status()}`);
            await page.getByRole('heading', { name: 'Join Browser test' }).waitFor();
            await page.getByRole('heading', { name: 'Create your account' }).waitFor();
            await auditPage(page, 'invite', PHONE);
            await page.getByLabel('Password (at least 8 characters)').fill('invitee-password');
            await page.getByRole('button', { name: 'Create account and join' }).click();
            await page.waitForURL((u) => u.pathname === `/projects/${s.projectId}`);
            const notice = await page.getByRole('status').innerText();
            assert(notice.includes('You joined Browser test with the role write'), `notice: ${notice}`);
            await auditPage(page, 'project-joined', PHONE);
            // Opened again by whoever joined with it, the spent link leads to the project.
            await page.goto(link);
            await page.waitForURL((u) => u.pathname === `/projects/${s.projectId}`);
            const again = await page.getByRole('status').innerText();
            assert(again.includes('You are a member of Browser test already'), `notice: ${again}`);
          } finally {
            await fresh.close();
          }
        });
      }
    }

    // --- 4. revoke in the browser, the client's next call is refused -----------
    await rep.check('Revoke on Connected apps removes the app', async () => {
      await dPage.goto(`${s.issuer}/apps`);
      // The list's button asks first, on a page of its own that names the app.
      await dPage.getByRole('button', { name: `Revoke ${appA}…` }).click();
      await dPage.waitForURL((u) => u.pathname === '/apps/revoke');
      await dPage.getByRole('heading', { name: `Revoke ${appA}?` }).waitFor();
      await auditPage(dPage, 'confirm-revoke', DESKTOP);
      await dPage.getByRole('button', { name: `Revoke ${appA}`, exact: true }).click();
      await dPage.waitForURL((u) => u.pathname === '/apps');
      assert((await dPage.getByRole('heading', { name: appA }).count()) === 0, `${appA} still listed`);
      const notice = await dPage.getByRole('status').innerText();
      assert(notice.includes(`${appA} can no longer use your account.`), `notice: ${notice}`);
      await auditPage(dPage, 'apps-after-revoke', DESKTOP);
    });
    await rep.check("the revoked client's next MCP call gets 401 and the SDK raises UnauthorizedError", async () => {
      a.provider.interactive = false; // the SDK may ask for a new authorization: record it, open nothing
      const before = a.httpLog.length;
      let err;
      try {
        await a.client.listTools();
      } catch (e) {
        err = e;
      }
      assert(err, 'tools/list still succeeded after the revocation');
      const seen = a.httpLog.slice(before);
      const mcp401 = seen.find((r) => r.path === new URL(s.mcpUrl).pathname && r.status === 401);
      assert(mcp401, `no 401 from /mcp; responses: ${short(JSON.stringify(seen))}`);
      assert(/invalid_token/.test(mcp401.wwwAuthenticate ?? ''), `WWW-Authenticate lacks error="invalid_token": ${mcp401.wwwAuthenticate}`);
      assert(err instanceof UnauthorizedError, `SDK raised ${err.name}: ${err.message}`);
      const refresh = seen.find((r) => r.path.endsWith('/token'));
      const sequence = seen.map((r) => `${r.method} ${r.path} ${r.status}`).join(', ');
      assert(!refresh || refresh.status === 400, `refresh after revocation answered ${refresh?.status}`);
      return `UnauthorizedError "${err.message}"; ${sequence}; WWW-Authenticate: ${mcp401.wwwAuthenticate}`;
    });
    if (b) {
      await rep.check('the other app (not revoked) still lists tools', async () => {
        await listToolNames(b.client);
      });
    }

    // --- 5. the device grant: the person types the code in Chromium and allows ----
    await rep.check('device grant: the code typed at /device in Chromium, Allow, then the poll gets tokens', async () => {
      const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
      const reg = await fetch(`${s.issuer}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'Browser test CLI', grant_types: [DEVICE_GRANT], token_endpoint_auth_method: 'none' }),
      });
      assert(reg.status === 201, `registration answered ${reg.status}`);
      const clientId = (await reg.json()).client_id;
      const form = (fields) => ({
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: clientId, ...fields }).toString(),
      });
      const started = await (await fetch(`${s.issuer}/oauth/device_authorization`, form({ scope: 'mcp:read' }))).json();
      assert(started.user_code && started.device_code, `no codes: ${short(JSON.stringify(started))}`);
      const poll = async () => {
        const res = await fetch(`${s.issuer}/oauth/token`, form({ grant_type: DEVICE_GRANT, device_code: started.device_code }));
        return { status: res.status, body: await res.json() };
      };
      const pending = await poll();
      assert(pending.body.error === 'authorization_pending', `first poll: ${JSON.stringify(pending.body)}`);

      await dPage.goto(`${s.issuer}/device`);
      await auditPage(dPage, 'device', DESKTOP);
      // Typed as a person might: lower case, without the dash.
      await dPage.getByLabel('Code', { exact: true }).fill(started.user_code.replace('-', '').toLowerCase());
      await dPage.getByRole('button', { name: 'Continue' }).click();
      const allow = dPage.getByRole('button', { name: 'Allow', exact: true });
      await allow.waitFor({ timeout: STEP_TIMEOUT });
      assert((await dPage.content()).includes(started.user_code), 'the consent page does not repeat the code');
      await auditPage(dPage, 'device-consent', DESKTOP);
      await allow.click();
      await dPage.getByRole('heading', { name: 'Device connected' }).waitFor({ timeout: STEP_TIMEOUT });
      await auditPage(dPage, 'device-done', DESKTOP);

      const done = await poll();
      assert(done.status === 200 && done.body.token_type === 'Bearer', `poll after Allow: ${done.status} ${short(JSON.stringify(done.body))}`);
      const res = await fetch(s.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
          authorization: `Bearer ${done.body.access_token}`,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      const text = await res.text();
      assert(res.status === 200 && text.includes('list_projects'), `tools/list answered ${res.status}: ${short(text)}`);
      return `user code ${started.user_code}; tools/list with the device's token`;
    });
    await rep.check('/device at 390x844 answers 200', async () => {
      const res = await pPage.goto(`${s.issuer}/device`);
      assert(res.status() === 200, `status ${res.status()}`);
      await auditPage(pPage, 'device', PHONE);
    });

    // --- 6. per-app project choice: one project on consent, then narrowed on the app's page ----
    await rep.check('a second project made in the console', async () => {
      await dPage.goto(`${s.issuer}/`);
      await dPage.locator('#project-name').fill('Second project');
      await dPage.getByRole('button', { name: 'Create project' }).click();
      await dPage.waitForLoadState();
    });
    const listedProjects = async (client) => {
      const r = await client.callTool({ name: 'list_projects', arguments: {} });
      assert(!r.isError, `list_projects returned isError: ${short(JSON.stringify(r.content))}`);
      return r.structuredContent.projects.map((p) => p.id);
    };
    const chosen = [];
    for (const [page, viewport, consentBy] of [
      [dPage, DESKTOP, 'click'],
      [pPage, PHONE, 'keyboard'],
    ]) {
      const name = `Chooser app (${viewport.name})`;
      await rep.check(`consent at ${viewport.width}x${viewport.height}: only the project "Browser test" ticked, then Allow`, async () => {
        const r = await authorizeWithSdk(s, { clientName: name, page, viewport, consentBy, callbacks, chooseProject: 'Browser test' });
        const ids = await listedProjects(r.client);
        assert(ids.length === 1 && ids[0] === s.projectId, `list_projects gave ${ids.join(', ')}`);
        chosen.push([name, r]);
        return `list_projects: ${ids.join(', ')}`;
      });
    }
    await rep.check('the app page narrows the desktop app to read only; its next call sees it', async () => {
      const [name, c] = chosen.find(([n]) => n.includes('desktop')) ?? [];
      assert(c, 'no desktop app to narrow');
      const before = (await c.client.listTools()).tools.map((t) => t.name);
      assert(before.includes('create_note'), `create_note not listed before: ${before.join(', ')}`);
      for (const [page, viewport] of [
        [pPage, PHONE],
        [dPage, DESKTOP],
      ]) {
        await page.goto(`${s.issuer}/apps`);
        await page.getByRole('link', { name: `Change what ${name} reaches` }).click();
        await page.getByRole('heading', { name: `What ${name} reaches` }).waitFor();
        await auditPage(page, 'app-access', viewport);
      }
      await dPage.getByLabel('Read only').check();
      await dPage.getByRole('button', { name: 'Save' }).click();
      await dPage.waitForURL((u) => u.pathname === '/apps');
      const notice = await dPage.getByRole('status').innerText();
      assert(notice.includes(name), `notice: ${notice}`);
      await auditPage(dPage, 'apps-after-narrowing', DESKTOP);
      const after = (await c.client.listTools()).tools.map((t) => t.name);
      assert(!after.includes('create_note'), `create_note still listed: ${after.join(', ')}`);
      const ids = await listedProjects(c.client);
      assert(ids.length === 1 && ids[0] === s.projectId, `list_projects gave ${ids.join(', ')}`);
      return `tools now: ${after.join(', ')}`;
    });

    // --- 7. the first run: a fresh server, its setup link, then the console leads on ---
    let fresh;
    try {
      fresh = await rep.check('a server on an empty database prints its one-time setup link', async () => {
        const f = await startEmpty();
        assert(f.link.startsWith(`${f.issuer}/setup?token=gate_setup_`), `link ${f.link}`);
        return f;
      });
      if (fresh) {
        const setupDesktop = await browser.newContext({ viewport: { width: DESKTOP.width, height: DESKTOP.height }, bypassCSP: true });
        const setupPhone = await browser.newContext({ viewport: { width: PHONE.width, height: PHONE.height }, isMobile: true, hasTouch: true, bypassCSP: true });
        try {
          const first = await setupDesktop.newPage();
          const small = await setupPhone.newPage();
          for (const p of [first, small]) p.setDefaultTimeout(STEP_TIMEOUT);
          await rep.check('the setup link opens the form for the first account, at both widths', async () => {
            for (const [page, viewport] of [
              [small, PHONE],
              [first, DESKTOP],
            ]) {
              const res = await page.goto(fresh.link);
              assert(res.status() === 200, `status ${res.status()}`);
              await page.getByRole('heading', { name: 'Create the first account' }).waitFor();
              await auditPage(page, 'setup', viewport);
            }
          });
          await rep.check('creating the account lands on Projects, which shows the MCP URL to paste and the steps per client', async () => {
            await first.getByLabel('Email').fill('first@example.com');
            await first.getByLabel('Password (at least 8 characters)').fill('first-password-long');
            await first.getByRole('button', { name: 'Create account' }).click();
            await first.waitForURL((u) => u.pathname === '/');
            await first.getByRole('heading', { name: 'Projects' }).waitFor();
            const html = await first.content();
            assert(html.includes('You are not a member of any project yet'), 'no empty-state words');
            assert(html.includes(`${fresh.issuer}/mcp`), 'the MCP URL is not on the page');
            for (const client of ['Claude', 'ChatGPT', 'Cursor', 'VS Code']) assert(html.includes(client), `no steps for ${client}`);
            await auditPage(first, 'first-run-home', DESKTOP);
            const used = await first.goto(fresh.link);
            assert(used.status() === 404, `the setup link answered ${used.status()} a second time`);
          });
          await rep.check('a project made in the console opens with its notes and members; the phone sees it too', async () => {
            await first.goto(`${fresh.issuer}/`);
            await first.getByLabel('Name').fill('My first project');
            await first.getByRole('button', { name: 'Create project' }).click();
            await first.getByRole('heading', { name: 'My first project' }).waitFor();
            await auditPage(first, 'first-project', DESKTOP);
            await small.goto(`${fresh.issuer}/signin`);
            await small.getByLabel('Email').fill('first@example.com');
            await small.getByLabel('Password').fill('first-password-long');
            await small.getByRole('button', { name: 'Sign in', exact: true }).click();
            await small.waitForURL((u) => u.pathname === '/');
            await small.getByRole('link', { name: 'My first project' }).waitFor();
            await auditPage(small, 'first-run-home', PHONE);
          });
        } finally {
          await setupDesktop.close();
          await setupPhone.close();
        }
      }
    } finally {
      await fresh?.stop();
    }

    await desktop.close();
    await phone.close();
  } catch (err) {
    if (err instanceof FatalCheck) console.log(`  ${err.message}`);
    else rep.fail('unexpected error', err);
  } finally {
    await browser?.close().catch(() => {});
    await callbacks?.close().catch(() => {});
    if (server?.stop) {
      if (rep.failed > 0) {
        console.log('--- last 30 lines of the server log');
        console.log(server.log().split('\n').slice(-30).join('\n'));
      }
      await server.stop({ keep: rep.failed > 0 });
      if (rep.failed > 0) console.log(`(server work dir kept: ${server.work})`);
    }
  }
  console.log(`screenshots: ${ARTIFACTS}`);
  console.log(`browser: ${rep.passed} passed, ${rep.failed} failed`);
  process.exitCode = rep.failed === 0 ? 0 : 1;
  setTimeout(() => process.exit(process.exitCode), 200).unref();
}

await main();
