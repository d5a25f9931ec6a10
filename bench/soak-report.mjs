// Summarises a run of bench/soak.sh: prints, per database, the samples as a table (Markdown) and
// whether database size and resident memory levelled off, and writes the results JSON.
//
//   node soak-report.mjs RAW_JSON OUT_JSON
//
// "Levelled off" compares the highest value of the last third of the load with the highest of
// the middle third: growth of at most 10 % counts as level (the first third is the climb to
// the steady state, where rows are added before any is old enough to go). A run with fewer
// than six samples under load is too short to say.
import { readFileSync, writeFileSync } from 'node:fs';

const [rawPath, outPath] = process.argv.slice(2);
const raw = JSON.parse(readFileSync(rawPath, 'utf8'));
const LEVEL = 0.1;

const mb = (bytes) => (bytes == null ? '–' : (bytes / 1048576).toFixed(1));
// The highest of the figures taken (a sample the database did not answer is null).
const max = (xs) => xs.reduce((a, b) => (b == null ? a : Math.max(a, b)), 0);

function plateau(load, pick) {
  if (load.length < 6) return { verdict: 'too short to say' };
  const third = Math.floor(load.length / 3);
  const middle = max(load.slice(third, 2 * third).map(pick));
  const last = max(load.slice(2 * third).map(pick));
  const growth = middle > 0 ? last / middle - 1 : 0;
  return {
    middle_third_max: middle,
    last_third_max: last,
    growth: Math.round(growth * 1000) / 1000,
    verdict: growth <= LEVEL ? 'levelled off' : 'still growing',
  };
}

const lines = [];
lines.push(
  `Gatehouse soak, ${raw.mode} mode, ${raw.build} build, commit ${raw.commit}, ${raw.date}; retention ${raw.retention_s} s ` +
    `(audit and credentials), pruning every ${raw.upkeep_s} s, blocks of ${raw.block_s} s at c${raw.connections}; ` +
    `${raw.machine.cpus} CPUs, load average at the end ${raw.machine.loadavg_at_end}`,
);
const summary = [];
for (const d of raw.databases) {
  const columns = d.columns.split(' ');
  const load = d.samples.filter((s) => s.phase === 'load');
  const size = plateau(load, (s) => s.db_bytes);
  const rss = plateau(load, (s) => s.rss_kb);
  const answered = d.samples.filter((s) => s.db_bytes != null && s.rows.length > 0);
  const last = answered[answered.length - 1] || { db_bytes: null, rss_kb: 0, rows: [] };
  summary.push({
    database: d.database,
    load_seconds: d.load_seconds,
    tool_calls: d.tool_calls,
    rotations: d.rotations,
    signins: d.signins,
    registrations: d.registrations,
    authorizations: d.authorizations,
    tool_calls_per_s: Math.round(d.tool_calls / Math.max(d.load_seconds, 1)),
    rotations_per_s: Math.round(d.rotations / Math.max(d.load_seconds, 1)),
    db_bytes_peak: max(d.samples.map((s) => s.db_bytes)),
    db_bytes_end: last.db_bytes,
    rss_kb_peak: max(d.samples.map((s) => s.rss_kb)),
    rss_kb_end: d.samples.length ? d.samples[d.samples.length - 1].rss_kb : null,
    samples_unanswered: d.samples.length - answered.length,
    db_size: size,
    rss: rss,
    rows_end: Object.fromEntries(columns.map((c, i) => [c, last.rows[i]])),
  });
  lines.push('');
  lines.push(
    `${d.database === 'sqlite' ? 'SQLite (file + WAL)' : 'PostgreSQL (pg_database_size)'}: ${d.tool_calls} tool calls, ` +
      `${d.rotations} rotations, ${d.signins} sign-ins, ${d.registrations} registrations, ${d.authorizations} authorizations ` +
      `in ${d.load_seconds} s of load; ${d.prune_log_lines} "pruned" log lines` +
      (answered.length < d.samples.length ? `; ${d.samples.length - answered.length} samples the database did not answer (–)` : ''),
  );
  lines.push('');
  lines.push(`| t s | phase | tool calls | rotations | DB MB | RSS MB | ${columns.join(' | ')} |`);
  lines.push(`|---|---|---|---|---|---|${columns.map(() => '---|').join('')}`);
  // At most 40 rows: every k-th sample, and always the last.
  const k = Math.max(1, Math.ceil(d.samples.length / 40));
  d.samples.forEach((s, i) => {
    if (i % k !== 0 && i !== d.samples.length - 1) return;
    lines.push(
      `| ${s.t.toFixed(0)} | ${s.phase} | ${s.tool_calls} | ${s.rotations} | ${mb(s.db_bytes)} | ${(s.rss_kb / 1024).toFixed(1)} | ` +
        `${columns.map((_, j) => (s.rows[j] ?? '–')).join(' | ')} |`,
    );
  });
  const say = (what, p, unit) =>
    p.growth === undefined
      ? `${what}: ${p.verdict}`
      : `${what}: ${p.verdict} (highest in the last third of the load ${unit(p.last_third_max)}, in the middle third ` +
        `${unit(p.middle_third_max)}: ${p.growth >= 0 ? '+' : ''}${Math.round(p.growth * 100)} %)`;
  lines.push('');
  lines.push(`- ${say('database size', size, (b) => `${mb(b)} MB`)}`);
  lines.push(`- ${say('resident memory', rss, (kb) => `${(kb / 1024).toFixed(1)} MB`)}`);
}
console.log(lines.join('\n'));
writeFileSync(outPath, `${JSON.stringify({ ...raw, summary }, null, 1)}\n`);
