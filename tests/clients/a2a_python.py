"""The Python A2A SDK (a2a-sdk 1.3.0) against worldd: the card leads it to the
A2A 1.0 JSON-RPC interface (`SendMessage`, `GetTask` with history,
`ListTasks` paged, `CancelTask` refused as the spec says, the extended card,
`SendStreamingMessage` and `SubscribeToTask` under the client's default 5 s
read timeout).

    TOKEN=<64 hex> python a2a_python.py http://127.0.0.1:PORT

Prints one `ok <check>` or `FAIL <check>: reason` line per check; a failure
also prints the SDK's wire requests and the replies.
"""

import asyncio
import os
import re
import sys
import traceback

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.helpers import get_data_parts, new_data_message
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError

from a2a_checks import Checks, show

BASE = sys.argv[1]
TOKEN = os.environ["TOKEN"]
checks = Checks("a2a_python")
check = checks.check




async def main():
    hooks = checks.hooks()
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, event_hooks=hooks) as http:
        for path in ["/.well-known/agent-card.json", "/.well-known/agent.json"]:
            card = await A2ACardResolver(http, BASE, agent_card_path=path).get_agent_card()
            skills = [s.id for s in card.skills]
            urls = [i.url for i in card.supported_interfaces]
            check(
                f"card{path.replace('/.well-known/', ':')}",
                card.name == "worldd" and "ailang-read" in skills and "tools.echo" in skills
                and urls and all(u == f"{BASE}/a2a/" for u in urls),
                f"card {show(card)}",
            )

        client = await create_client(BASE, ClientConfig(httpx_client=http, streaming=False))
        msg = new_data_message({"path": "hello.txt"}, role=Role.ROLE_USER)
        req = SendMessageRequest(message=msg, metadata={"skill_id": "ailang-read"})
        events = [ev async for ev in client.send_message(req)]
        task = events[0].task if len(events) == 1 and events[0].HasField("task") else None
        out = get_data_parts(task.artifacts[0].parts)[0] if task and task.artifacts else {}
        check(
            "send_message",
            task is not None
            and task.status.state == TaskState.TASK_STATE_COMPLETED
            and out.get("ok") is True
            and out.get("content") == "hello from World\n"
            and out.get("world", {}).get("effects", [{}])[0].get("status") == "ok",
            f"events {show(*events)}",
        )
        if task is None:
            return

        spoken = [w for w in checks.wire if w.startswith("> POST") and "/a2a/" in w]
        check(
            "speaks_1_0",
            spoken
            and all("a2a-version=1.0" in w for w in spoken)
            and re.search(r'"method":\s*"SendMessage"', spoken[0]),
            "the SDK did not pick the 1.0 interface",
        )

        again = await client.get_task(GetTaskRequest(id=task.id))
        check(
            "get_task",
            again.id == task.id
            and again.status.state == TaskState.TASK_STATE_COMPLETED
            and get_data_parts(again.artifacts[0].parts)[0] == out
            and again.metadata == task.metadata,
            f"sent {show(task)}, got {show(again)}",
        )

        last = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        check(
            "get_task_history",
            len(last.history) == 1
            and last.history[0].role == Role.ROLE_AGENT
            and get_data_parts(last.history[0].parts)[0] == out,
            f"got {show(last)}",
        )

        # Every task of the session's episode, newest first, one per page.
        listed, token, totals = [], "", set()
        for _ in range(100):
            page = await client.list_tasks(ListTasksRequest(page_size=1, page_token=token))
            listed.extend(page.tasks)
            totals.add(page.total_size)
            token = page.next_page_token
            if not token:
                break
        check(
            "list_tasks",
            listed
            and listed[0].id == task.id
            and listed[0].status.state == TaskState.TASK_STATE_COMPLETED
            and not listed[0].artifacts
            and len({t.id for t in listed}) == len(listed)
            and totals == {len(listed)},
            f"listed {[t.id for t in listed]}, totals {totals}",
        )
        done = await client.list_tasks(
            ListTasksRequest(context_id=task.context_id, status=TaskState.TASK_STATE_COMPLETED, include_artifacts=True)
        )
        check(
            "list_tasks_filtered",
            [t.id for t in done.tasks] == [task.id]
            and get_data_parts(done.tasks[0].artifacts[0].parts)[0] == out
            and done.next_page_token == "",
            f"got {show(done)}",
        )

        try:
            await client.cancel_task(CancelTaskRequest(id=task.id))
            check("cancel_task", False, "a completed task was canceled")
        except TaskNotCancelableError as e:
            check(
                "cancel_task",
                (e.data or {}).get("state") == "TASK_STATE_COMPLETED"
                and "never undone" in (e.data or {}).get("detail", ""),
                f"data {e.data!r}",
            )
        try:
            await client.cancel_task(CancelTaskRequest(id="no-such-task"))
            check("cancel_unknown_task", False, "an unknown task was canceled")
        except TaskNotFoundError as e:
            check("cancel_unknown_task", (e.data or {}).get("taskId") == "no-such-task", f"data {e.data!r}")

        extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        check(
            "extended_card",
            extended.capabilities.extended_agent_card
            and [s.id for s in extended.skills] == skills
            and any("GetExtendedAgentCard" in w for w in checks.wire),
            f"card {show(extended)}",
        )

        await streams(http, client)


