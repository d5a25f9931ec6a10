#!/usr/bin/env node
// Official TypeScript SDK 1.x stdio client (`StdioClientTransport`) launching
// `gatehouse stdio`, as Claude Desktop or Cursor would: the API key in GATEHOUSE_API_KEY, the
// database in DATABASE_URL. Lists the tools and calls `list_projects`.
//
// Env: GATEHOUSE_BIN, DATABASE_URL, GATEHOUSE_API_KEY, PROJECT_ID (set by run.sh).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { Reporter, assert, env, runScript, structured } from './lib/harness.mjs';

const rep = new Reporter('sdk-v1-stdio');
const bin = env('GATEHOUSE_BIN');
const projectId = env('PROJECT_ID');

await runScript(rep, async () => {
  const transport = new StdioClientTransport({
    command: bin,
    args: ['stdio'],
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: env('DATABASE_URL'),
      GATEHOUSE_API_KEY: env('GATEHOUSE_API_KEY'),
      RUST_LOG: 'info',
    },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name: 'gatehouse-interop-sdk-v1-stdio', version: '1.32.2' });
  await rep.check('connect (initialize over stdio)', () => client.connect(transport), { fatal: true });
  await rep.check('server identity', async () => {
    const info = client.getServerVersion();
    assert(info?.name === 'gatehouse', `serverInfo: ${JSON.stringify(info)}`);
    return `${info.name} ${info.version}`;
  });
  await rep.check('tools/list', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert(names.includes('list_projects') && names.includes('search_notes'), names.join(', '));
    return names.join(', ');
  });
  await rep.check('tools/call list_projects', async () => {
    const sc = structured(await client.callTool({ name: 'list_projects', arguments: {} }), 'list_projects');
    assert(
      sc.projects.some((p) => String(p.id) === String(projectId)),
      `project ${projectId} missing: ${JSON.stringify(sc)}`,
    );
    return `${sc.projects.length} project(s)`;
  });
  await client.close().catch(() => {});
  await rep.check('logs went to stderr', async () => {
    assert(stderr.includes('serving MCP over stdio'), `stderr: ${stderr.slice(0, 500)}`);
    return 'yes';
  });
});
