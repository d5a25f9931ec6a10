#!/usr/bin/env node
// Small helpers for run.sh so it needs neither curl nor python:
//   node lib/tools.mjs free-port
//   node lib/tools.mjs wait-ready URL SECONDS   (exit 0 once URL answers 200)
import net from 'node:net';

const [cmd, ...rest] = process.argv.slice(2);

if (cmd === 'free-port') {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1', () => {
    const { port } = srv.address();
    srv.close(() => console.log(port));
  });
} else if (cmd === 'wait-ready') {
  const [url, secs = '60'] = rest;
  const deadline = Date.now() + Number(secs) * 1000;
  let last = 'no answer';
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.text();
      if (res.status === 200) process.exit(0);
      last = `HTTP ${res.status}`;
    } catch (e) {
      last = e.cause?.code ?? e.message;
    }
    if (Date.now() > deadline) {
      console.error(`${url} not ready after ${secs}s (${last})`);
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
} else {
  console.error('usage: tools.mjs free-port | wait-ready URL SECONDS');
  process.exit(2);
}
