#!/usr/bin/env node
// An upstream MCP server behind Gatehouse: the reference server
// @modelcontextprotocol/server-everything in its Streamable HTTP mode is registered with
// `gatehouse upstream add everything --url …` (run.sh); the official TypeScript SDK 1.x client,
// holding only a Gatehouse API key, finds its tools as `everything__TOOL` after the built-in
// ones and calls `everything__echo` through Gatehouse.
//
// Env: MCP_URL, GATEHOUSE_WRITE_KEY (an API key with mcp:write, made by run.sh with the CLI).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Reporter, assert, env, runScript, settings } from './lib/harness.mjs';

const rep = new Reporter('upstream-everything');
const s = settings();
const key = env('GATEHOUSE_WRITE_KEY');

await runScript(rep, async () => {
  const client = new Client({ name: 'gatehouse-interop-upstream', version: '1.32.2' });
  const transport = new StreamableHTTPClientTransport(new URL(s.mcpUrl), {
    requestInit: { headers: { 'X-Api-Key': key } },
  });
  await rep.check('connect', () => client.connect(transport), { fatal: true });
  await rep.check('tools/list has the upstream tools as everything__TOOL after the built-in ones', async () => {
    let names = [];
    // The running server picks the registry change up within a second.
    for (let i = 0; i < 30; i += 1) {
      names = (await client.listTools()).tools.map((t) => t.name);
      if (names.includes('everything__echo')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert(names.includes('everything__echo'), `everything__echo missing: ${names.join(', ')}`);
    const first = names.findIndex((n) => n.startsWith('everything__'));
    assert(names.slice(first).every((n) => n.startsWith('everything__')), `order: ${names.join(', ')}`);
    assert(names.indexOf('list_projects') < first, `built-in tools first: ${names.join(', ')}`);
    assert(names.every((n) => /^[A-Za-z0-9_-]{1,64}$/.test(n)), `a name outside [A-Za-z0-9_-]{1,64}: ${names.join(', ')}`);
    return `${names.length - first} upstream tool(s)`;
  });
  await rep.check('tools/call everything__echo through Gatehouse', async () => {
    const result = await client.callTool({ name: 'everything__echo', arguments: { message: 'through the gate' } });
    assert(!result.isError, `isError: ${JSON.stringify(result)}`);
    const text = result.content?.[0]?.text;
    assert(text === 'Echo: through the gate', `answer: ${JSON.stringify(result)}`);
    return text;
  });
  await client.close().catch(() => {});
});
