#!/usr/bin/env bash
# The soak benchmark (issue 39, "Bounded growth"): months of traffic compressed into minutes
# against one server per database, with retention short enough to watch, while the database's
# size and the server's resident memory are sampled. Run it to see both level off once the
# upkeep task deletes as much per round as the load adds. See docs/benchmarks.md, "Soak".
#
#   bench/soak.sh            SOAK_TOOL_CALLS (default 1,000,000) tool calls and SOAK_ROTATIONS
#                            (default 100,000) refresh-token rotations per database, with a
#                            sign-in, a dynamic registration and 1 + SOAK_CONNECTIONS
#                            authorizations every block; then SOAK_TAIL s of sampling without load
#   bench/soak.sh --quick    about two minutes per database: at most 40 s of load (retention 15 s,
#                            pruning every 3 s), then the tail (84 s). Shorter than the access
#                            tokens' 60 s life plus retention, so the size cannot level off under
#                            load; it proves the soak works and shows pruning catch up in the tail
#
# The load runs in blocks of SOAK_BLOCK s: each block first walks the real OAuth flow
# (gatehouse-tokens.mjs: registration, password sign-in, consent, code redemption) for a fresh
# access token and SOAK_CONNECTIONS refresh chains, then wrk runs MCP tools/call (list_projects,
# one audit row each) and refresh-token rotation side by side for the block. Every response
# body is checked (bench/lua/bench.lua); a wrong one fails the run.
#
# Environment:
#   GATEHOUSE_BIN        server binary (default: the release build, built here)
#   SOAK_DATABASES       "sqlite postgres" (default both, one after the other)
#   BENCH_POSTGRES       PostgreSQL admin URL; a fresh database is created and dropped at the end
#                        (default postgres://postgres@127.0.0.1:5432/postgres)
#   SOAK_TOOL_CALLS, SOAK_ROTATIONS   counts to reach per database
#   SOAK_MAX_SECONDS     stop the load after this long even if a count is not reached (0: no cap;
#                        --quick: 40)
#   SOAK_RETENTION       seconds: GATEHOUSE_AUDIT_RETENTION_SECONDS and
#                        GATEHOUSE_CREDENTIAL_RETENTION_SECONDS (default 60; --quick 15)
#   SOAK_UPKEEP          seconds: GATEHOUSE_UPKEEP_INTERVAL (default 5; --quick 3)
#   SOAK_SAMPLE          seconds between samples (default 5; --quick 3)
#   SOAK_BLOCK           seconds per block of load (default 10; --quick 5)
#   SOAK_CONNECTIONS     wrk connections of each workload (default 8)
#   SOAK_TAIL            seconds sampled after the load (default: the access tokens' 60 s +
#                        retention + 3 upkeep rounds, so the last tokens of the load are gone)
#   BENCH_KEEP=1         keep the work directory
#
# Access tokens live 60 s (GATEHOUSE_ACCESS_TOKEN_TTL's minimum) so they expire within the run.
# Prints one table per database and writes bench/results/<UTC time>-<commit>-soak-<full|quick>.json.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$HERE"

MODE=full
if [ "${1:-}" = "--quick" ]; then MODE=quick; shift; fi
[ $# -eq 0 ] || { echo "usage: bench/soak.sh [--quick]" >&2; exit 2; }

if [ "$MODE" = quick ]; then
  TOOL_CALLS="${SOAK_TOOL_CALLS:-1000000}"; ROTATIONS="${SOAK_ROTATIONS:-100000}"
  MAX_SECONDS="${SOAK_MAX_SECONDS:-40}"; RETENTION="${SOAK_RETENTION:-15}"; UPKEEP="${SOAK_UPKEEP:-3}"
  SAMPLE="${SOAK_SAMPLE:-3}"; BLOCK="${SOAK_BLOCK:-5}"
else
  TOOL_CALLS="${SOAK_TOOL_CALLS:-1000000}"; ROTATIONS="${SOAK_ROTATIONS:-100000}"
  MAX_SECONDS="${SOAK_MAX_SECONDS:-0}"; RETENTION="${SOAK_RETENTION:-60}"; UPKEEP="${SOAK_UPKEEP:-5}"
  SAMPLE="${SOAK_SAMPLE:-5}"; BLOCK="${SOAK_BLOCK:-10}"
fi
CONNECTIONS="${SOAK_CONNECTIONS:-8}"
ACCESS_TTL=60
TAIL="${SOAK_TAIL:-$(( ACCESS_TTL + RETENTION + 3 * UPKEEP ))}"
DATABASES="${SOAK_DATABASES:-sqlite postgres}"
PG_ADMIN="${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}"
EMAIL="soak@example.com"
PASSWORD="soak-password-long-enough"

say() { printf '%s\n' "$*" >&2; }
die() { say "soak: $*"; exit 1; }

command -v wrk >/dev/null || die "wrk not found (apt-get install wrk)"
NODE="${NODE:-node}"
command -v "$NODE" >/dev/null || die "node not found"
for db in $DATABASES; do
  case "$db" in
    sqlite) command -v sqlite3 >/dev/null || die "sqlite3 not found (apt-get install sqlite3), needed to count rows" ;;
    postgres) command -v psql >/dev/null || die "psql not found (PostgreSQL client)" ;;
    *) die "unknown database $db (SOAK_DATABASES: sqlite postgres)" ;;
  esac
