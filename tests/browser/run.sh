#!/usr/bin/env bash
# Gatehouse in a real headless Chromium (see README.md next to this script).
#
#   GATEHOUSE_BIN  server binary (default: ../../target/debug/gatehouse from here)
#   NODE           node (default: node, >= 20)
#   CHROMIUM       browser binary (default: chromium on PATH, Debian's package)
#   ARTIFACTS      screenshot folder (default: artifacts/ next to this script)
#
# Prints one line per check and finally "browser: N passed, N failed".
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
cd "$HERE"

export GATEHOUSE_BIN="${GATEHOUSE_BIN:-$HERE/../../target/debug/gatehouse}"
NODE="${NODE:-node}"
export ARTIFACTS="${ARTIFACTS:-$HERE/artifacts}"

fail() { printf 'FATAL: %s\nbrowser: 0 passed, 1 failed\n' "$*"; exit 1; }

[ -x "$GATEHOUSE_BIN" ] || fail "gatehouse binary not found at $GATEHOUSE_BIN (build it or set GATEHOUSE_BIN)"
CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
[ -n "$CHROMIUM" ] && [ -x "$CHROMIUM" ] || fail "chromium not found (apt-get install chromium, or set CHROMIUM)"
export CHROMIUM
command -v "$NODE" >/dev/null 2>&1 || fail "node not found ($NODE)"
[ "$("$NODE" -p 'process.versions.node.split(".")[0]')" -ge 20 ] || fail "NODE must be >= 20"

# npm ci when node_modules is missing or older than the lock file.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "npm ci ..."
  npm ci --no-audit --no-fund --loglevel=error || fail "npm ci failed"
fi

echo "chromium: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
rc=0
"$NODE" browser.mjs || rc=1
# The second factor (TOTP enrolment and sign-in); after browser.mjs, which empties ARTIFACTS.
"$NODE" second-factor.mjs || rc=1
# Connections: a second Gatehouse as a per-person upstream, connected through the URL
# elicitation the SDK client gets, in Chromium.
"$NODE" connections.mjs || rc=1
exit "$rc"
