#!/usr/bin/env bash
# Clients nobody here wrote, against a live `worldd quickstart`: the Python and
# TypeScript MCP SDKs in both MCP eras, the official MCP conformance suite for
# the legacy era and for 2026-07-28 (through authproxy.py), and the Python and
# JavaScript A2A SDKs at A2A 1.0; and grants that ask a person, answered in-band
# by the clients that can be asked and by `worldd approve` / `deny` for those
# that cannot (approvals_python.py, approvals_ts_v2.mjs); and commands that
# outlast their request, run as tasks the stock clients poll and cancel (MCP
# Tasks through @modelcontextprotocol/ext-tasks, A2A through a2a-sdk:
# tasks_ts_v2.mjs, tasks_python.py); and README's Python snippets as written,
# after only the `pip install mcp` README names. Every check prints
# `ok NAME` or `FAIL NAME: reason`; the last line is `N passed, M failed`, and
# the exit status is 1 if any failed.
#
# Installs are cached under $WORLD_CLIENTS_CACHE (default ~/.cache/world-clients).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${WORLD_CLIENTS_CACHE:-$HOME/.cache/world-clients}
py_pkgs="mcp==2.3.0 a2a-sdk==1.3.0 httpx"
npm_pkgs="@modelcontextprotocol/sdk@1.32.2 @modelcontextprotocol/client@2.4.0 @a2a-js/sdk@1.3.0 @modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/ext-tasks@0.2.2"
# The 2026-07-28 requirements exist only in the 0.2.0 alphas (a folder of their own).
npm_modern_conformance="@modelcontextprotocol/conformance@0.2.0-alpha.12"

# --- (a, b) cached installs; DIR/.installed names what DIR holds ----------------
installed() { [[ -f $1/.installed && $(cat "$1/.installed") == "$2" ]]; }
mkdir -p "$cache"
if ! installed "$cache/venv" "$py_pkgs"; then
  rm -rf "$cache/venv" && python3 -m venv "$cache/venv"
  # shellcheck disable=SC2086
  "$cache/venv/bin/pip" install -q --disable-pip-version-check $py_pkgs
  echo "$py_pkgs" >"$cache/venv/.installed"
fi
npm_folder() { # DIR PACKAGE...
  local dir=$1 && shift
  installed "$dir" "$*" && return
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$@" >/dev/null)
  echo "$*" >"$dir/.installed"
}
# shellcheck disable=SC2086
npm_folder "$cache/node" $npm_pkgs
npm_folder "$cache/conformance-2026" $npm_modern_conformance
npm_folder "$cache/node22" node@22 # the conformance CLI needs Node >= 22
node22_bin=$cache/node22/node_modules/.bin
"$node22_bin/node" --version | grep -q '^v22\.' || { echo "node@22 did not install a Node 22 binary" >&2; exit 1; }
py=$cache/venv/bin/python

# --- (c) build the daemon --------------------------------------------------------
(cd "$root" && cargo build --quiet -p world-server --bin worldd)
worldd=${CARGO_TARGET_DIR:-$root/target}/debug/worldd

