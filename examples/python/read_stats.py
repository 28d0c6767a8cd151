"""read_stats: an effectful World transition for the exec runtime.

Calling convention (effectful):
  phase 1 stdin  {"phase":"plan","args":{"path":"notes.txt"}}
          stdout a world/effect-plan/v1 asking one Workspace.Read of that path,
                 with "finish": true (or a refusal: no effects and a result);
  phase 2 stdin  {"phase":"finish","args":…,"results":[{"id","effect","status","record","output"}]}
          stdout the result, composed from the handler's output.
The coordinator adds the "world" block (effect statuses, record and plan refs).
"""

import json
import sys

PLAN = "world/effect-plan/v1"


def refuse(reason):
    return {"plan": PLAN, "effects": [], "finish": False, "result": {"ok": False, "refused": reason}}


def plan(args):
    unknown = sorted(set(args) - {"path"})
    if unknown:
        return refuse('unknown argument "%s"; examples.read-stats admits only: path' % unknown[0])
    path = args.get("path")
    if not isinstance(path, str):
        return refuse('argument "path" must be a string')
    if not path or path.startswith("/") or path.startswith("-") or ".." in path.split("/"):
        return refuse(
            'path %s refused: it must be relative and non-empty, with no ".." segment and no leading "-"'
            % json.dumps(path)
        )
    effect = {"id": "e1", "effect": "Workspace.Read", "scope": "worktree", "cost": 1,
              "payload": {"op": "read", "path": path}}
    return {"plan": PLAN, "effects": [effect], "finish": True, "result": None}


def finish(args, results):
    r = results[0]
    out = r.get("output") or {}
    if r.get("status") != "ok":
        return {"ok": False, "status": r.get("status"), "refused": "the Workspace.Read effect ended %s" % r.get("status")}
    if not out.get("ok"):
        return {"ok": False, "status": "ok", "refused": out.get("refused", "the read was refused")}
    text = out["content"]
    return {"ok": True, "path": args["path"], "words": len(text.split()), "lines": len(text.splitlines()),
            "chars": len(text)}


def main(input_text: str) -> str:
    request = json.loads(input_text)
    if request.get("phase") == "plan":
        return json.dumps(plan(request.get("args") or {}))
    if request.get("phase") == "finish":
        return json.dumps(finish(request.get("args") or {}, request.get("results") or []))
    raise SystemExit("unknown phase")


if __name__ == "__main__":
    sys.stdout.write(main(sys.stdin.read()))
