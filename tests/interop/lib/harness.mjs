// Shared helpers for the Gatehouse interop harness: check reporting, a tiny
// cookie jar, the headless sign-in/consent form walker and an in-memory
// OAuthClientProvider usable with both the v1 SDK and the v2 client package.
//
// Nothing here depends on an SDK: the provider only implements the plain
// OAuthClientProvider shape both SDK generations share.

import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';

// ---------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------

export function env(name, fallback) {
  const v = process.env[name];
  if (v === undefined || v === '') {
    if (fallback !== undefined) return fallback;
    throw new Error(`environment variable ${name} is required`);
  }
  return v;
}

/** Common settings, all from the environment run.sh exports. */
export function settings() {
  const mcpUrl = env('MCP_URL');
  const issuer = env('ISSUER', new URL(mcpUrl).origin);
  return {
    mcpUrl,
    issuer,
    email: env('GATEHOUSE_EMAIL', 'alice@example.com'),
    password: env('GATEHOUSE_PASSWORD', 'correct-horse-battery'),
    projectId: process.env.PROJECT_ID || undefined,
    projectName: env('PROJECT_NAME', 'Interop'),
    // Never listened on: the walker stops at the 303 that points here.
    redirectUrl: env('REDIRECT_URL', 'http://127.0.0.1:1/callback'),
    verbose: !!process.env.INTEROP_VERBOSE,
  };
}

export const EXPECTED_TOOLS = [
  'list_projects',
  'get_project',
  'create_note',
  'get_note',
  'update_note',
  'search_notes',
  'export_project',
  'get_job',
];

// ---------------------------------------------------------------------------
// Check reporting
// ---------------------------------------------------------------------------

export class Reporter {
  constructor(label) {
    this.label = label;
    this.passed = 0;
    this.failed = 0;
  }

  pass(name, detail) {
    this.passed++;
    console.log(`  PASS ${this.label}: ${name}${detail ? ` (${detail})` : ''}`);
  }

  fail(name, err) {
    this.failed++;
    const msg = err instanceof Error ? err.message : String(err);
    console.log(`  FAIL ${this.label}: ${name}: ${msg}`);
    if (err instanceof Error && err.cause) console.log(`       cause: ${describe(err.cause)}`);
    if (process.env.INTEROP_VERBOSE && err instanceof Error && err.stack) console.log(err.stack);
  }

  info(msg) {
    console.log(`  INFO ${this.label}: ${msg}`);
  }

  /**
   * Runs one check. fn may return a string shown as detail. A failing check
   * returns undefined; with {fatal:true} it aborts the script (later checks
   * depend on it).
   */
  async check(name, fn, { fatal = false } = {}) {
    try {
      const out = await fn();
      this.pass(name, typeof out === 'string' ? out : undefined);
      return out === undefined ? true : out;
    } catch (err) {
      this.fail(name, err);
      if (fatal) throw new FatalCheck(name);
      return undefined;
    }
  }

  /** Final line of a client script; deliberately not the "N passed, N failed" shape. */
  finish() {
    const ok = this.failed === 0;
    console.log(`${ok ? 'OK' : 'FAILED'} ${this.label}: checks ok=${this.passed} failed=${this.failed}`);
    process.exitCode = ok ? 0 : 1;
    return ok;
  }
}

export class FatalCheck extends Error {
  constructor(name) {
    super(`aborting after failed check: ${name}`);
    this.name = 'FatalCheck';
  }
}

/** Wraps a whole script: prints the final line, exits non-zero on failure. */
export async function runScript(reporter, body) {
  try {
    await body();
  } catch (err) {
    if (err instanceof FatalCheck) {
      console.log(`  ${err.message}`);
    } else {
      reporter.fail('unexpected error', err);
    }
  }
  reporter.finish();
  // SDK transports may keep sockets alive; do not hang the harness.
  setTimeout(() => process.exit(process.exitCode ?? 0), 200).unref();
}

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