done

BUILD=given
if [ -z "${GATEHOUSE_BIN:-}" ]; then
  BUILD=release
  say "building the release binary ..."
  (cd "$ROOT" && cargo build --release --locked --bin gatehouse >&2)
  GATEHOUSE_BIN="$ROOT/target/release/gatehouse"
fi
[ -x "$GATEHOUSE_BIN" ] || die "no server binary at $GATEHOUSE_BIN"

WORK="$(mktemp -d -t gatehouse-soak.XXXXXX)"
PIDS=()
PG_DB=""
# stop_all: SIGTERM to every process started here, 5 s to exit, then SIGKILL to those left and
# their children (mcp-proxy 0.13.0 does not exit on SIGTERM while its stdio child runs)
stop_all() {
  local pid kids="" i alive
  for pid in "${PIDS[@]}"; do
    kids="$kids $( { pgrep -P "$pid" 2>/dev/null || true; } | tr '\n' ' ')"
    kill "$pid" 2>/dev/null || true
  done
  for i in $(seq 1 50); do
    alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  # shellcheck disable=SC2086
  for pid in "${PIDS[@]}" $kids; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
cleanup() {
  local rc=$?
  stop_all
  if [ -n "$PG_DB" ]; then
    psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    say "(work directory kept: $WORK)"
    if [ "$rc" -ne 0 ]; then
      for log in "$WORK"/*.log; do [ -f "$log" ] && { say "--- $(basename "$log") (last 15 lines)"; tail -n 15 "$log" >&2; }; done
    fi
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# create_database NAME : on the server of $PG_ADMIN, trying once a second for up to 60 s while it
# refuses connections (a shared server at its max_connections answers "too many clients")
create_database() {
  local i
  for i in $(seq 1 60); do
    psql -q "$PG_ADMIN" -c "CREATE DATABASE $1" >/dev/null 2>"$WORK/createdb.err" && return 0
    grep -q "too many clients\|starting up\|Connection refused" "$WORK/createdb.err" || break
    sleep 1
  done
  cat "$WORK/createdb.err" >&2
  return 1
}
free_port() { "$NODE" "$ROOT/tests/interop/lib/tools.mjs" free-port; }
wait_ready() { "$NODE" "$ROOT/tests/interop/lib/tools.mjs" wait-ready "$1" "${2:-60}" >&2; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
COUNTED="audit_events access_tokens refresh_tokens token_families authorization_codes oauth_clients rate_limits"

# db_bytes KIND TARGET : SQLite: the file and its WAL; PostgreSQL: pg_database_size
db_bytes() {
  case "$1" in
    sqlite) echo $(( $(stat -c %s "$2" 2>/dev/null || echo 0) + $(stat -c %s "$2-wal" 2>/dev/null || echo 0) )) ;;
    postgres) psql -tA "$2" -c 'SELECT pg_database_size(current_database())' ;;
  esac
}
# row_counts KIND TARGET : "n n n …" in the order of $COUNTED
row_counts() {
  local sql="" t
  for t in $COUNTED; do sql="${sql:+$sql, }(SELECT COUNT(*) FROM $t)"; done
  case "$1" in
    sqlite) sqlite3 -readonly -cmd '.timeout 5000' -separator ' ' "$2" "SELECT $sql" ;;
    postgres) psql -tA -F ' ' "$2" -c "SELECT $sql" ;;
  esac
}

# sampler KIND TARGET PID OUT : a JSON line every $SAMPLE s until $WORK/stop-sampler appears
# (a figure the database did not give, e.g. PostgreSQL refusing a connection, is null and no rows)
sampler() {
  local kind="$1" target="$2" pid="$3" out="$4" t0 now counts progress
  t0="$(date +%s%N)"
  while [ ! -e "$WORK/stop-sampler" ]; do
    now="$(date +%s%N)"
    counts="$(row_counts "$kind" "$target" 2>/dev/null | tr -s ' ' ',' || true)"
    progress="$(cat "$WORK/progress" 2>/dev/null || echo 'load 0 0 0')"
    read -r phase calls rotations blocks <<<"$progress"
    printf '{"t":%.1f,"phase":"%s","tool_calls":%s,"rotations":%s,"blocks":%s,"db_bytes":%s,"rss_kb":%s,"rows":[%s]}\n' \
      "$(awk -v a="$now" -v b="$t0" 'BEGIN {print (a - b) / 1e9}')" "$phase" "$calls" "$rotations" "$blocks" \
      "$(db_bytes "$kind" "$target" 2>/dev/null | grep -E '^[0-9]+$' || echo null)" "$(rss_kb "$pid")" "${counts:-}" >>"$out"
    sleep "$SAMPLE"
  done
}

# wrk_ok OUTPUT : the "ok" count of a BENCH_RESULT; fails on a wrong response
wrk_ok() {
  local result
  result="$(printf '%s\n' "$1" | sed -n 's/^BENCH_RESULT //p')"
  [ -n "$result" ] || die "no result from wrk: $1"
  "$NODE" -e '
    const r = JSON.parse(process.argv[1]);
    if (r.bad || r.socket_errors) { console.error(`wrong responses: ${process.argv[1]}`); process.exit(1); }
    console.log(r.ok);' "$result" || die "wrong responses in a block"
}

RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

soak_one() { # soak_one sqlite|postgres
  local kind="$1" db target port url pid
  case "$kind" in
    sqlite) target="$WORK/soak.db"; db="sqlite://$target?mode=rwc" ;;
    postgres)
      PG_DB="gatehouse_soak_$(date +%s)_$$"
      create_database "$PG_DB" || die "cannot create database $PG_DB (BENCH_POSTGRES=$PG_ADMIN)"
      db="${PG_ADMIN%/*}/$PG_DB"; target="$db" ;;
  esac
  port="$(free_port)"
  url="http://127.0.0.1:$port"
  GATEHOUSE_BIND="127.0.0.1:$port" MCP_SERVER_URL="$url/mcp" DATABASE_URL="$db" \
    GATEHOUSE_BOOTSTRAP_EMAIL="$EMAIL" GATEHOUSE_BOOTSTRAP_PASSWORD="$PASSWORD" \
    GATEHOUSE_QUOTA_CALLS_PER_HOUR=0 GATEHOUSE_ACCESS_TOKEN_TTL="$ACCESS_TTL" \
    GATEHOUSE_AUDIT_RETENTION_SECONDS="$RETENTION" GATEHOUSE_CREDENTIAL_RETENTION_SECONDS="$RETENTION" \
    GATEHOUSE_UPKEEP_INTERVAL="$UPKEEP" GATEHOUSE_REGISTRATIONS_PER_HOUR=1000000 \
    "$GATEHOUSE_BIN" serve >"$WORK/$kind.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_ready "$url/readyz" 60 || die "$kind: the server did not become ready"
  DATABASE_URL="$db" "$GATEHOUSE_BIN" project add "Bench project" --owner "$EMAIL" >/dev/null 2>>"$WORK/$kind.log" \
    || die "$kind: project add failed"
  say "$kind: server ready at $url (pid $pid); retention ${RETENTION} s, pruning every ${UPKEEP} s"

  local samples="$WORK/samples-$kind.jsonl"
  : >"$samples"
  rm -f "$WORK/stop-sampler"
  echo "load 0 0 0" >"$WORK/progress"
  sampler "$kind" "$target" "$pid" "$samples" &
  local sampler_pid=$!
  PIDS+=("$sampler_pid")

  local calls=0 rotations=0 blocks=0 start now dir out_calls out_rot pid_calls pid_rot
  start="$(date +%s)"
  while [ "$calls" -lt "$TOOL_CALLS" ] || [ "$rotations" -lt "$ROTATIONS" ]; do
    now="$(date +%s)"
    if [ "$MAX_SECONDS" -gt 0 ] && [ $(( now - start )) -ge "$MAX_SECONDS" ]; then
      say "$kind: SOAK_MAX_SECONDS=$MAX_SECONDS reached"
      break
    fi
    blocks=$(( blocks + 1 ))
    dir="$WORK/$kind-block-$blocks"
    mkdir -p "$dir"
    "$NODE" gatehouse-tokens.mjs "$url" "$url/mcp" "$EMAIL" "$PASSWORD" "$dir" "$CONNECTIONS" >>"$WORK/$kind.log" 2>&1 \
      || die "$kind: the OAuth flow failed in block $blocks"
    pid_calls="" pid_rot=""
    if [ "$calls" -lt "$TOOL_CALLS" ]; then
      BENCH_MODE=gatehouse-mcp BENCH_TOKENS="$dir/access.txt" \
        wrk -t1 -c"$CONNECTIONS" -d"${BLOCK}s" --timeout 10s -s lua/bench.lua "$url/mcp" >"$dir/calls.out" 2>&1 &
      pid_calls=$!
    fi
    if [ "$rotations" -lt "$ROTATIONS" ]; then
      BENCH_MODE=refresh BENCH_TOKENS="$dir/refresh.txt" BENCH_CLIENT="$(cat "$dir/client.txt")" \
        wrk -t"$CONNECTIONS" -c"$CONNECTIONS" -d"${BLOCK}s" --timeout 10s -s lua/bench.lua "$url/oauth/token" >"$dir/rotations.out" 2>&1 &
      pid_rot=$!
    fi
    if [ -n "$pid_calls" ]; then
      wait "$pid_calls" || die "wrk failed: $(cat "$dir/calls.out")"
      calls=$(( calls + $(wrk_ok "$(cat "$dir/calls.out")") ))
    fi
    if [ -n "$pid_rot" ]; then
      wait "$pid_rot" || die "wrk failed: $(cat "$dir/rotations.out")"
      rotations=$(( rotations + $(wrk_ok "$(cat "$dir/rotations.out")") ))
    fi
    echo "load $calls $rotations $blocks" >"$WORK/progress"
    say "$kind: block $blocks: $calls tool calls, $rotations rotations, $(( $(date +%s) - start )) s"
  done
  local load_seconds=$(( $(date +%s) - start ))
  echo "tail $calls $rotations $blocks" >"$WORK/progress"
  say "$kind: load done; sampling ${TAIL} s more without load ..."
  sleep "$TAIL"
  touch "$WORK/stop-sampler"
  wait "$sampler_pid" 2>/dev/null || true
  local pruned
  pruned="$(grep -c 'pruned' "$WORK/$kind.log" || true)"
  printf '{"database":"%s","load_seconds":%s,"tool_calls":%s,"rotations":%s,"blocks":%s,"signins":%s,"registrations":%s,"authorizations":%s,"prune_log_lines":%s,"columns":"%s","samples":[%s]}\n' \
    "$kind" "$load_seconds" "$calls" "$rotations" "$blocks" "$blocks" "$blocks" "$(( blocks * (CONNECTIONS + 1) ))" \
    "${pruned:-0}" "$COUNTED" "$(paste -sd, "$samples")" >>"$RESULTS"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ "$kind" = postgres ]; then
    psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 || true
    PG_DB=""
  fi
}

for kind in $DATABASES; do soak_one "$kind"; done

COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p results
OUT="results/$STAMP-$COMMIT-soak-$MODE.json"
{
  printf '{"mode":"%s","build":"%s","commit":"%s","date":"%s","retention_s":%s,"upkeep_s":%s,"sample_s":%s,"block_s":%s,"connections":%s,' \
    "$MODE" "$BUILD" "$COMMIT" "$STAMP" "$RETENTION" "$UPKEEP" "$SAMPLE" "$BLOCK" "$CONNECTIONS"
  printf '"machine":{"cpus":%s,"loadavg_at_end":"%s"},"databases":[%s]}\n' \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(paste -sd, "$RESULTS")"
} >"$WORK/soak.json"
"$NODE" soak-report.mjs "$WORK/soak.json" "$OUT"
say "results: bench/$OUT"
