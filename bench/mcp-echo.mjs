// MCP helpers of bench/run.sh for the forwarding workloads (server-everything's `echo`):
//
//   node mcp-echo.mjs session URL SECONDS
//       opens a Streamable HTTP session at URL (initialize, then notifications/initialized),
//       retrying until SECONDS have passed, checks one tools/call of `echo` in it and prints
//       the Mcp-Session-Id (server-everything and mcp-proxy keep state per session)
//   node mcp-echo.mjs gatehouse URL TOKEN TOOL SECONDS
//       calls TOOL (e.g. `ev__echo`) through Gatehouse with the bearer TOKEN until it answers
//       the echo (a newly added upstream is picked up within a second or two), or fails
//
// Exit status 0 on success; otherwise a message on stderr.
const MESSAGE = 'Bench project';
const EXPECT = `Echo: ${MESSAGE}`;
const [cmd, url, ...rest] = process.argv.slice(2);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(headers, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, session: res.headers.get('mcp-session-id'), text: await res.text() };
}

const echoCall = (name, meta) => ({
  jsonrpc: '2.0',
  id: 2,
  method: 'tools/call',
  params: { name, arguments: { message: MESSAGE }, ...(meta ? { _meta: meta } : {}) },
});
const good = (r) => r.status === 200 && r.text.includes(EXPECT) && !r.text.includes('"isError":true');

async function retry(seconds, attempt) {
  const until = Date.now() + seconds * 1000;
  let last;
  for (;;) {
    try {
      const out = await attempt();
      if (out.ok) return out;
      last = out.why;
    } catch (e) {
      last = e.message;
    }
    if (Date.now() > until) throw new Error(`${url}: ${last}`);
    await sleep(200);
  }
}

try {
  if (cmd === 'session') {
    const [seconds = '30'] = rest;
    const out = await retry(Number(seconds), async () => {
      const init = await post(
        { 'mcp-protocol-version': '2025-11-25' },
        {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'gatehouse-bench', version: '1' } },
        },
      );
      if (init.status !== 200 || !init.session) return { ok: false, why: `initialize: ${init.status} ${init.text.slice(0, 200)}` };
      const h = { 'mcp-session-id': init.session, 'mcp-protocol-version': '2025-11-25' };
      await post(h, { jsonrpc: '2.0', method: 'notifications/initialized' });
      const call = await post(h, echoCall('echo'));
      if (!good(call)) return { ok: false, why: `tools/call: ${call.status} ${call.text.slice(0, 200)}` };
      return { ok: true, session: init.session };
    });
    console.log(out.session);
  } else if (cmd === 'gatehouse') {
    const [token, tool, seconds = '30'] = rest;
    await retry(Number(seconds), async () => {
      const r = await post(
        {
          authorization: `Bearer ${token}`,
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': tool,
        },
        echoCall(tool, {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
        }),
      );
      return good(r) ? { ok: true } : { ok: false, why: `${r.status} ${r.text.slice(0, 300)}` };
    });
  } else {
    console.error('usage: mcp-echo.mjs session URL [SECONDS] | gatehouse URL TOKEN TOOL [SECONDS]');
    process.exit(2);
  }
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
