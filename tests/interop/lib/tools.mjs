#!/usr/bin/env node
// Small helpers for run.sh so it needs neither curl nor python:
//   node lib/tools.mjs free-port
//   node lib/tools.mjs wait-ready URL SECONDS   (exit 0 once URL answers 200)
import { freePort, waitReady } from './server.mjs';

const [cmd, ...rest] = process.argv.slice(2);

if (cmd === 'free-port') {
  console.log(await freePort());
} else if (cmd === 'wait-ready') {
  const [url, secs = '60'] = rest;
  try {
    await waitReady(url, secs);
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
} else {
  console.error('usage: tools.mjs free-port | wait-ready URL SECONDS');
  process.exit(2);
}
