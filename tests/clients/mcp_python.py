"""The Python MCP SDK (mcp 2.3.0, streamable HTTP) against worldd, twice: in
its default auto mode, which probes `server/discover` and must settle on
2026-07-28, and pinned to the legacy era, which must initialize at 2025-11-25.

    TOKEN=<64 hex> GHOST_TOKEN=<64 hex> python mcp_python.py http://127.0.0.1:PORT/mcp/

GHOST_TOKEN is a session of an episode with no worktree: a tool it calls
cannot run on this daemon, which the modern era says in a tool result and
the legacy era in the seed's envelope; the client goes on either way.

Prints one `ok <check>` or `FAIL <check>: reason` line per check.
"""

import asyncio
import os
import re
import sys
import traceback

from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

URL = sys.argv[1]
TOKEN = os.environ["TOKEN"]
GHOST_TOKEN = os.environ["GHOST_TOKEN"]
REF = re.compile(r"^sha256:[0-9a-f]{64}$")
failed = False


MODERN, LEGACY = "2026-07-28", "2025-11-25"


def check(name, cond, why):
    global failed
    print(f"ok mcp_python.{name}" if cond else f"FAIL mcp_python.{name}: {why}", flush=True)
    failed |= not cond


async def mcp_error(call):
    """The MCPError a call raises, or None."""
    try:
        await call
    except MCPError as e:
        return e
    return None


async def main():
    await session("auto", MODERN)
    await session("legacy", LEGACY)
    await cannot_run("auto", MODERN)
    await cannot_run("legacy", LEGACY)


async def cannot_run(mode, version):
    """A tool this daemon cannot run: a result naming what is missing (modern),
    the seed's -32603 (legacy); the same client calls on afterwards."""
    era = "modern" if version == MODERN else "legacy"
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {GHOST_TOKEN}"})
    async with http, Client(streamable_http_client(URL, http_client=http), mode=mode) as c:
        if era == "modern":
            r = await c.call_tool("ailang-read", {"path": "hello.txt"})
            text = r.content[0].text if r.content else ""
            told = r.is_error and text.startswith("Not run: this daemon cannot run ailang-read: ")
            told = told and "episode ghost has no worktree" in text
            check(f"{mode}.cannot_run_is_a_tool_result", told, f"result {r}")
        else:
            e = await mcp_error(c.call_tool("ailang-read", {"path": "hello.txt"}))
            told = e is not None and e.code == -32603 and e.message == "host callback failed"
            check(f"{mode}.cannot_run_is_the_seed_envelope", told, f"raised {e!r}")
        tools = [t.name for t in (await c.list_tools()).tools]
        check(f"{mode}.cannot_run_then_lists", "ailang-read" in tools, f"tools {tools}")


async def session(mode, version):
    """The same checks in one era; the check names carry the mode."""
    era = "modern" if version == MODERN else "legacy"

    def check_(name, cond, why):
        check(f"{mode}.{name}", cond, why)

    wire = []  # (protocol-version header, JSON-RPC method) of each POST

    async def record(request):
        if request.method == "POST":
            m = re.search(rb'"method":\s*"([^"]+)"', request.content)
            wire.append((request.headers.get("mcp-protocol-version"), m and m.group(1).decode()))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    http.event_hooks["request"].append(record)
    async with http, Client(streamable_http_client(URL, http_client=http), mode=mode) as c:
        if era == "modern":
            # One probe, answered: no fallback to the handshake.
            negotiated = wire == [(MODERN, "server/discover")] and c.server_info.name == "worldd"
        else:
            negotiated = (None, "initialize") in wire and c.server_info.name == "worldd"
        check_(
            "negotiate",
            negotiated and c.protocol_version == version,
            f"wire {wire}, version {c.protocol_version}, server {c.server_info}",
        )

        tools = {t.name: t for t in (await c.list_tools()).tools}
        echo, read = tools.get("tools_decho"), tools.get("ailang-read")
        check_(
            "tools_list",
            echo is not None
            and read is not None
            and read.input_schema.get("required") == ["path"]
            and "path" in read.input_schema.get("properties", {})
            and "world" in (read.output_schema or {}).get("properties", {})
            and echo.input_schema.get("type") == "object",
            f"tools {sorted(tools)}; ailang-read {read}",
        )

        r = await c.call_tool("tools_decho", {"message": "hi"})
        s = r.structured_content or {}
        check_(
            "call_echo",
            not r.is_error and s.get("echo") == {"message": "hi"} and s.get("world", {}).get("effects") == [],
            f"result {r}",
        )

        r = await c.call_tool("ailang-read", {"path": "hello.txt"})
        s = r.structured_content or {}
        w = s.get("world", {})
        eff = (w.get("effects") or [{}])[0]
        check_(
            "call_read",
            s.get("ok") is True
            and s.get("content") == "hello from World\n"
            and eff.get("status") == "ok"
            and REF.match(eff.get("record") or "")
            and REF.match(w.get("plan") or ""),
            f"result {r}",
        )

        # A refused path is a committed refusal, not a protocol error; the
        # modern era marks it as the tool's own failure.
        r = await c.call_tool("ailang-read", {"path": "../outside.txt"})
        s = r.structured_content or {}
        check_(
            "call_refused_path",
            r.is_error == (era == "modern")
            and s.get("ok") is False
            and "refused" in s.get("refused", "")
            and s.get("world", {}).get("effects") == []
            and REF.match(s.get("world", {}).get("plan") or ""),
            f"result {r}",
        )

        e = await mcp_error(c.call_tool("no-such-tool", {}))
        check_("unknown_tool", e is not None and e.code == -32602, f"raised {e!r}")

        for name, tool in [("host_failure_deadline", "fixture_ssleep"), ("host_failure_not_json", "fixture_snot-json")]:
            e = await mcp_error(c.call_tool(tool, {}))
            check_(name, e is not None and e.code == -32603 and e.message == "host callback failed", f"raised {e!r}")

        # The session still works after a whole-POST failure envelope.
        r = await c.call_tool("tools_decho", {"after": "failure"})
        check_("after_failure", (r.structured_content or {}).get("echo") == {"after": "failure"}, f"result {r}")

        methods = [m for _, m in wire]
        versions = {v for v, m in wire if m != "initialize"}
        check_(
            "one_era_throughout",
            versions == {version} and ("initialize" in methods) == (era == "legacy"),
            f"wire {wire}",
        )


try:
    asyncio.run(main())
except BaseException as e:  # noqa: BLE001 - report anything as a failure line
    traceback.print_exc()
    print(f"FAIL mcp_python: {type(e).__name__}: {e}", flush=True)
    failed = True
sys.exit(1 if failed else 0)
