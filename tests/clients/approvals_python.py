"""Grants that ask, through stock Python clients (mcp 2.3.0, a2a-sdk 1.3.0),
default configuration, public APIs only. Each scenario mints a session of its
own episode (its own worktree, its own spend) with `--ask Workspace.Write` or
`--ask-operator Workspace.Write`, and the operator's answers go through
`worldd approve` / `worldd deny`:

- mcp_elicit: the modern client with an elicitation callback is asked in-band;
  approve, decline, deny, approve-for-session.
- mcp_operator: the modern client without a callback gets a tool error naming
  the approval; the operator approves; the same call runs once.
- mcp_operator_only: an --ask-operator grant never asks the client, even one
  that can be asked; the operator denies.
- mcp_legacy: the client pinned to 2025-11-25 (with a callback it cannot be
  reached by) takes the operator's path.
- a2a_answer: the task continued with {"approval": "deny"|"approve"}: recorded, or run once.
- a2a: SendMessage answers input-required with the approval; the same task id
  sent again after `worldd approve` runs once; a further resend replays.

    python approvals_python.py http://127.0.0.1:PORT WORLDD DB WORKSPACE_ROOT

Prints one `ok <check>` or `FAIL <check>: reason` line per check.
"""

import asyncio
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import traceback

import httpx
import mcp.types as types
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_data_parts, new_data_message
from a2a.types import Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToJson
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

BASE, WORLDD, DB, ROOT = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
URL = f"{BASE}/mcp/"
APPROVAL = re.compile(r"Approval (ap-[0-9a-f]{16}) ")
TMP = pathlib.Path(tempfile.mkdtemp())
failed = False


def check(name, cond, why):
    global failed
    print(f"ok approvals_python.{name}" if cond else f"FAIL approvals_python.{name}: {why}", flush=True)
    failed |= not cond


def worldd(*args):
    """`worldd ARGS --db DB`: (exit status, stdout + stderr)."""
    o = subprocess.run([WORLDD, *args, "--db", DB], capture_output=True, text=True, timeout=60)
    return o.returncode, o.stdout + o.stderr


def mint(episode, *ask):
    """A session of EPISODE (with a worktree of its own) whose grants ask: its token."""
    (ROOT / episode).mkdir(parents=True, exist_ok=True)
    out = TMP / f"{episode}.session"
    rc, said = worldd("session", "mint", "--episode", episode, "--grant", "Workspace.Write=worktree:5",
                      "--grant", "world.apply=world:10", *ask, "--yes", "--out", str(out))
    if rc != 0:
        raise RuntimeError(f"minting {episode}: {said}")
    return out.read_text().strip()


def spent(episode):
    """What EPISODE spent on Workspace.Write (an episode without calls has no summary: 0)."""
    r = httpx.get(f"{BASE}/v1/episodes/{episode}")
    if r.status_code == 404:
        return 0
    r.raise_for_status()
    return sum(g["spent"] for g in r.json()["spend"] if g["effect"] == "Workspace.Write")


def file(episode, path):
    p = ROOT / episode / path
    return p.read_text() if p.exists() else None


def pending(episode):
    """The approvals of EPISODE `worldd approvals --json` lists as pending, by id."""
    rc, out = worldd("approvals", "--json")
    if rc != 0:
        raise RuntimeError(f"worldd approvals: {out}")
    return {a["id"]: a for a in json.loads(out) if a.get("episode") == episode and a.get("state") == "pending"}


def effect(r):
    return ((r.structured_content or {}).get("world", {}).get("effects") or [{}])[0]


def waiting(r):
    """The approval id a waiting call's tool error names, or None."""
    text = r.content[0].text if r.content and r.content[0].type == "text" else ""
    m = APPROVAL.search(text)
    ok = r.is_error and "Nothing ran and nothing was debited" in text and f"worldd approve {m and m.group(1)}" in text
    return m.group(1) if m and ok else None


def declares_elicitation(wire):
    """Whether the client told the server it can be asked: in `initialize`
    (legacy) or in every request's `_meta` (2026-07-28)."""
    init = [b for b in wire if b.get("method") == "initialize"]
    if init:
        return "elicitation" in init[0]["params"].get("capabilities", {})
    metas = [b.get("params", {}).get("_meta", {}) for b in wire if "id" in b]
    return bool(metas) and all("elicitation" in m["io.modelcontextprotocol/clientCapabilities"] for m in metas)