# --- (d) a daemon with tools on a free loopback port -----------------------------
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
tmp=$(mktemp -d)
daemon_pid= proxy_pid=
cleanup() {
  # shellcheck disable=SC2086
  [[ -n $proxy_pid ]] && kill $proxy_pid 2>/dev/null
  [[ -n $daemon_pid ]] && kill "$daemon_pid" 2>/dev/null
  for pid in "$tmp"/*.pid; do # clients started and not collected
    if [[ -f $pid ]]; then kill "$(cat "$pid")" 2>/dev/null || true; fi
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0 failed=0
summary() { echo "$passed passed, $failed failed"; ((failed == 0)); }
fail_setup() { # REASON LOG: nothing can run without the daemon
  echo "FAIL daemon: $1" && sed 's/^/    /' "$2" | tail -20
  failed=$((failed + 1)) && summary
  exit 1
}

port=$(free_port)
"$worldd" quickstart --dir "$tmp/qs" --bind "127.0.0.1:$port" --exec-allow python3=/usr/bin/python3 \
  --exec-allow sh=/bin/sh >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
  grep -q 'worldd listening on' "$tmp/daemon.log" && break
  kill -0 "$daemon_pid" 2>/dev/null || fail_setup "quickstart exited" "$tmp/daemon.log"
  sleep 0.2
done
grep -q 'worldd listening on' "$tmp/daemon.log" || fail_setup "not listening after 20 s" "$tmp/daemon.log"
"$worldd" publish --db "$tmp/qs/world.db" --manifest "$here/fixtures/manifest.json" >"$tmp/publish.log" 2>&1 ||
  fail_setup "publishing the fixtures failed" "$tmp/publish.log"
export TOKEN
TOKEN=$(cat "$tmp/qs/session")
# The scripted coding agent gets an episode of its own, so its spend is its alone.
mkdir -p "$tmp/qs/workspace/agent" && echo "hello from the agent's worktree" >"$tmp/qs/workspace/agent/hello.txt"
"$worldd" session mint --db "$tmp/qs/world.db" --episode agent --grant Workspace.Read=worktree:100 \
  --grant Workspace.Write=worktree:100 --grant Workspace.Exec=worktree:100 --yes --out "$tmp/agent.session" \
  >"$tmp/mint.log" 2>&1 || fail_setup "minting the agent's session failed" "$tmp/mint.log"
# A session of an episode with no worktree: its tools cannot run on this daemon.
"$worldd" session mint --db "$tmp/qs/world.db" --episode ghost --grant Workspace.Read=worktree:10 --yes \
  --out "$tmp/ghost.session" >"$tmp/mint.log" 2>&1 || fail_setup "minting the ghost session failed" "$tmp/mint.log"
# The conformance suites get a session that sees only the pure tools, so the
# first tool listed (conformance_secho, a fixture) takes the `{}` the 2026-07-28
# header-validation scenario calls it with.
"$worldd" session mint --db "$tmp/qs/world.db" --episode conformance --grant world.apply=world:10000 --yes \
  --out "$tmp/conformance.session" >"$tmp/mint.log" 2>&1 || fail_setup "minting the conformance session failed" "$tmp/mint.log"

# --- (e) the clients ---------------------------------------------------------------
tally() { # LINE: print a check line and count it
  echo "$1"
  if [[ $1 == ok* ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
start_client() { # NAME COMMAND...: runs a client in the background; `collect NAME` counts what it printed
  local name=$1 && shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  echo $! >"$tmp/$name.pid"
}
collect() { # NAME: waits for a started client; prints its ok/FAIL lines (other lines as they are)
  local name=$1 line rc=0 n=0 bad=0
  wait "$(cat "$tmp/$name.pid")" || rc=$?
  rm "$tmp/$name.pid"
  while IFS= read -r line; do
    case $line in
      ok\ *) tally "$line" && n=$((n + 1)) ;;
      FAIL\ *) tally "$line" && n=$((n + 1)) bad=1 ;;
      *) if [[ -n $line ]]; then echo "$line"; fi ;;
    esac
  done <"$tmp/$name.out"
  ((rc == 0 && n > 0)) || ((bad)) || tally "FAIL $name: exited $rc after $n checks"
  ((rc == 0)) || sed 's/^/    /' "$tmp/$name.err" | tail -30
}
run() { # NAME COMMAND...: a client in the foreground, its lines counted
  start_client "$@" && collect "$1"
}

conformance() { # NAME PACKAGE_DIR BASELINE [ARGS...]: one run of `conformance server` through the
  # proxy at $via_port, a line per scenario
  local name=$1 dir=$2 baseline=$3 rc=0 required_failed=0 && shift 3
  (cd "$dir" && PATH=$node22_bin:$PATH npx --no-install conformance server \
    --url "http://127.0.0.1:$via_port/mcp/" --expected-failures "$baseline" "$@" \
    -o "$tmp/$name") >"$tmp/$name.log" 2>&1 || rc=$?
  # One line per scenario from the results: passed, or failed as the baseline
  # expects. A scenario the suite does not score fails the run here only if the
  # baseline's comments say it "must pass in full".
  "$py" - "$tmp/$name" "$baseline" <<'EOF' || required_failed=1
import fnmatch, json, pathlib, re, sys
results, text = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).read_text()
expected = set(re.findall(r"^\s*-\s*([\w-]+)", text, re.M))
required = set(re.findall(r"([\w-]+) must pass in full", text))
unscored = [p for line in re.findall(r"^# not scored: (.*)$", text, re.M) for p in line.split()]
ok = True
for f in sorted(results.glob("server-*/checks.json")):
    scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", f.parent.name)
    bad = [c for c in json.loads(f.read_text()) if c["status"] in ("FAILURE", "WARNING")]
    kind = "expected failure" if scenario in expected else "FAILED"
    if any(fnmatch.fnmatch(scenario, p) for p in unscored):
        kind = "failed, not scored"
    if scenario in required and bad:
        kind, ok = "FAILED (required here)", False
    why = "; ".join(f'{c["status"]} {c["id"]}: ' + (c.get("errorMessage") or c.get("details", {}).get("message", ""))[:160]
                   for c in bad[:2])
    print(f"  {results.name} {scenario}: " + (f"{kind} ({why})" if bad else "passed"))
sys.exit(0 if ok else 1)
EOF
  if ((rc == 0 && required_failed == 0)); then
    echo "ok $name: every scenario passed or failed as $(basename "$baseline") expects"
  else
    echo "FAIL $name: exit $rc (unexpected failure, a baselined scenario now passes, or a required unscored one failed)"
    sed -n '/Stale baseline\|Unexpected failures/,$p' "$tmp/$name.log" | sed 's/\x1b\[[0-9;]*m//g; s/^/    /'
  fi
}