export function describe(v) {
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

export function short(s, n = 300) {
  s = typeof s === 'string' ? s : describe(s);
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

export function uniqueWord(prefix = 'interop') {
  return `${prefix}${randomBytes(6).toString('hex')}`;
}

// ---------------------------------------------------------------------------
// HTML helpers
// ---------------------------------------------------------------------------

const NAMED_ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };

export function decodeEntities(s) {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (m, body) => {
    if (body[0] === '#') {
      const cp = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return Number.isFinite(cp) ? String.fromCodePoint(cp) : m;
    }
    const v = NAMED_ENTITIES[body.toLowerCase()];
    return v === undefined ? m : v;
  });
}

function attrs(tag) {
  const out = {};
  const re = /([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*(?:=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;
  // skip the tag name
  const inner = tag.replace(/^<\s*[a-zA-Z0-9]+/, '').replace(/\/?>$/, '');
  let m;
  while ((m = re.exec(inner))) {
    const v = m[2] ?? m[3] ?? m[4] ?? '';
    out[m[1].toLowerCase()] = decodeEntities(v);
  }
  return out;
}

/**
 * Finds the <form> whose action matches `actionPath` and returns
 * {action, method, fields, buttons}. fields holds every named <input>
 * (hidden or not) with its value, radio buttons and checkboxes only when checked;
 * buttons holds [name, value] pairs.
 */
export function findForm(html, actionPath) {
  const formRe = /<form\b[^>]*>([\s\S]*?)<\/form>/gi;
  let m;
  const seen = [];
  while ((m = formRe.exec(html))) {
    const open = m[0].match(/^<form\b[^>]*>/i)[0];
    const a = attrs(open);
    seen.push(a.action);
    const action = a.action ?? '';
    const actionPathOnly = action.split('?')[0];
    if (actionPathOnly !== actionPath && !actionPathOnly.endsWith(actionPath)) continue;
    const fields = {};
    for (const input of m[1].match(/<input\b[^>]*>/gi) ?? []) {
      const ia = attrs(input);
      // As a browser submits: a radio button or checkbox only when it is checked (taking
      // every one made the last radio win: the consent page's "named projects" choice).
      const type = (ia.type ?? 'text').toLowerCase();
      if ((type === 'radio' || type === 'checkbox') && !('checked' in ia)) continue;
      if (ia.name) fields[ia.name] = ia.value ?? (type === 'checkbox' ? 'on' : '');
    }
    const buttons = [];
    for (const b of m[1].match(/<button\b[^>]*>/gi) ?? []) {
      const ba = attrs(b);
      if (ba.name) buttons.push([ba.name, ba.value ?? '']);
    }
    return { action, method: (a.method ?? 'get').toLowerCase(), fields, buttons };
  }
  return { missing: true, seen };
}

/** The brief's fallback: regex on name="X" value="(...)". */
export function hiddenValue(html, name) {
  const re = new RegExp(`name="${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"\\s+value="([^"]*)"`);
  const m = html.match(re);
  return m ? decodeEntities(m[1]) : undefined;
}

// ---------------------------------------------------------------------------
// Cookies
// ---------------------------------------------------------------------------

export class CookieJar {
  constructor() {
    this.cookies = new Map();
  }

  store(res) {
    const list = typeof res.headers.getSetCookie === 'function' ? res.headers.getSetCookie() : [];
    for (const line of list) {
      const [pair, ...attrsList] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const lower = attrsList.map((a) => a.trim().toLowerCase());
      const expired =
        lower.some((a) => a === 'max-age=0' || /^max-age=-/.test(a)) ||
        lower.some((a) => a.startsWith('expires=') && Date.parse(a.slice(8)) < Date.now());
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  has(name) {
    return this.cookies.has(name);
  }
}

// ---------------------------------------------------------------------------
// Headless "browser": sign-in + consent walker
// ---------------------------------------------------------------------------

async function httpGet(url, jar) {
  const headers = { accept: 'text/html' };
  const c = jar.header();
  if (c) headers.cookie = c;
  const res = await fetch(url, { method: 'GET', headers, redirect: 'manual' });
  jar.store(res);
  const body = await res.text();
  return { res, body };
}

async function httpPostForm(url, fields, jar, origin) {
  const headers = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'text/html',
    // A browser sends these on a same-origin form post.
    origin,
    referer: `${origin}/`,
  };
  const c = jar.header();
  if (c) headers.cookie = c;
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
  jar.store(res);
  const body = await res.text();
  return { res, body };
}

function isRedirect(status) {
  return status >= 300 && status < 400;
}

/**
 * Walks GET /oauth/authorize → 303 /signin → POST /signin → 303 next →
 * consent → POST decision=approve → 303 redirect_uri, purely over HTTP.
 *
 * Returns {callbackUrl, code, state, iss, steps, signedIn, consentShown}.
 * Throws with a precise message at the first deviation from the contract.
 * `jar` may be passed to reuse a signed-in browser session.
 */
export async function walkAuthorization(authorizationUrl, opts) {
  const { email, password, decision = 'approve', log = () => {}, returnErrors = false } = opts;
  const jar = opts.jar ?? new CookieJar();
  const start = new URL(authorizationUrl);
  const origin = start.origin;
  const steps = [];
  let signedIn = false;
  let consentShown = false;
  let url = start.href;

  for (let hop = 0; hop < 12; hop++) {
    const { res, body } = await httpGet(url, jar);
    steps.push(`GET ${new URL(url).pathname} -> ${res.status}`);
    if (isRedirect(res.status)) {
      const loc = res.headers.get('location');
      if (!loc) throw new Error(`GET ${url} answered ${res.status} without Location`);
      const next = new URL(loc, url);
      if (next.origin !== origin) return finish(next);
      if (res.status !== 303 && res.status !== 302) log(`note: GET ${new URL(url).pathname} answered ${res.status} (contract says 303)`);
      url = next.href;
      continue;
    }
    if (res.status !== 200) {
      throw new Error(`GET ${url} answered ${res.status}: ${short(body)}`);
    }

    // A page: sign-in or consent.
    const signin = findForm(body, '/signin');
    if (!signin.missing) {
      if (signedIn) throw new Error('sign-in form shown again after a successful sign-in');
      const fields = { ...signin.fields };
      for (const k of ['csrf_token', 'next']) {
        if (fields[k] === undefined) {
          const v = hiddenValue(body, k);
          if (v === undefined) throw new Error(`sign-in form lacks hidden input "${k}"`);
          fields[k] = v;
        }
      }
      if (!('email' in signin.fields)) log('note: sign-in form has no input named "email"');
      if (!('password' in signin.fields)) log('note: sign-in form has no input named "password"');
      fields.email = email;
      fields.password = password;
      if (!jar.has('gatehouse_session') && !jar.has('gatehouse_csrf')) log('note: no session or CSRF cookie before posting the sign-in form');
      const target = new URL(signin.action || '/signin', url).href;
      const r = await httpPostForm(target, fields, jar, origin);
      steps.push(`POST ${new URL(target).pathname} -> ${r.res.status}`);
      if (!isRedirect(r.res.status)) {
        throw new Error(`POST /signin answered ${r.res.status} (expected 303 to next): ${short(r.body)}`);
      }
      const loc = r.res.headers.get('location');
      if (!loc) throw new Error(`POST /signin answered ${r.res.status} without Location`);
      signedIn = true;
      const next = new URL(loc, target);
      if (next.origin !== origin) return finish(next);
      url = next.href;
      continue;
    }

    const consent = findForm(body, '/oauth/authorize/decision');
    if (!consent.missing) {
      consentShown = true;
      const fields = { ...consent.fields };
      for (const k of ['csrf_token', 'request']) {
        if (fields[k] === undefined) {
          const v = hiddenValue(body, k);
          if (v === undefined) throw new Error(`consent form lacks hidden input "${k}"`);
          fields[k] = v;
        }
      }
      const hasButton = consent.buttons.some(([n, v]) => n === 'decision' && v === decision);
      if (!hasButton) throw new Error(`consent form has no <button name="decision" value="${decision}"> (buttons: ${describe(consent.buttons)})`);
      fields.decision = decision;
      const target = new URL(consent.action || '/oauth/authorize/decision', url).href;
      const r = await httpPostForm(target, fields, jar, origin);
      steps.push(`POST ${new URL(target).pathname} -> ${r.res.status}`);
      if (!isRedirect(r.res.status)) {
        throw new Error(`POST /oauth/authorize/decision answered ${r.res.status} (expected 303 to redirect_uri): ${short(r.body)}`);
      }
      const loc = r.res.headers.get('location');
      if (!loc) throw new Error('decision answered without Location');
      const next = new URL(loc, target);
      if (next.origin !== origin) return finish(next);
      url = next.href;
      continue;
    }

    throw new Error(`GET ${url} answered 200 with neither a sign-in nor a consent form: ${short(body, 500)}`);
  }
  throw new Error(`too many hops; steps: ${steps.join(', ')}`);

  function finish(callback) {
    const p = callback.searchParams;
    if (p.has('error') && !returnErrors) {
      throw new Error(`authorization ended with error=${p.get('error')} error_description=${p.get('error_description') ?? ''} (steps: ${steps.join(', ')})`);
    }
    return {
      callbackUrl: callback.href,
      code: p.get('code'),
      state: p.get('state'),
      iss: p.get('iss'),
      steps,
      signedIn,
      consentShown,
      jar,
    };
  }
}

// ---------------------------------------------------------------------------
// OAuthClientProvider (in memory, headless)
// ---------------------------------------------------------------------------

export class HeadlessOAuthProvider {
  /**
   * @param {object} o
   * @param {string} o.redirectUrl
   * @param {string} o.clientName
   * @param {string} o.email
   * @param {string} o.password
   * @param {boolean} [o.interactive=true] false: any redirectToAuthorization is an error
   * @param {object} [o.clientInformation] pre-existing registration
   * @param {object} [o.tokens] pre-existing tokens
   */
  constructor(o) {
    this.o = o;
    this._clientInformation = o.clientInformation;
    this._tokens = o.tokens;
    this._codeVerifier = undefined;
    this._state = undefined;
    this.interactive = o.interactive ?? true;
    this.authorizationUrls = [];
    this.walks = [];
    this.savedTokens = [];
    this.registrations = 0;
    this.jar = o.jar ?? new CookieJar();
  }

  get redirectUrl() {
    return this.o.redirectUrl;
  }

  get clientMetadata() {
    return {
      client_name: this.o.clientName,
      redirect_uris: [this.o.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  state() {
    this._state = randomBytes(16).toString('base64url');
    return this._state;
  }

  clientInformation() {
    return this._clientInformation;
  }

  saveClientInformation(info) {
    this.registrations++;
    this._clientInformation = info;
  }

  tokens() {
    return this._tokens;
  }

  saveTokens(tokens) {
    this.savedTokens.push(tokens);
    this._tokens = tokens;
  }

  saveCodeVerifier(v) {
    this._codeVerifier = v;
  }

  codeVerifier() {
    if (!this._codeVerifier) throw new Error('no code verifier saved');
    return this._codeVerifier;
  }

  saveDiscoveryState(state) {
    this._discoveryState = state;
  }

  discoveryState() {
    return this._discoveryState;
  }

  invalidateCredentials(scope) {
    this.invalidated = [...(this.invalidated ?? []), scope];
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'client') this._clientInformation = undefined;
    if (scope === 'all' || scope === 'verifier') this._codeVerifier = undefined;
    if (scope === 'all' || scope === 'discovery') this._discoveryState = undefined;
  }

  async redirectToAuthorization(authorizationUrl) {
    const url = new URL(authorizationUrl);
    this.authorizationUrls.push(url.href);
    if (!this.interactive) {
      throw new Error(`unexpected interactive authorization (no form walking allowed here): ${url.href}`);
    }
    const walk = await walkAuthorization(url.href, {
      email: this.o.email,
      password: this.o.password,
      jar: this.jar,
      decision: this.o.decision ?? 'approve',
      returnErrors: this.o.decision === 'deny',
    });
    walk.authorizationUrl = url.href;
    walk.sentState = url.searchParams.get('state');
    this.walks.push(walk);
    this.lastWalk = walk;
  }
}

/**
 * Signs in with the given (wrong) credentials, starting from an authorization
 * URL, in a fresh browser. Returns {status, location, stillAnonymous}:
 * stillAnonymous tells whether GET authorize afterwards still sends us to /signin.
 */
export async function badSignin(authorizationUrl, email, password) {
  const jar = new CookieJar();
  const origin = new URL(authorizationUrl).origin;
  const first = await httpGet(authorizationUrl, jar);
  assert(isRedirect(first.res.status), `GET authorize answered ${first.res.status}, expected 303 to /signin`);
  const signinUrl = new URL(first.res.headers.get('location'), authorizationUrl).href;
  assert(new URL(signinUrl).pathname === '/signin', `redirected to ${signinUrl}, expected /signin`);
  const page = await httpGet(signinUrl, jar);
  const form = findForm(page.body, '/signin');
  assert(!form.missing, 'no sign-in form');
  const r = await httpPostForm(new URL(form.action || '/signin', signinUrl).href, { ...form.fields, email, password }, jar, origin);
  const again = await httpGet(authorizationUrl, jar);
  const loc = again.res.headers.get('location') ?? '';
  return {
    status: r.res.status,
    location: r.res.headers.get('location'),
    stillAnonymous: isRedirect(again.res.status) && new URL(loc, authorizationUrl).pathname === '/signin',
  };
}

/** Writes the token file the auth proxy reads (JSON). */
export function writeTokenFile(path, data) {
  writeFileSync(path, JSON.stringify(data, null, 2) + '\n', { mode: 0o600 });
}

// ---------------------------------------------------------------------------
// Raw HTTP probes shared by both client scripts
// ---------------------------------------------------------------------------

/** POST /mcp without a token must be a 401 pointing at the PRM (contract). */
export async function probeUnauthenticated(mcpUrl, issuer) {
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'probe', version: '0' } },
    }),
  });
  await res.text();
  assert(res.status === 401, `expected 401, got ${res.status}`);
  const wa = res.headers.get('www-authenticate') ?? '';
  assert(/^Bearer\b/i.test(wa), `WWW-Authenticate is not a Bearer challenge: ${JSON.stringify(wa)}`);
  const rm = wa.match(/resource_metadata="([^"]*)"/);
  const expectedRm = `${issuer}/.well-known/oauth-protected-resource${new URL(mcpUrl).pathname}`;
  assert(rm, `WWW-Authenticate lacks resource_metadata: ${JSON.stringify(wa)}`);
  assert(rm[1] === expectedRm, `resource_metadata is ${rm[1]}, expected ${expectedRm}`);
  const sc = wa.match(/scope="([^"]*)"/);
  assert(sc, `WWW-Authenticate lacks scope: ${JSON.stringify(wa)}`);
  const scopes = sc[1].split(' ').sort().join(' ');
  assert(scopes === 'mcp:read mcp:write', `scope is "${sc[1]}", expected "mcp:read mcp:write"`);
  return wa;
}

