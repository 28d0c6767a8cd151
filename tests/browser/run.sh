#!/usr/bin/env bash
# Browser test of `GET /workbench`: starts `worldd quickstart` on a fresh
# directory and a free loopback port, makes three A2A invocations with curl,
# then drives Debian's headless Chromium through the pages (workbench.mjs).
# Installs what it needs: chromium and chromium-driver (apt-get), playwright-core
# (npm, cached in ${WORLD_CLIENTS_CACHE:-$HOME/.cache/world-clients}/browser).
# Screenshots go to ${WORLD_ARTIFACTS:-target/artifacts}. All traffic is to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/tests/browser
artifacts=${WORLD_ARTIFACTS:-$root/target/artifacts}
cache=${WORLD_CLIENTS_CACHE:-${HOME:-/root}/.cache/world-clients}/browser
mkdir -p "$artifacts" "$cache"
artifacts=$(cd "$artifacts" && pwd)

say() { echo "browser: $*"; }

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    say "installing chromium and chromium-driver (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi

if ! cmp -s "$here/package.json" "$cache/package.json" || [ ! -f "$cache/node_modules/playwright-core/package.json" ]; then
    say "installing playwright-core into $cache (npm)"
    cp "$here/package.json" "$cache/package.json"
    (cd "$cache" && npm install --no-audit --no-fund --loglevel=error)
fi

say "building worldd"
cargo build -q -p world-server --bin worldd
worldd=${CARGO_TARGET_DIR:-$root/target}/debug/worldd

tmp=$(mktemp -d -t world-browser.XXXXXX)
pid=
cleanup() {
    local rc=$?
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    # On failure keep the daemon's log beside the screenshots.
    if [ "$rc" -ne 0 ] && [ -f "$tmp/worldd.log" ]; then cp "$tmp/worldd.log" "$artifacts/workbench-worldd.log"; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base=http://127.0.0.1:$port
"$worldd" quickstart --dir "$tmp/qs" --bind "127.0.0.1:$port" >"$tmp/worldd.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
    curl -sf --max-time 2 "$base/v1/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/worldd.log"; say "worldd exited"; exit 1; }
    sleep 0.1
done
curl -sf --max-time 2 "$base/v1/health" >/dev/null || { cat "$tmp/worldd.log"; say "worldd did not come up"; exit 1; }

token=$(cat "$tmp/qs/session")
# One A2A tasks/send: task id, skill, arguments (JSON); appends the reply to calls.jsonl.
call() {
    local body reply
    body=$(printf '{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"%s","metadata":{"skill_id":"%s"},"message":{"role":"user","parts":[{"type":"data","data":%s}]}}}' "$1" "$2" "$3")
    reply=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body" "$base/a2a/")
    if ! printf '%s' "$reply" | grep -q '"entry_index"'; then
        say "invocation $1 failed: $reply"
        exit 1
    fi
    printf '%s\n' "$reply" >>"$tmp/calls.jsonl"
}
call read-hello ailang-read '{"path":"hello.txt"}'
call write-page ailang-write '{"path":"page.html","content":"<h1>hi</h1><script>alert(1)</script>\n"}'
call read-page ailang-read '{"path":"page.html"}'

cd "$here"
WORKBENCH_BASE=$base WORKBENCH_CALLS=$tmp/calls.jsonl WORKBENCH_DB=$tmp/qs/world.db \
    WORKBENCH_PROFILE=$tmp/chromium-profile WORLD_ARTIFACTS=$artifacts PLAYWRIGHT_FROM=$cache \
    timeout 300 node workbench.mjs
