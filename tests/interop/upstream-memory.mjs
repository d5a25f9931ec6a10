#!/usr/bin/env node
// A stdio upstream behind Gatehouse: the reference server @modelcontextprotocol/server-memory,
// registered with `gatehouse upstream add memory --command 'node …/server-memory/dist/index.js'
// --env MEMORY_FILE_PATH=…` (run.sh), runs as Gatehouse's child process; the official
// TypeScript SDK 1.x client, holding only a Gatehouse API key, stores an entity through
// `memory__create_entities` and finds it with `memory__search_nodes`. Its destructive tools
// (delete_*) stay hidden, and the memory file lands where --env said (the child got that
// variable, and no other of Gatehouse's).
//
// Env: MCP_URL, GATEHOUSE_WRITE_KEY (an API key with mcp:write), MEMORY_FILE (the --env path).

import { existsSync, readFileSync } from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Reporter, assert, env, runScript, settings } from './lib/harness.mjs';

const rep = new Reporter('upstream-memory');
const s = settings();
const key = env('GATEHOUSE_WRITE_KEY');
const memoryFile = env('MEMORY_FILE');

await runScript(rep, async () => {
  const client = new Client({ name: 'gatehouse-interop-upstream-stdio', version: '1.32.2' });
  const transport = new StreamableHTTPClientTransport(new URL(s.mcpUrl), {
    requestInit: { headers: { 'X-Api-Key': key } },
  });
  await rep.check('connect', () => client.connect(transport), { fatal: true });
  await rep.check('tools/list has server-memory tools as memory__TOOL, its delete_* tools hidden', async () => {
    let names = [];
    // The child process starts on first use; the registry change arrives within a second.
    for (let i = 0; i < 75; i += 1) {
      names = (await client.listTools()).tools.map((t) => t.name);
      if (names.includes('memory__search_nodes')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const upstream = names.filter((n) => n.startsWith('memory__'));
    for (const n of ['memory__create_entities', 'memory__read_graph', 'memory__search_nodes']) {
      assert(upstream.includes(n), `${n} missing: ${names.join(', ')}`);
    }
    assert(!upstream.some((n) => n.includes('delete')), `a destructive tool is listed: ${upstream.join(', ')}`);
    return upstream.join(', ');
  });
  await rep.check('tools/call memory__create_entities then memory__search_nodes through Gatehouse', async () => {
    const created = await client.callTool({
      name: 'memory__create_entities',
      arguments: { entities: [{ name: 'Gatehouse', entityType: 'server', observations: ['guards the door'] }] },
    });
    assert(!created.isError, `create_entities: ${JSON.stringify(created)}`);
    const found = await client.callTool({ name: 'memory__search_nodes', arguments: { query: 'door' } });
    assert(!found.isError, `search_nodes: ${JSON.stringify(found)}`);
    const text = JSON.stringify(found.content ?? found.structuredContent);
    assert(text.includes('Gatehouse') && text.includes('guards the door'), `search_nodes: ${text}`);
    return 'entity stored and found';
  });
  await rep.check('the child wrote the memory file named by --env MEMORY_FILE_PATH', async () => {
    assert(existsSync(memoryFile), `${memoryFile} missing`);
    const text = readFileSync(memoryFile, 'utf8');
    assert(text.includes('guards the door'), `contents: ${text.slice(0, 200)}`);
    return memoryFile;
  });
  await client.close().catch(() => {});
});