def mcp_client(token, mode, wire, callback=None):
    """A stock Client with the session's bearer; each POST's JSON body lands in WIRE."""

    async def record(request):
        if request.method == "POST":
            wire.append(json.loads(request.content))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    http.event_hooks["request"].append(record)
    return http, Client(streamable_http_client(URL, http_client=http), mode=mode, elicitation_callback=callback)


async def mcp_elicit():
    """In-band: the client's elicitation callback is the person."""
    ep, wire, asked = "ask-elicit", [], []
    token = mint(ep, "--ask", "Workspace.Write")
    answers = []

    async def person(context, params):
        asked.append(params)
        return answers.pop(0)

    def name(n):
        return f"mcp_elicit.{n}"

    http, client = mcp_client(token, "auto", wire, person)
    async with http, client as c:
        answers.append(types.ElicitResult(action="accept", content={"decision": "approve"}))
        r = await c.call_tool("ailang-write", {"path": "approved.txt", "content": "approved\n"})
        form = asked[0] if asked else None
        decision = (form.requested_schema.get("properties", {}).get("decision", {}) if form else {})
        check(
            name("asked"),
            c.protocol_version == "2026-07-28"
            and len(asked) == 1
            and form.mode == "form"
            and "write 9 bytes to approved.txt" in form.message
            and re.search(r"Approval ap-[0-9a-f]{16}\b", form.message)
            and [o.get("const") for o in decision.get("oneOf", [])] == ["approve", "approve-for-session", "deny"]
            and form.requested_schema.get("required") == ["decision"],
            f"version {c.protocol_version}, asked {asked}",
        )
        check(
            name("approve"),
            not r.is_error and effect(r).get("status") == "ok"
            and file(ep, "approved.txt") == "approved\n" and spent(ep) == 1,
            f"result {r}, file {file(ep, 'approved.txt')!r}, spent {spent(ep)}",
        )
        # What the stock client put on the wire: elicitation declared on every
        # request, and the retry carried the answer and the server's state.
        calls = [b for b in wire if b.get("method") == "tools/call"]
        retry = calls[-1]["params"] if calls else {}
        check(
            name("wire"),
            len(calls) == 2
            and declares_elicitation(wire)
            and "requestState" not in calls[0]["params"]
            and isinstance(retry.get("requestState"), str)
            and retry.get("inputResponses") == {"approval": {"action": "accept", "content": {"decision": "approve"}}},
            f"tools/call bodies {calls}",
        )

        for label, answer in [
            ("decline", types.ElicitResult(action="decline")),
            ("deny", types.ElicitResult(action="accept", content={"decision": "deny"})),
        ]:
            answers.append(answer)
            before = len(asked)
            r = await c.call_tool("ailang-write", {"path": f"{label}.txt", "content": "no\n"})
            check(
                name(label),
                len(asked) == before + 1 and r.is_error and effect(r).get("status") == "denied"
                and file(ep, f"{label}.txt") is None and spent(ep) == 1,
                f"result {r}, file {file(ep, f'{label}.txt')!r}, spent {spent(ep)}",
            )

        answers.append(types.ElicitResult(action="accept", content={"decision": "approve-for-session"}))
        args = {"path": "session.txt", "content": "again\n"}
        first = await c.call_tool("ailang-write", args)
        before = len(asked)
        second = await c.call_tool("ailang-write", args)
        records = {effect(first).get("record"), effect(second).get("record")}
        check(
            name("approve_for_session"),
            effect(first).get("status") == "ok" and effect(second).get("status") == "ok"
            and len(asked) == before and None not in records and len(records) == 2
            and file(ep, "session.txt") == "again\n" and spent(ep) == 3,
            f"first {first}, second {second}, asked {len(asked) - before} more, spent {spent(ep)}",
        )
        # Only that exact request: other content asks again (declined here).
        answers.append(types.ElicitResult(action="decline"))
        r = await c.call_tool("ailang-write", {"path": "session.txt", "content": "other\n"})
        check(
            name("for_session_is_exact"),
            len(asked) == before + 1 and effect(r).get("status") == "denied"
            and file(ep, "session.txt") == "again\n" and spent(ep) == 3,
            f"result {r}, asked {len(asked) - before}, spent {spent(ep)}",
        )