/** Raw refresh-token grant; returns {status, body}. */
export async function rawRefresh(tokenEndpoint, clientId, refreshToken, resource) {
  const params = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId });
  if (resource) params.set('resource', resource);
  const res = await fetch(tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: params.toString(),
  });
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, body, headers: res.headers };
}

export async function fetchJson(url) {
  const res = await fetch(url, { headers: { accept: 'application/json' } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}: ${short(text)}`);
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`GET ${url} did not return JSON: ${short(text)}`);
  }
}

/** Pulls the structured result of a tools/call, failing on isError. */
export function structured(result, toolName) {
  if (result?.isError) {
    const text = (result.content ?? []).map((c) => c.text ?? '').join(' ');
    throw new Error(`${toolName} returned isError: ${short(text)}`);
  }
  const sc = result?.structuredContent;
  if (!sc || typeof sc !== 'object') {
    throw new Error(`${toolName} returned no structuredContent: ${short(describe(result))}`);
  }
  return sc;
}

/** Finds a note id in a create_note structuredContent (shape-tolerant). */
export function noteIdOf(sc) {
  return sc.id ?? sc.note?.id ?? sc.note_id;
}

// ---------------------------------------------------------------------------
// Tool exercise shared by both client generations
// ---------------------------------------------------------------------------

function argNameFor(tool, candidates) {
  const props = Object.keys(tool?.inputSchema?.properties ?? {});
  return candidates.find((c) => props.includes(c)) ?? candidates[0];
}

/**
 * api: { listTools(): Promise<{tools}>, callTool(name, args): Promise<CallToolResult> }
 * Returns {projectId, noteId} or throws FatalCheck when a prerequisite fails.
 */
export async function exerciseTools(rep, api, s, { tag = 'interop' } = {}) {
  let tools;
  await rep.check(
    'tools/list returns the Gatehouse tools',
    async () => {
      const r = await api.listTools();
      tools = r.tools ?? [];
      const names = tools.map((t) => t.name);
      const missing = EXPECTED_TOOLS.filter((n) => !names.includes(n));
      assert(missing.length === 0, `missing tools ${missing.join(', ')}; got ${names.join(', ')}`);
      return `${names.length} tools`;
    },
    { fatal: true },
  );
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));

  let projectId;
  await rep.check(
    'list_projects shows the Interop project',
    async () => {
      const sc = structured(await api.callTool('list_projects', {}), 'list_projects');
      assert(Array.isArray(sc.projects), `structuredContent.projects is not an array: ${short(describe(sc))}`);
      const p = s.projectId ? sc.projects.find((x) => String(x.id) === String(s.projectId)) : sc.projects.find((x) => x.name === s.projectName);
      assert(p, `project ${s.projectId ?? s.projectName} not in ${short(describe(sc.projects))}`);
      assert(p.name === s.projectName, `project name is ${JSON.stringify(p.name)}, expected ${JSON.stringify(s.projectName)}`);
      projectId = p.id;
      return `id ${p.id}`;
    },
    { fatal: true },
  );

  const word = uniqueWord(tag);
  const title = `Interop note ${word}`;
  let noteId;
  await rep.check(
    'create_note stores a note',
    async () => {
      const sc = structured(
        await api.callTool('create_note', {
          project_id: projectId,
          title,
          body: `Written by the ${tag} client. Marker word: ${word}.`,
          tags: [tag],
        }),
        'create_note',
      );
      noteId = noteIdOf(sc);
      assert(noteId !== undefined, `no note id in ${short(describe(sc))}`);
      return `note ${noteId}`;
    },
    { fatal: true },
  );

  await rep.check('search_notes finds the new note', async () => {
    let last;
    for (let i = 0; i < 10; i++) {
      const sc = structured(await api.callTool('search_notes', { project_id: projectId, query: word, limit: 10 }), 'search_notes');
      assert(Array.isArray(sc.results), `structuredContent.results is not an array: ${short(describe(sc))}`);
      last = sc.results;
      const hit = sc.results.find((r) => String(noteIdOf(r) ?? r.note?.id) === String(noteId));
      if (hit) return `${sc.results.length} result(s)`;
      await new Promise((r) => setTimeout(r, 300));
    }
    throw new Error(`note ${noteId} not among results for "${word}": ${short(describe(last))}`);
  });

  await rep.check('get_note returns the note', async () => {
    const arg = argNameFor(byName.get_note, ['note_id', 'id']);
    const args = { [arg]: noteId };
    const props = Object.keys(byName.get_note?.inputSchema?.properties ?? {});
    if (props.includes('project_id')) args.project_id = projectId;
    const sc = structured(await api.callTool('get_note', args), 'get_note');
    const n = sc.note ?? sc;
    assert(String(n.id) === String(noteId), `id is ${n.id}, expected ${noteId}`);
    assert(n.title === title, `title is ${JSON.stringify(n.title)}, expected ${JSON.stringify(title)}`);
  });

  return { projectId, noteId, tools };
}