# The conformance suite has no header option: it goes through a bearer-adding
# proxy, one with the conformance session and one with quickstart's demo session.
start_proxy() { # TOKEN_FILE: starts a proxy adding that session's bearer; its port in $started_port
  started_port=$(free_port)
  TOKEN=$(cat "$1") "$py" "$here/authproxy.py" "$started_port" "$port" &
  proxy_pid+=" $!"
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$started_port") 2>/dev/null && break || sleep 0.1; done
}
start_proxy "$tmp/conformance.session" && proxy_port=$started_port
start_proxy "$tmp/qs/session" && demo_proxy_port=$started_port

# The task clients wait some 30 s on their commands: they run alongside the others.
start_client tasks_python "$py" "$here/tasks_python.py" "http://127.0.0.1:$port" "$worldd" "$tmp/qs/world.db" \
  "$tmp/qs/workspace"
start_client tasks_ts_v2 env SDK_DIR="$cache/node" "$node22_bin/node" "$here/tasks_ts_v2.mjs" \
  "http://127.0.0.1:$port" "$worldd" "$tmp/qs/world.db" "$tmp/qs/workspace"

run mcp_python env GHOST_TOKEN="$(cat "$tmp/ghost.session")" "$py" "$here/mcp_python.py" "http://127.0.0.1:$port/mcp/"
run mcp_ts env SDK_DIR="$cache/node" "$node22_bin/node" "$here/mcp_ts.mjs" "http://127.0.0.1:$port/mcp/"
run mcp_ts_v2 env SDK_DIR="$cache/node" "$node22_bin/node" "$here/mcp_ts_v2.mjs" "http://127.0.0.1:$port/mcp/"
via_port=$proxy_port
run conformance conformance conformance "$cache/node" "$here/conformance-baseline.yml"
run conformance_2026 conformance conformance_2026 "$cache/conformance-2026" "$here/conformance-2026-07-28.yml" \
  --requirements 2026-07-28
via_port=$demo_proxy_port
run conformance_2026_quickstart conformance conformance_2026_quickstart "$cache/conformance-2026" \
  "$here/conformance-quickstart.yml" --scenario http-header-validation
