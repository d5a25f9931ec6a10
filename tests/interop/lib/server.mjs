// Starting a throwaway Gatehouse from Node: a free loopback port, a fresh
// SQLite file in a temp dir, the bootstrap account and one project, the same
// settings run.sh uses. tools.mjs (run.sh's helper) and the browser tests
// (tests/browser/) import this.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const BOOTSTRAP_EMAIL = 'alice@example.com';
export const BOOTSTRAP_PASSWORD = 'correct-horse-battery';

/** A loopback port nobody listens on right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves once GET url answers 200; rejects after `secs` seconds. */
export async function waitReady(url, secs = 60) {
  const deadline = Date.now() + Number(secs) * 1000;
  let last = 'no answer';
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.text();
      if (res.status === 200) return;
      last = `HTTP ${res.status}`;
    } catch (e) {
      last = e.cause?.code ?? e.message;
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready after ${secs}s (${last})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Starts `bin serve` on a fresh database and creates one project owned by the
 * bootstrap account. Returns {issuer, mcpUrl, email, password, projectId,
 * projectName, work, log(), stop()}. stop() kills the server and removes the
 * temp dir unless keep is true.
 */
export async function startGatehouse({ bin, projectName = 'Interop', env: extraEnv = {}, host = '127.0.0.1' } = {}) {
  const work = mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
  const port = await freePort();
  // `host` names the server (issuer, MCP URL); it listens on 127.0.0.1 either way. Two servers
  // of one test use 127.0.0.1 and localhost, so that their session cookies stay apart.
  const issuer = `http://${host}:${port}`;
  const mcpUrl = `${issuer}/mcp`;
  const env = {
    ...process.env,
    DATABASE_URL: `sqlite://${work}/gatehouse.db?mode=rwc`,
    GATEHOUSE_BIND: `127.0.0.1:${port}`,
    MCP_SERVER_URL: mcpUrl,
    GATEHOUSE_BOOTSTRAP_EMAIL: BOOTSTRAP_EMAIL,
    GATEHOUSE_BOOTSTRAP_PASSWORD: BOOTSTRAP_PASSWORD,
    GATEHOUSE_REGISTRATIONS_PER_HOUR: '10000',
    GATEHOUSE_REGISTRATION_BYTES_PER_HOUR: '104857600',
    ...extraEnv,
  };
  const logPath = join(work, 'server.log');
  const out = openSync(logPath, 'a');
  const child = spawn(bin, ['serve'], { env, stdio: ['ignore', out, out] });
  const log = () => {
    try {
      return readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  const stop = async ({ keep = false } = {}) => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    }
    if (!keep) rmSync(work, { recursive: true, force: true });
  };
  try {
    await waitReady(`http://127.0.0.1:${port}/readyz`, 60);
    const { stdout } = await promisify(execFile)(bin, ['project', 'add', projectName, '--owner', BOOTSTRAP_EMAIL], { env });
    const projectId = stdout.split('\n').map((l) => l.trim()).filter(Boolean).pop();
    if (!projectId) throw new Error('gatehouse project add printed no id');
    return { issuer, mcpUrl, port, env, email: BOOTSTRAP_EMAIL, password: BOOTSTRAP_PASSWORD, projectId, projectName, work, pid: child.pid, log, stop };
  } catch (err) {
    const tail = log().split('\n').slice(-20).join('\n');
    await stop({ keep: true });
    throw new Error(`${err.message}\n--- server log (${logPath}):\n${tail}`);
  }
}
