// A sign-in flood: CONCURRENCY workers post wrong passwords to /signin for SECONDS, each attempt
// from the next of 250 loopback source addresses (127.0.0.2 …) and for one of 1,000 emails (the
// benchmark account's among them), as a password-guessing attack from many hosts would. Each
// attempt is GET /signin (session cookie and CSRF token) then POST /signin.
//
//   node signin-flood.mjs ISSUER EMAIL CONCURRENCY SECONDS
//
// Prints one line: FLOOD_RESULT {"attempts", "seconds", "per_second", "statuses": {"303": n, …}}.
import http from 'node:http';
import { hiddenValue } from '../tests/interop/lib/harness.mjs';

const [issuer, email, concArg, secsArg] = process.argv.slice(2);
const base = new URL(issuer);
const concurrency = Number(concArg);
const deadline = Date.now() + Number(secsArg) * 1000;
const ADDRESSES = 250;
const agents = Array.from(
  { length: ADDRESSES },
  (_, i) => new http.Agent({ keepAlive: true, maxSockets: concurrency, localAddress: `127.0.0.${i + 2}` }),
);

function request(agent, method, path, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: base.hostname, port: base.port, method, path, headers, agent, timeout: 30_000 },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

const statuses = {};
let attempts = 0;
let next = 0;
const started = Date.now();

async function worker() {
  while (Date.now() < deadline) {
    const n = next++;
    const agent = agents[n % ADDRESSES];
    const who = n % 10 === 0 ? email : `flood-${n % 1000}@example.com`;
    try {
      const page = await request(agent, 'GET', '/signin', { accept: 'text/html' });
      const cookie = (page.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]).join('; ');
      const csrf = hiddenValue(page.body, 'csrf_token') ?? '';
      const form = new URLSearchParams({ csrf_token: csrf, next: '/', email: who, password: `wrong-password-${n}` });
      const res = await request(
        agent,
        'POST',
        '/signin',
        {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'text/html',
          origin: base.origin,
          referer: `${base.origin}/signin`,
          cookie,
        },
        form.toString(),
      );
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    } catch (e) {
      statuses.error = (statuses.error ?? 0) + 1;
    }
    attempts++;
  }
}

await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (Date.now() - started) / 1000;
console.log(`FLOOD_RESULT ${JSON.stringify({ attempts, seconds, per_second: Math.round((attempts / seconds) * 10) / 10, statuses })}`);
for (const a of agents) a.destroy();
