"""Commands that outlast their request, through the Python A2A SDK (a2a-sdk
1.3.0), public APIs only, polling (`streaming=False`: the client sends
`SendMessage` and polls `GetTask` itself). A session of an episode of its own
(its own worktree, its own spend) sends `workspace-exec`, answered at once
(`returnImmediately`):

- poll: `sh -c 'echo start; sleep 30; echo end'` reads working, with its
  elapsed time and the tail of its output (`start`), for some 30 s, longer than
  any request may take (the client's own timeout is httpx's 5 s), then
  completed with the command's output as its artifact.
- cancel: another command, cancelled mid-run: the task answered reads
  canceled, no process of the command remains, GetTask says canceled, and a
  second cancel raises TaskNotCancelableError.

Both run at once. The episode is debited once per command.

    python tasks_python.py http://127.0.0.1:PORT WORLDD DB WORKSPACE_ROOT

Prints one `ok <check>` or `FAIL <check>: reason` line per check; a failure
also prints the SDK's wire requests and the replies.
"""

import asyncio
import pathlib
import subprocess
import sys
import tempfile
import time
import traceback

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_data_parts, new_data_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError

from a2a_checks import Checks, show

BASE, WORLDD, DB, ROOT = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
EPISODE = "tasks-python"
LONG = "echo start; sleep 30; echo end"
STOPPED = "echo start; sleep 1208; echo end"  # its `sleep 1208` is looked for in /proc
POLL_S = 1
checks = Checks("tasks_python", reply_chars=600)
check = checks.check




def mint():
    """A session of EPISODE (with a worktree of its own) that may run commands: its token."""
    (ROOT / EPISODE).mkdir(parents=True, exist_ok=True)
    out = pathlib.Path(tempfile.mkdtemp()) / "session"
    o = subprocess.run([WORLDD, "session", "mint", "--db", DB, "--episode", EPISODE,
                        "--grant", "Workspace.Exec=worktree:10", "--grant", "world.apply=world:10",
                        "--yes", "--out", str(out)], capture_output=True, text=True, timeout=60)
    if o.returncode != 0:
        raise RuntimeError(f"minting {EPISODE}: {o.stdout}{o.stderr}")
    return out.read_text().strip()


def spent():
    """What EPISODE spent on Workspace.Exec."""
    r = httpx.get(f"{BASE}/v1/episodes/{EPISODE}")
    r.raise_for_status()
    return sum(g["spent"] for g in r.json()["spend"] if g["effect"] == "Workspace.Exec")


def processes_with(marker):
    """Command lines of the processes on this machine that hold `marker`."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and marker in cmdline:
            found.append(cmdline)
    return found


async def send(client, script):
    """`sh -c script` through workspace-exec, answered at once: the task."""
    msg = new_data_message({"command": "sh", "args": ["-c", script]}, role=Role.ROLE_USER)
    req = SendMessageRequest(message=msg, metadata={"skill_id": "workspace-exec"},
                             configuration=SendMessageConfiguration(return_immediately=True))
    events = [ev async for ev in client.send_message(req)]
    if len(events) != 1 or not events[0].HasField("task"):
        raise AssertionError(f"not one task: {show(*events)}")
    return events[0].task


def running(task):
    """The status message's `running` data: elapsed seconds, output tail."""
    parts = get_data_parts(task.status.message.parts) if task.status.HasField("message") else []
    return parts[0].get("running", {}) if parts else {}


def output(task):
    return get_data_parts(task.artifacts[0].parts)[0] if task.artifacts else {}


async def polled(client):
    began = time.monotonic()
    task = await send(client, LONG)
    first, polls = task.status.state, []
    while task.status.state == TaskState.TASK_STATE_WORKING and time.monotonic() - began < 90:
        await asyncio.sleep(POLL_S)
        task = await client.get_task(GetTaskRequest(id=task.id))
        polls.append(running(task))
    seconds = time.monotonic() - began
    out = output(task)
    check(
        "poll",
        first == TaskState.TASK_STATE_WORKING
        and any("start" in p.get("outputTail", "") and "elapsedSeconds" in p for p in polls)
        and task.status.state == TaskState.TASK_STATE_COMPLETED
        and out.get("stdout") == "start\nend\n"
        and out.get("exit_code") == 0
        and seconds >= 30,
        f"after {seconds:.1f} s, {len(polls)} polls: {show(task)}",
    )


async def cancelled(client):
    task = await send(client, STOPPED)
    until = time.monotonic() + 10
    while not processes_with("sleep 1208") and time.monotonic() < until:
        await asyncio.sleep(0.1)
    ran = bool(processes_with("sleep 1208"))
    stopped = await client.cancel_task(CancelTaskRequest(id=task.id))
    left = processes_with("sleep 1208")
    after = await client.get_task(GetTaskRequest(id=task.id))
    check(
        "cancel",
        task.status.state == TaskState.TASK_STATE_WORKING
        and ran
        and stopped.status.state == TaskState.TASK_STATE_CANCELED
        and output(stopped).get("cancelled") is True
        and not left
        and after.status.state == TaskState.TASK_STATE_CANCELED,
        f"ran {ran}, cancelled {show(stopped)}, left {left}, then {show(after)}",
    )
    try:
        await client.cancel_task(CancelTaskRequest(id=task.id))
        check("cancel_again", False, "a canceled task was canceled again")
    except TaskNotCancelableError as e:
        check("cancel_again", (e.data or {}).get("state") == "TASK_STATE_CANCELED", f"data {e.data!r}")


async def main():
    hooks = checks.hooks()
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {mint()}"}, event_hooks=hooks) as http:
        client = await create_client(BASE, ClientConfig(httpx_client=http, streaming=False))
        results = await asyncio.gather(polled(client), cancelled(client), return_exceptions=True)
        for name, r in zip(["poll", "cancel"], results):
            if isinstance(r, BaseException):
                traceback.print_exception(r)
                check(name, False, f"{type(r).__name__}: {r}")
    debited = spent()
    check("debited_once_each", debited == 2, f"spent {debited} on Workspace.Exec")


try:
    asyncio.run(main())
except BaseException as e:  # noqa: BLE001 - report anything as a failure line
    traceback.print_exc()
    check("run", False, f"{type(e).__name__}: {e}")
sys.exit(1 if checks.failed else 0)