def python_run(script, return_immediately=False):
    msg = new_data_message({"command": "python3", "args": ["-c", script]}, role=Role.ROLE_USER)
    config = SendMessageConfiguration(return_immediately=return_immediately)
    return SendMessageRequest(message=msg, metadata={"skill_id": "workspace-exec"}, configuration=config)


async def streams(http, client):
    """A command streamed: its task, its output as it comes (a 6 s silence
    kept alive under the 5 s read timeout), its end; a running task
    subscribed to; an ended one refused."""
    streamer = await create_client(BASE, ClientConfig(httpx_client=http, streaming=True))
    script = "import time; print('one', flush=True); time.sleep(6); print('two', flush=True)"
    events = [ev async for ev in streamer.send_message(python_run(script))]
    kinds = [ev.WhichOneof("payload") for ev in events]
    chunks = [ev.artifact_update for ev in events
              if ev.HasField("artifact_update") and ev.artifact_update.artifact.artifact_id == "live-output"]
    text = "".join(p.text for c in chunks for p in c.artifact.parts)
    check(
        "stream_command",
        kinds[0] == "task"
        and events[0].task.status.state == TaskState.TASK_STATE_WORKING
        and text == "one\ntwo\n"
        and chunks[-1].last_chunk
        and all(c.append for c in chunks[1:])
        and kinds[-1] == "status_update"
        and events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED,
        f"events {show(*[getattr(ev, k) for ev, k in zip(events, kinds)])}",
    )
    sent = [ev async for ev in client.send_message(python_run("import time; time.sleep(2)", True))]
    task_id = sent[0].task.id
    subscribed = [ev async for ev in streamer.subscribe(SubscribeToTaskRequest(id=task_id))]
    check(
        "subscribe",
        subscribed[0].HasField("task")
        and subscribed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED,
        f"events {[ev.WhichOneof('payload') for ev in subscribed]}",
    )
    try:
        _ = [ev async for ev in streamer.subscribe(SubscribeToTaskRequest(id=task_id))]
        check("subscribe_ended", False, "an ended task was streamed")
    except UnsupportedOperationError as e:
        check("subscribe_ended", (e.data or {}).get("state") == "TASK_STATE_COMPLETED", f"data {e.data!r}")


try:
    asyncio.run(main())
except BaseException as e:  # noqa: BLE001 - report anything as a failure line
    traceback.print_exc()
    check("run", False, f"{type(e).__name__}: {e}")
sys.exit(1 if checks.failed else 0)
