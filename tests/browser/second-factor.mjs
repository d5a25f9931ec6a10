#!/usr/bin/env node
// The second factor in a real headless Chromium (issue 36, item 3): a person signs in,
// turns on two-step sign-in on the account page (QR code, the key, a code from an
// authenticator), sees the ten recovery codes once; then a fresh browser signs in with the
// password and is asked for a code, which the `otpauth` library computes from the key as an
// authenticator app would. Screenshots of each page go to ARTIFACTS.
//
// Env: GATEHOUSE_BIN, CHROMIUM, ARTIFACTS (as browser.mjs).
// Prints one PASS/FAIL line per check and finally "second factor: N passed, N failed".

import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as OTPAuth from 'otpauth';
import { chromium } from 'playwright-core';

import { FatalCheck, Reporter, assert } from '../interop/lib/harness.mjs';
import { startGatehouse } from '../interop/lib/server.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const BIN = resolve(process.env.GATEHOUSE_BIN || join(HERE, '../../target/debug/gatehouse'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = resolve(process.env.ARTIFACTS || join(HERE, 'artifacts'));
const STEP_TIMEOUT = 20_000;

const rep = new Reporter('second factor');

async function signInWithPassword(page, s) {
  await page.goto(`${s.issuer}/signin`);
  await page.getByLabel('Email', { exact: true }).fill(s.email);
  await page.getByLabel('Password', { exact: true }).fill(s.password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForLoadState();
}

async function main() {
  mkdirSync(ARTIFACTS, { recursive: true });
  let server;
  let browser;
  try {
    server = await rep.check('start gatehouse on a fresh SQLite database', () => startGatehouse({ bin: BIN, projectName: 'Second factor' }), {
      fatal: true,
    });
    const s = server;
    browser = await rep.check('launch headless Chromium', () => chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] }), {
      fatal: true,
    });
    const owner = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await owner.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT);

    let totp;
    await rep.check(
      'account page: set up an authenticator app (QR code and key shown), confirm with its code',
      async () => {
        await signInWithPassword(page, s);
        assert(new URL(page.url()).pathname === '/', `after the password the browser is at ${page.url()}`);
        await page.goto(`${s.issuer}/account`);
        await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
        const qr = page.locator('#totp-qr');
        await qr.waitFor();
        const size = await qr.evaluate((img) => ({ w: img.naturalWidth, h: img.naturalHeight }));
        assert(size.w > 0 && size.h > 0, 'the QR code image did not load');
        await page.screenshot({ path: join(ARTIFACTS, 'totp-enrol-desktop.png'), fullPage: true });
        const key = (await page.locator('#totp-secret').textContent()).trim();
        totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(key), digits: 6, period: 30, algorithm: 'SHA1' });
        await page.getByLabel('The 6-digit code the app shows').fill(totp.generate());
        await page.getByRole('button', { name: 'Turn on' }).click();
        const codes = page.locator('#recovery-codes li');
        await codes.first().waitFor();
        assert((await codes.count()) === 10, `${await codes.count()} recovery codes shown`);
        await page.screenshot({ path: join(ARTIFACTS, 'totp-recovery-codes-desktop.png'), fullPage: true });
        return `QR ${size.w}x${size.h}, 10 recovery codes`;
      },
      { fatal: true },
    );

    await rep.check('a fresh browser: the password, then the code from the app, then signed in', async () => {
      const fresh = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
      const p = await fresh.newPage();
      p.setDefaultTimeout(STEP_TIMEOUT);
      await signInWithPassword(p, s);
      assert(new URL(p.url()).pathname === '/signin/second-factor', `after the password the browser is at ${p.url()}`);
      await p.screenshot({ path: join(ARTIFACTS, 'totp-code-phone.png'), fullPage: true });
      const facts = await p.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth,
        unlabelled: [...document.querySelectorAll('input')].filter((el) => el.type !== 'hidden' && el.labels.length === 0).length,
      }));
      assert(facts.unlabelled === 0 && facts.scrollWidth <= facts.innerWidth, JSON.stringify(facts));
      // The enrolment used this step's code: the next step's (one step of drift is accepted).
      await p.getByLabel('Code', { exact: true }).fill(totp.generate({ timestamp: Date.now() + 30_000 }));
      await p.getByRole('button', { name: 'Continue' }).click();
      await p.waitForURL((u) => u.pathname === '/', { timeout: STEP_TIMEOUT });
      await p.goto(`${s.issuer}/account`);
      assert(new URL(p.url()).pathname === '/account', `not signed in: at ${p.url()}`);
      await fresh.close();
    });
    await owner.close();
  } catch (err) {
    if (err instanceof FatalCheck) console.log(`  ${err.message}`);
    else rep.fail('unexpected error', err);
  } finally {
    await browser?.close().catch(() => {});
    if (server?.stop) {
      if (rep.failed > 0) console.log(server.log().split('\n').slice(-30).join('\n'));
      await server.stop({ keep: rep.failed > 0 });
    }
  }
  console.log(`second factor: ${rep.passed} passed, ${rep.failed} failed`);
  process.exitCode = rep.failed === 0 ? 0 : 1;
  setTimeout(() => process.exit(process.exitCode), 200).unref();
}

await main();
