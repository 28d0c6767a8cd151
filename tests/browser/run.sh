#!/usr/bin/env bash
# Browser tests of the workbench: starts `worldd quickstart` (python3 allowed)
# on a fresh directory and a free loopback port, makes three A2A invocations
# with curl and drives Debian's headless Chromium through `/workbench`
# (workbench.mjs); then a scripted agent session in the same episode (writes,
# a rewrite, an edit, a failing and a passing command, a write denied over
# the budget of a second session, a write left waiting for a person's approval)
# and through `/workbench/episodes` (episodes.mjs).
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
"$worldd" quickstart --dir "$tmp/qs" --bind "127.0.0.1:$port" --exec-allow python3 >"$tmp/worldd.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
    curl -sf --max-time 2 "$base/v1/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/worldd.log"; say "worldd exited"; exit 1; }
    sleep 0.1
done
curl -sf --max-time 2 "$base/v1/health" >/dev/null || { cat "$tmp/worldd.log"; say "worldd did not come up"; exit 1; }

token=$(cat "$tmp/qs/session")
replies=$tmp/calls.jsonl
# One A2A tasks/send with $token: task id, skill, arguments (JSON); appends the reply to $replies.
call() {
    local body reply
    body=$(printf '{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"%s","metadata":{"skill_id":"%s"},"message":{"role":"user","parts":[{"type":"data","data":%s}]}}}' "$1" "$2" "$3")
    reply=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body" "$base/a2a/")
    if ! printf '%s' "$reply" | grep -q '"entry_index"'; then
        say "invocation $1 failed: $reply"
        exit 1
    fi
    printf '%s\n' "$reply" >>"$replies"
}
# The first with a task id as long as some clients make theirs (64 hex digits):
# the pages show it short, whole on hover, and still fit the window.
long_task=$(printf 'read-hello' | sha256sum | cut -c1-64)
call "$long_task" ailang-read '{"path":"hello.txt"}'
call write-page ailang-write '{"path":"page.html","content":"<h1>hi</h1><script>alert(1)</script>\n"}'
call read-page ailang-read '{"path":"page.html"}'

export WORKBENCH_LONG_TASK=$long_task WORKBENCH_BASE=$base WORKBENCH_PROFILE=$tmp/chromium-profile WORLD_ARTIFACTS=$artifacts PLAYWRIGHT_FROM=$cache
(cd "$here" && WORKBENCH_CALLS=$tmp/calls.jsonl WORKBENCH_DB=$tmp/qs/world.db timeout 300 node workbench.mjs)

# The agent session episodes.mjs reads, in the same episode after those three calls.
replies=$tmp/episode.jsonl
call w-app ailang-write '{"path":"app.py","content":"def add(a, b):\n    return a - b\n\nprint(add(2, 3))\nassert add(2, 3) == 5, \"add is wrong\"\n"}'
call x-fail workspace-exec '{"command":"python3","args":["app.py"]}'
call w-fix ailang-write '{"path":"app.py","content":"def add(a, b):\n    return a + b\n\nprint(add(2, 3))\nassert add(2, 3) == 5, \"add is wrong\"\n"}'
call e-say ailang-edit '{"path":"app.py","old_text":"print(add(2, 3))","new_text":"print(\"sum\", add(2, 3))"}'
call x-pass workspace-exec '{"command":"python3","args":["app.py"]}'
# A second session of the episode whose write budget (1) the writes above
# have spent: its write is denied over the budget, and recorded.
"$worldd" session mint --db "$tmp/qs/world.db" --episode demo --grant Workspace.Write=worktree:1 \
    --out "$tmp/qs/small-session" --yes 2>>"$tmp/worldd.log"
token=$(cat "$tmp/qs/small-session")
call w-over ailang-write '{"path":"app.py","content":"gone\n"}'
# A third session whose writes wait for a person: one waits, unanswered, so
# the pages show what waits (and how to decide it) beside everything else.
"$worldd" session mint --db "$tmp/qs/world.db" --episode demo --grant Workspace.Write=worktree:5 \
    --ask Workspace.Write=worktree --out "$tmp/qs/asking-session" --yes 2>>"$tmp/worldd.log"
token=$(cat "$tmp/qs/asking-session")
body='{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"w-ask","metadata":{"skill_id":"ailang-write"},"message":{"role":"user","parts":[{"type":"data","data":{"path":"later.txt","content":"later\n"}}]}}}'
reply=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$body" "$base/a2a/")
printf '%s' "$reply" | grep -q 'input-required' || { say "the asking write did not wait: $reply"; exit 1; }
(cd "$here" && WORKBENCH_SESSION=$tmp/episode.jsonl timeout 300 node episodes.mjs)