async def operator(label, mode, ask, elicits, decide):
    """A client that cannot be asked (or a grant only the operator answers):
    the tool error names the approval and nothing runs; the operator decides
    with `worldd DECIDE`; the same call then runs once (or records the denial)."""
    ep, wire, asked = f"ask-{label.replace('_', '-')}", [], []
    token = mint(ep, ask, "Workspace.Write")
    version = "2025-11-25" if mode == "legacy" else "2026-07-28"

    async def person(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    def name(n):
        return f"mcp_{label}.{n}"

    args = {"path": f"{label}.txt", "content": f"{label}\n"}
    http, client = mcp_client(token, mode, wire, person if elicits else None)
    async with http, client as c:
        r = await c.call_tool("ailang-write", args)
        id_ = waiting(r)
        listed = pending(ep).get(id_, {}) if id_ else {}
        check(
            name("waits"),
            c.protocol_version == version and id_ and not asked and declares_elicitation(wire) == elicits
            and file(ep, args["path"]) is None and spent(ep) == 0
            and f"write {len(args['content'])} bytes to {args['path']}" in listed.get("summary", "")
            and (ask != "--ask-operator" or "the operator only" in r.content[0].text),
            f"version {c.protocol_version}, asked {asked}, result {r}, listed {listed}, wire {wire}",
        )
        if not id_:
            return

        if decide == "deny":
            rc, said = worldd("deny", id_, "--note", "not in this test")
            r = await c.call_tool("ailang-write", args)
            check(
                name("deny"),
                rc == 0 and r.is_error and effect(r).get("status") == "denied" and not asked
                and file(ep, args["path"]) is None and spent(ep) == 0,
                f"deny said {said!r}; result {r}, spent {spent(ep)}",
            )
            return

        rc, said = worldd("approve", id_)
        r = await c.call_tool("ailang-write", args)
        check(
            name("approve"),
            rc == 0 and not r.is_error and effect(r).get("status") == "ok" and not asked
            and file(ep, args["path"]) == args["content"] and spent(ep) == 1 and id_ not in pending(ep),
            f"approve said {said!r}; result {r}, file {file(ep, args['path'])!r}, spent {spent(ep)}",
        )
        # Used once: the same call waits on a new approval, and runs nothing.
        r = await c.call_tool("ailang-write", args)
        again = waiting(r)
        check(
            name("once"),
            again is not None and again != id_ and spent(ep) == 1,
            f"result {r}, spent {spent(ep)}",
        )


def show(events):
    return " ".join(MessageToJson(e, indent=None) for e in events)


async def a2a_send(client, data, task_id=None, skill="ailang-write"):
    """One SendMessage with one data part (naming `skill` unless None):
    its events, and the task when the answer is one."""
    msg = new_data_message(data, role=Role.ROLE_USER, task_id=task_id)
    req = SendMessageRequest(message=msg, metadata={"skill_id": skill} if skill else None)
    events = [ev async for ev in client.send_message(req)]
    task = events[0].task if len(events) == 1 and events[0].HasField("task") else None
    return events, task


async def a2a():
    """SendMessage under an asking grant: input-required with the approval;
    the operator approves; the same task id sent again runs once, then replays."""
    ep = "ask-a2a"
    token = mint(ep, "--ask", "Workspace.Write")
    args = {"path": "a2a.txt", "content": "from a2a\n"}

    def name(n):
        return f"a2a.{n}"

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        client = await create_client(BASE, ClientConfig(httpx_client=http, streaming=False))

        async def send(task_id=None):
            return await a2a_send(client, args, task_id)

        events, task = await send()
        data = get_data_parts(task.status.message.parts)[0] if task and task.status.message.parts else {}
        approval = data.get("approval", {})
        id_ = approval.get("id", "")
        check(
            name("input_required"),
            task is not None
            and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            and re.fullmatch(r"ap-[0-9a-f]{16}", id_)
            and approval.get("state") == "pending"
            and approval.get("approver") == "anyone"
            and (approval.get("effect"), approval.get("scope")) == ("Workspace.Write", "worktree")
            and (approval.get("cost"), approval.get("budgetLeft")) == (1, 5)
            and "write 9 bytes to a2a.txt" in approval.get("summary", "")
            and approval.get("expiresAt")
            and f"worldd approve {id_}" in data.get("text", "")
            and not task.artifacts
            and file(ep, "a2a.txt") is None and spent(ep) == 0,
            f"events {show(events)}",
        )
        if task is None or not id_:
            return

        # Sent again before anyone decided: still waiting, on the same approval.
        events, again = await send(task.id)
        data = get_data_parts(again.status.message.parts)[0] if again and again.status.message.parts else {}
        check(
            name("resend_waits"),
            again is not None and again.id == task.id
            and again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            and data.get("approval", {}).get("id") == id_ and spent(ep) == 0,
            f"events {show(events)}",
        )

        rc, said = worldd("approve", id_)
        events, done = await send(task.id)
        out = get_data_parts(done.artifacts[0].parts)[0] if done and done.artifacts else {}
        record = (out.get("world", {}).get("effects") or [{}])[0]
        check(
            name("approved_runs_once"),
            rc == 0 and done is not None and done.id == task.id
            and done.status.state == TaskState.TASK_STATE_COMPLETED
            and out.get("ok") is True and record.get("status") == "ok"
            and file(ep, "a2a.txt") == args["content"] and spent(ep) == 1,
            f"approve said {said!r}; events {show(events)}, spent {spent(ep)}",
        )

        written = (ROOT / ep / "a2a.txt").stat().st_mtime_ns if file(ep, "a2a.txt") is not None else None
        events, replay = await send(task.id)
        out2 = get_data_parts(replay.artifacts[0].parts)[0] if replay and replay.artifacts else {}
        check(
            name("resend_replays"),
            replay is not None and replay.id == task.id
            and replay.status.state == TaskState.TASK_STATE_COMPLETED
            and out2 == out and spent(ep) == 1
            and (ROOT / ep / "a2a.txt").stat().st_mtime_ns == written,
            f"events {show(events)}, spent {spent(ep)}",
        )


async def a2a_answer():
    """SendMessage under an asking grant, answered on the task: a message with
    the same task id whose one data part is {"approval": WORD} and no skill
    decides; deny records the denial, approve (on a new task) runs once."""
    ep = "ask-a2a-answer"
    token = mint(ep, "--ask", "Workspace.Write")

    def name(n):
        return f"a2a_answer.{n}"

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        client = await create_client(BASE, ClientConfig(httpx_client=http, streaming=False))
        for word, path, want in [("deny", "denied.txt", "denied"), ("approve", "approved.txt", "ok")]:
            args = {"path": path, "content": "answered\n"}
            events, task = await a2a_send(client, args)
            waits = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            events, done = await a2a_send(client, {"approval": word}, task.id if task else None, skill=None)
            out = get_data_parts(done.artifacts[0].parts)[0] if done and done.artifacts else {}
            record = (out.get("world", {}).get("effects") or [{}])[0]
            written = file(ep, path) == args["content"]
            check(
                name(word),
                waits and done is not None and done.id == task.id
                and done.status.state == TaskState.TASK_STATE_COMPLETED
                and record.get("status") == want and written == (want == "ok"),
                f"events {show(events)}, spent {spent(ep)}",
            )
        check(name("budget"), spent(ep) == 1, f"spent {spent(ep)}")


async def main():
    scenarios = [
        ("mcp_elicit", mcp_elicit()),
        ("mcp_operator", operator("operator", "auto", "--ask", elicits=False, decide="approve")),
        # The client could be asked; the grant says only the operator counts.
        ("mcp_operator_only", operator("operator_only", "auto", "--ask-operator", elicits=True, decide="deny")),
        # The legacy era has no in-band question, whatever the client declares.
        ("mcp_legacy", operator("legacy", "legacy", "--ask", elicits=True, decide="approve")),
        ("a2a", a2a()),
        ("a2a_answer", a2a_answer()),
    ]
    for label, scenario in scenarios:
        try:
            await scenario
        except BaseException as e:  # noqa: BLE001 - one scenario's crash is its failure, not the others'
            traceback.print_exc()
            check(label, False, f"{type(e).__name__}: {e}")


asyncio.run(main())
sys.exit(1 if failed else 0)
