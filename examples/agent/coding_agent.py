"""A scripted coding agent: the loop a real one runs, over MCP, against World.

Start a world that lets the agent run Python in its worktree, then run this
(with a session of its own, so that the episode's spend is the agent's alone;
the quickstart session works too if nothing else uses it):

    worldd quickstart --exec-allow python3=/usr/bin/python3        # prints the URL and token path
    python coding_agent.py http://127.0.0.1:7644/mcp/ world-quickstart/session [path/to/worldd]

It lists its tools, searches and reads the worktree, writes a small module and
its unit test, edits a bug in, runs the tests through `workspace-exec` (they
fail), edits the fix, runs them again (they pass). Every step is a journaled,
budgeted effect. Then it checks what World recorded: `worldd why` walks from
the fixing edit's effect record to the log entry that carries it, and the
budgets spent equal the number of effects the agent caused.

Needs the Python MCP SDK (`pip install mcp`, 2.x). Prints one `ok <step>` or
`FAIL <step>: why` line per step; exits non-zero if any step failed.
"""

import asyncio
import base64
import json
import pathlib
import subprocess
import sys
import urllib.request

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = sys.argv[1]
TOKEN = pathlib.Path(sys.argv[2]).read_text().strip()
WORLDD = sys.argv[3] if len(sys.argv) > 3 else "worldd"
BASE = URL.split("/mcp")[0]

MODULE = "def mean(xs):\n    return sum(xs) / len(xs)\n"
TEST = """import unittest
from stats import mean


class MeanTest(unittest.TestCase):
    def test_mean_of_three(self):
        self.assertEqual(mean([1, 2, 3]), 2)


if __name__ == "__main__":
    unittest.main()
"""
failed = False


def check(step, cond, why=""):
    global failed
    print(f"ok coding_agent.{step}" if cond else f"FAIL coding_agent.{step}: {why}", flush=True)
    failed |= not cond


def rest(path):
    with urllib.request.urlopen(BASE + path, timeout=30) as r:
        return json.load(r)


class Agent:
    def __init__(self, world):
        self.world = world
        self.effects = []  # every effect record the agent's calls produced

    async def call(self, tool, args):
        out = (await self.world.call_tool(tool, args)).structured_content or {}
        self.effects += [e["record"] for e in out.get("world", {}).get("effects", [])]
        return out

    async def run_tests(self):
        return await self.call("workspace-exec", {"command": "python3", "args": ["-m", "unittest", "-q"]})


async def main():
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as world:
            agent = Agent(world)
            tools = {t.name for t in (await world.list_tools()).tools}
            wanted = {"workspace-list", "workspace-search", "ailang-read", "ailang-write", "ailang-edit", "workspace-exec"}
            check("tools", wanted <= tools, f"missing {wanted - tools}")

            found = await agent.call("workspace-search", {"query": "hello"})
            check("search", any(m.get("path") == "hello.txt" for m in found.get("matches", [])), found)
            read = await agent.call("ailang-read", {"path": "hello.txt"})
            check("read", read.get("ok") is True and "hello" in read.get("content", ""), read)

            for path, text in (("stats.py", MODULE), ("test_stats.py", TEST)):
                wrote = await agent.call("ailang-write", {"path": path, "content": text})
                check(f"write {path}", wrote.get("ok") is True, wrote)
            bug = await agent.call("ailang-edit", {"path": "stats.py", "old_text": "/ len(xs)", "new_text": "/ (len(xs) + 1)"})
            check("edit the bug in", bug.get("ok") is True, bug)

            run = await agent.run_tests()
            check("the tests fail", run.get("exit_code") == 1 and "FAILED" in run.get("stderr", ""), run)
            fix = await agent.call("ailang-edit", {"path": "stats.py", "old_text": "/ (len(xs) + 1)", "new_text": "/ len(xs)"})
            check("edit the fix", fix.get("ok") is True, fix)
            run = await agent.run_tests()
            check("the tests pass", run.get("ok") is True and run.get("exit_code") == 0, run)

    # What World recorded: the fixing edit's record walks to its log entry.
    record = fix["world"]["effects"][0]["record"]
    why = subprocess.run([WORLDD, "why", record, "--addr", BASE], capture_output=True, text=True, timeout=60)
    check("why", why.returncode == 0 and "link(s) verified" in why.stdout, why.stdout + why.stderr)

    # The episode's spend: per effect name, the budget before the first record
    # less the budget after the last one; each effect costs 1, debited once.
    first, last = {}, {}
    for ref in agent.effects:
        r = json.loads(base64.b64decode(rest(f"/v1/objects/{ref}?payload=true")["payload"]))
        first.setdefault(r["effect"], r["budgetBefore"])
        last[r["effect"]] = r["budgetAfter"]
    spent = sum(first[e] - last[e] for e in first)
    check("spend", spent == len(agent.effects), f"spent {spent} for {len(agent.effects)} effects: {first} {last}")


asyncio.run(main())
sys.exit(1 if failed else 0)
