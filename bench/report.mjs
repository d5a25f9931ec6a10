// Summarises a run of bench/run.sh: prints the table (Markdown) and writes the results JSON.
//
//   node report.mjs RAW_RESULTS_JSON OUT_JSON
//
// Per workload, target and connection count, over the rounds: the median and spread (min–max)
// of correct responses per second (a non-2xx or wrong body is not counted, and shown as bad),
// the medians of p50 and p99, server CPU per request (process utime + stime over requests; for
// PostgreSQL also every postgres process; for the forwarding workloads the forwarder's own and,
// after "up", the upstream server's), and the ratio to the peer's median. For forwarding, the
// goals of issue 32 at c16: Gatehouse adds at most 0.5 ms at p50 and keeps at least 90 % of the
// direct throughput (HTTP upstream), and serves a stdio upstream at least 10x faster than
// mcp-proxy; they are reported, not enforced (a quick run on a debug build says nothing of speed).
import { readFileSync, writeFileSync } from 'node:fs';

const [rawPath, outPath] = process.argv.slice(2);
const raw = JSON.parse(readFileSync(rawPath, 'utf8'));

const PEER = { tools_call: 'sdk-v2', introspection: 'oidc', refresh: 'oidc', forward_http: 'everything', forward_stdio: 'mcp-proxy' };
const NAMES = {
  'gh-sqlite': 'Gatehouse SQLite',
  'gh-postgres': 'Gatehouse PostgreSQL',
  oidc: 'node-oidc-provider 9.13.3',
  'sdk-v1': 'TS SDK 1.32.2',
  'sdk-v2': 'TS SDK 2.4.0',
  everything: 'server-everything 2026.8.31, direct',
  'mcp-proxy': 'mcp-proxy 0.13.0',
};
const WORKLOADS = {
  floor: 'HTTP floor: POST /mcp without token (401)',
  tools_call: 'MCP tools/call',
  introspection: 'introspection (RFC 7662, Basic)',
  refresh: 'refresh-token rotation',
  forward_http: 'tools/call echo, HTTP upstream (server-everything)',
  forward_stdio: 'tools/call echo, stdio upstream served over HTTP',
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round1 = (x) => Math.round(x * 10) / 10;

function perRun(r) {
  const secs = r.wrk.duration_us / 1e6;
  const requests = Math.max(r.wrk.requests, 1);
  return {
    ok_per_s: r.wrk.ok / secs,
    p50_ms: r.wrk.p50_us / 1000,
    p99_ms: r.wrk.p99_us / 1000,
    bad: r.wrk.bad + r.wrk.socket_errors,
    server_cpu_us: r.server_cpu_us / requests,
    db_cpu_us: r.db_cpu_us / requests,
    upstream_cpu_us: (r.upstream_cpu_us || 0) / requests,
  };
}

const groups = new Map();
for (const r of raw.runs) {
  if (r.round.startsWith('flood')) continue;
  const key = `${r.workload}|${r.connections}|${r.target}`;
  if (!groups.has(key)) groups.set(key, { workload: r.workload, connections: r.connections, target: r.target, runs: [] });
  groups.get(key).runs.push(perRun(r));
}
const rows = [...groups.values()].map((g) => {
  const rps = g.runs.map((x) => x.ok_per_s);
  return {
    workload: g.workload,
    connections: g.connections,
    target: g.target,
    rounds: g.runs.length,
    ok_per_s_median: Math.round(median(rps)),
    ok_per_s_min: Math.round(Math.min(...rps)),
    ok_per_s_max: Math.round(Math.max(...rps)),
    p50_ms: round1(median(g.runs.map((x) => x.p50_ms))),
    p50_us: Math.round(median(g.runs.map((x) => x.p50_ms * 1000))),
    p99_ms: round1(median(g.runs.map((x) => x.p99_ms))),
    bad: g.runs.reduce((a, x) => a + x.bad, 0),
    server_cpu_us_per_req: Math.round(median(g.runs.map((x) => x.server_cpu_us))),
    db_cpu_us_per_req: g.target === 'gh-postgres' ? Math.round(median(g.runs.map((x) => x.db_cpu_us))) : undefined,
    upstream_cpu_us_per_req: g.workload.startsWith('forward_') && g.target !== 'everything'
      ? Math.round(median(g.runs.map((x) => x.upstream_cpu_us)))
      : undefined,
  };
});
const find = (w, c, t) => rows.find((r) => r.workload === w && r.connections === c && r.target === t);
for (const r of rows) {
  const peer = PEER[r.workload];
  if (peer && r.target.startsWith('gh-')) {
    const p = find(r.workload, r.connections, peer);
    if (p && p.ok_per_s_median > 0) r.ratio_to_peer = Math.round((r.ok_per_s_median / p.ok_per_s_median) * 100) / 100;
    if (r.workload === 'tools_call') {
      const v1 = find(r.workload, r.connections, 'sdk-v1');
      if (v1 && v1.ok_per_s_median > 0) r.ratio_to_sdk_v1 = Math.round((r.ok_per_s_median / v1.ok_per_s_median) * 100) / 100;
    }
  }
  if (r.workload === 'forward_http' && r.target.startsWith('gh-')) {
    const d = find('forward_http', r.connections, 'everything');
    if (d) r.added_p50_ms = Math.round((r.p50_us - d.p50_us) / 10) / 100;
  }
  if (r.workload === 'introspection' && r.target.startsWith('gh-')) {
    const f = find('floor', r.connections, 'gh-sqlite');
    if (f && f.ok_per_s_median > 0) r.share_of_floor = Math.round((r.ok_per_s_median / f.ok_per_s_median) * 100) / 100;
  }
}

// The flood: per target, rounds of tools/call c16 without then with the flood beside it;
// medians over the rounds of each side (ok/s and p99), the sign-in statuses summed.
const flood = raw.flood.map((f) => {
  const side = (prefix) =>
    raw.runs.filter((r) => r.round.startsWith(prefix) && r.target === f.target).map(perRun);
  const summary = (runs) => ({
    ok_per_s: Math.round(median(runs.map((r) => r.ok_per_s))),
    p99_ms: round1(median(runs.map((r) => r.p99_ms))),
    bad: runs.reduce((n, r) => n + r.bad, 0),
  });
  const a = summary(side('flood-off-'));
  const b = summary(side('flood-on-'));
  const statuses = {};
  for (const one of f.floods) {
    for (const [k, v] of Object.entries(one.statuses)) statuses[k] = (statuses[k] || 0) + v;
  }
  return {
    target: f.target,
    rounds: f.floods.length,
    without_flood: a,
    with_flood: b,
    throughput_kept: Math.round((b.ok_per_s / Math.max(a.ok_per_s, 1)) * 100) / 100,
    p99_change: Math.round((b.p99_ms / Math.max(a.p99_ms, 0.001) - 1) * 100) / 100,
    signin_attempts_per_s: round1(median(f.floods.map((one) => one.per_second))),
    signin_statuses: statuses,
    rss_after_flood_kb: f.rss_after_kb,
    rss_peak_kb: f.rss_peak_kb,
  };
});

// --- the table ------------------------------------------------------------------------------------
const mb = (kb) => (kb ? `${Math.round(kb / 1024)} MB` : '–');
const lines = [];
lines.push(
  `Gatehouse benchmark, ${raw.mode} mode, ${raw.build} build${raw.label ? ` (${raw.label})` : ''}, commit ${raw.commit}, ${raw.date}; ` +
    `${raw.rounds} round(s) of ${raw.duration_s} s at c${raw.connections.split(' ').join(' and c')}; ` +
    `${raw.machine.cpus} CPUs, load average at the end ${raw.machine.loadavg_at_end}; wrk ${raw.machine.wrk}, node ${raw.machine.node}, PostgreSQL ${raw.machine.postgres}`,
);
lines.push('');
lines.push('| workload | c | target | ok/s median | spread (min–max) | p50 ms | p99 ms | bad | CPU µs/req | vs peer |');
lines.push('|---|---|---|---|---|---|---|---|---|---|');
const order = ['floor', 'tools_call', 'introspection', 'refresh', 'forward_http', 'forward_stdio'];
const targets = ['gh-sqlite', 'gh-postgres', 'sdk-v2', 'sdk-v1', 'oidc', 'everything', 'mcp-proxy'];
const sorted = [...rows].sort(
  (a, b) =>
    order.indexOf(a.workload) - order.indexOf(b.workload) ||
    a.connections - b.connections ||
    targets.indexOf(a.target) - targets.indexOf(b.target),
);
for (const r of sorted) {
  let cpu = r.db_cpu_us_per_req !== undefined ? `${r.server_cpu_us_per_req} + PG ${r.db_cpu_us_per_req}` : `${r.server_cpu_us_per_req}`;
  if (r.upstream_cpu_us_per_req !== undefined) cpu += ` + up ${r.upstream_cpu_us_per_req}`;
  const vs = [];
  const peerName = { oidc: 'oidc-provider', 'sdk-v2': 'SDK 2.x', everything: 'direct', 'mcp-proxy': 'mcp-proxy' }[PEER[r.workload]];
  if (r.ratio_to_peer !== undefined) vs.push(`${r.ratio_to_peer}× ${peerName}`);
  if (r.added_p50_ms !== undefined) vs.push(`${r.added_p50_ms >= 0 ? '+' : ''}${r.added_p50_ms} ms p50`);
  if (r.ratio_to_sdk_v1 !== undefined) vs.push(`${r.ratio_to_sdk_v1}× SDK 1.x`);
  if (r.share_of_floor !== undefined) vs.push(`${Math.round(r.share_of_floor * 100)} % of floor`);
  lines.push(
    `| ${WORKLOADS[r.workload]} | ${r.connections} | ${NAMES[r.target]} | ${r.ok_per_s_median} | ${r.ok_per_s_min}–${r.ok_per_s_max} | ` +
      `${r.p50_ms} | ${r.p99_ms} | ${r.bad} | ${cpu} | ${vs.join(', ') || '–'} |`,
  );
}
lines.push('');
lines.push('| memory (RSS) | idle | after load | after sign-in flood | peak (VmHWM) |');
lines.push('|---|---|---|---|---|');
for (const t of targets.filter((t) => raw.rss_kb[t])) {
  const f = flood.find((x) => x.target === t);
  lines.push(`| ${NAMES[t]} | ${mb(raw.rss_kb[t].idle)} | ${mb(raw.rss_kb[t].after_load)} | ${f ? mb(f.rss_after_flood_kb) : '–'} | ${f ? mb(f.rss_peak_kb) : '–'} |`);
}
lines.push('');
lines.push('| tools/call c16 and a sign-in flood (c4, 250 addresses), medians of the rounds | ok/s without | ok/s with | kept | p99 ms without | p99 ms with | p99 change | sign-in attempts/s (statuses, all rounds) |');
lines.push('|---|---|---|---|---|---|---|---|');
for (const f of flood) {
  const change = Math.round(f.p99_change * 100);
  lines.push(
    `| ${NAMES[f.target]} | ${f.without_flood.ok_per_s} | ${f.with_flood.ok_per_s} | ${Math.round(f.throughput_kept * 100)} % | ` +
      `${f.without_flood.p99_ms} | ${f.with_flood.p99_ms} | ${change >= 0 ? '+' : ''}${change} % | ${f.signin_attempts_per_s} (${Object.entries(f.signin_statuses).map(([k, v]) => `${k}: ${v}`).join(', ')}) |`,
  );
}
// The forwarding goals at c16 (issue 32), per Gatehouse target measured.
const goals = [];
for (const t of ['gh-sqlite', 'gh-postgres']) {
  const h = find('forward_http', 16, t);
  if (h && h.ratio_to_peer !== undefined) {
    const ok = h.added_p50_ms <= 0.5 && h.ratio_to_peer >= 0.9;
    goals.push(
      `- HTTP upstream, ${NAMES[t]}, c16: adds ${h.added_p50_ms} ms at p50 (goal ≤ 0.5) and keeps ` +
        `${Math.round(h.ratio_to_peer * 100)} % of the direct throughput (goal ≥ 90 %): ${ok ? 'met' : 'NOT met'}` +
        (process.env.BENCH_UPSTREAM_CPU
          ? ` (server-everything alone on CPU ${process.env.BENCH_UPSTREAM_CPU}, Gatehouse and wrk on the others)`
          : ' (server-everything, Gatehouse and wrk sharing every CPU)'),
    );
  }
  const s = find('forward_stdio', 16, t);
  if (s && s.ratio_to_peer !== undefined) {
    goals.push(`- stdio upstream, ${NAMES[t]}, c16: ${s.ratio_to_peer}× mcp-proxy's throughput (goal ≥ 10×): ${s.ratio_to_peer >= 10 ? 'met' : 'NOT met'}`);
  }
}
if (goals.length) {
  lines.push('');
  lines.push(`Forwarding goals (${raw.build} build${raw.build === 'debug' ? ': says nothing about speed' : ''}):`);
  lines.push(...goals);
}
const bad = rows.reduce((a, r) => a + r.bad, 0) + flood.reduce((a, f) => a + f.without_flood.bad + f.with_flood.bad, 0);
lines.push('');
lines.push(bad === 0 ? 'Every response was checked and correct.' : `WARNING: ${bad} responses were wrong or failed (the "bad" column).`);
console.log(lines.join('\n'));

writeFileSync(
  outPath,
  `${JSON.stringify({ mode: raw.mode, build: raw.build, label: raw.label, commit: raw.commit, date: raw.date, duration_s: raw.duration_s, rounds: raw.rounds, machine: raw.machine, summary: sorted, forwarding_goals: goals, memory_kb: raw.rss_kb, flood, runs: raw.runs }, null, 1)}\n`,
);
process.exitCode = bad === 0 ? 0 : 1;