run a2a_python "$py" "$here/a2a_python.py" "http://127.0.0.1:$port"
run a2a_js env SDK_DIR="$cache/node" "$node22_bin/node" "$here/a2a_js.mjs" "http://127.0.0.1:$port/"
run coding_agent "$py" "$root/examples/agent/coding_agent.py" "http://127.0.0.1:$port/mcp/" "$tmp/agent.session" "$worldd"
# Each approvals scenario mints a session of an episode of its own (its own
# worktree under the quickstart's workspace, its own spend).
run approvals_python "$py" "$here/approvals_python.py" "http://127.0.0.1:$port" "$worldd" "$tmp/qs/world.db" "$tmp/qs/workspace"
run approvals_ts_v2 env SDK_DIR="$cache/node" "$node22_bin/node" "$here/approvals_ts_v2.mjs" "http://127.0.0.1:$port" \
  "$worldd" "$tmp/qs/world.db" "$tmp/qs/workspace"
collect tasks_python
collect tasks_ts_v2

# --- README's Python snippets, run as README writes them ---------------------------
# In a new virtual environment with only what README names (`pip install mcp`),
# from a directory whose ./world-quickstart is this quickstart's; the one change
# is the port. The in-band approval answers the question on its standard input.
readme_snippet() { # HEADING: the indented block under `    HEADING` in README.md, dedented
  awk -v head="    $1" '$0 == head {on = 1; next} on && /^$/ {exit} on {print substr($0, 5)}' "$root/README.md" |
    sed "s#http://127.0.0.1:7644/#http://127.0.0.1:$port/#g"
}
readme_venv=$tmp/readme-venv
if python3 -m venv "$readme_venv" && "$readme_venv/bin/pip" install -q --disable-pip-version-check mcp \
  >"$tmp/readme-pip.log" 2>&1; then
  tally "ok readme.pip_install_mcp"
  mkdir -p -m 700 "$tmp/readme/plain" "$tmp/readme/asks/world-quickstart"
  ln -s "$tmp/qs" "$tmp/readme/plain/world-quickstart"
  readme_snippet "# Python (pip install mcp)" >"$tmp/readme/plain/snippet.py"
  if out=$(cd "$tmp/readme/plain" && "$readme_venv/bin/python" snippet.py 2>&1) &&
    [[ $out == *"'ailang-read'"* && $out == *"hello from World"* ]]; then
    tally "ok readme.python_snippet"
  else
    tally "FAIL readme.python_snippet: $(tail -5 <<<"$out" | tr '\n' ' ')"
  fi
  "$worldd" session mint --db "$tmp/qs/world.db" --episode demo --grant Workspace.Write=worktree:10 \
    --ask Workspace.Write --yes --out "$tmp/readme/asks/world-quickstart/session" >"$tmp/mint.log" 2>&1 ||
    fail_setup "minting the asking session failed" "$tmp/mint.log"
  readme_snippet "# Python, answering an approval in-band (pip install mcp)" >"$tmp/readme/asks/snippet.py"
  if out=$(cd "$tmp/readme/asks" && echo approve | "$readme_venv/bin/python" snippet.py 2>&1) &&
    [[ $out == *"asks to write 6 bytes to notes.txt"* && $out == *"'ok': True"* ]] &&
    [[ $(cat "$tmp/qs/workspace/demo/notes.txt") == hello ]]; then
    tally "ok readme.python_elicitation_snippet"
  else
    tally "FAIL readme.python_elicitation_snippet: $(tail -5 <<<"$out" | tr '\n' ' ')"
  fi
else
  tally "FAIL readme.pip_install_mcp: $(tail -3 "$tmp/readme-pip.log" | tr '\n' ' ')"
fi

# --- (f) stop the daemon; the store it leaves must verify -------------------------
rc=0
kill "$daemon_pid" && wait "$daemon_pid" || rc=$?
daemon_pid=
if ((rc == 0)); then tally "ok daemon.shutdown"; else tally "FAIL daemon.shutdown: worldd exited $rc on SIGTERM"; fi
if "$worldd" verify --db "$tmp/qs/world.db" >"$tmp/verify.log" 2>&1; then
  tally "ok daemon.verify"
else
  tally "FAIL daemon.verify: $(tail -3 "$tmp/verify.log" | tr '\n' ' ')"
fi

# --- (g) -------------------------------------------------------------------------
summary
