#!/usr/bin/env node
// Official TypeScript SDK 1.x client against Gatehouse with the credentials that need no
// browser: an API key sent as an `X-Api-Key` header (through the transport's
// `requestInit.headers`), and a personal MCP URL (`<MCP path>/<secret>`, no header at all).
// Each lists the tools and calls `list_projects`.
//
// Env: MCP_URL, PROJECT_ID, GATEHOUSE_API_KEY, GATEHOUSE_PERSONAL_URL (made by run.sh with the CLI).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Reporter, assert, env, runScript, settings, structured } from './lib/harness.mjs';

const rep = new Reporter('sdk-v1-credentials');
const s = settings();
const apiKey = env('GATEHOUSE_API_KEY');
const personalUrl = env('GATEHOUSE_PERSONAL_URL');
const clientInfo = { name: 'gatehouse-interop-sdk-v1-credentials', version: '1.32.2' };

/** Connects, lists the tools and calls list_projects; both credentials are read-only. */
async function exercise(label, transport) {
  const client = new Client(clientInfo);
  await rep.check(`${label}: connect`, () => client.connect(transport), { fatal: true });
  await rep.check(`${label}: tools/list shows the read tools only`, async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert(names.includes('list_projects'), `list_projects missing: ${names.join(', ')}`);
    assert(!names.includes('create_note'), `a read-only credential lists create_note: ${names.join(', ')}`);
    return names.join(', ');
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
}

await runScript(rep, async () => {
  rep.info(`server ${s.mcpUrl}`);
  await exercise(
    'X-Api-Key header',
    new StreamableHTTPClientTransport(new URL(s.mcpUrl), {
      requestInit: { headers: { 'X-Api-Key': apiKey } },
    }),
  );
  const url = new URL(personalUrl);
  assert(url.pathname.startsWith(`${new URL(s.mcpUrl).pathname}/gate_pu_`), `not a personal URL: ${url.pathname}`);
  await exercise('personal URL', new StreamableHTTPClientTransport(url));
});
