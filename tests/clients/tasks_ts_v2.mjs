// Commands that outlast their request, through the stock MCP Tasks client
// (@modelcontextprotocol/ext-tasks 0.2.2 over @modelcontextprotocol/client
// 2.4.0, auto mode: 2026-07-28), public APIs only. The session is the one
// `createTaskSessionFromClient` makes; its `tools/call` and `tasks/*` go
// through a plain-fetch `rawDispatch`, as that generation requires of its
// host. A session of an episode of its own (its own worktree, its own spend)
// calls `workspace-exec`:
//
// - poll: `sh -c 'echo start; sleep 30; echo end'` comes back as a task (the
//   call requires one), the client polls it at the interval the server asks
//   while the output tail shows `start`, and settles on the command's result
//   some 30 s later, longer than any request may take.
// - cancel: another command, cancelled mid-run through the client; the
//   server's own view (a plain `tasks/get`) reads cancelled and no process of
//   the command remains.
//
// Both run at once. The episode is debited once per command.
//
//   SDK_DIR=<folder with node_modules> node tasks_ts_v2.mjs http://127.0.0.1:PORT WORLDD DB WORKSPACE_ROOT
//
// Prints one `ok <check>` or `FAIL <check>: reason` line per check; a failure
// also prints the raw requests and replies.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

// ext-tasks is ESM only and imports the client's ESM build: load both from
// SDK_DIR by their `import` entry points, so they share one client.
async function esm(pkg, subpath = ".") {
  const dir = join(process.env.SDK_DIR, "node_modules", pkg);
  const entry = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).exports[subpath].import;
  return import(pathToFileURL(join(dir, typeof entry === "string" ? entry : entry.default)).href);
}
const { Client, StreamableHTTPClientTransport } = await esm("@modelcontextprotocol/client");
const { createTaskSessionFromClient, resultFromTaskOutcome } = await esm("@modelcontextprotocol/ext-tasks", "./client");

const [base, worldd, db, root] = process.argv.slice(2);
const EPISODE = "tasks-ts";
const LONG = "echo start; sleep 30; echo end";
const STOPPED = "echo start; sleep 1207; echo end"; // its `sleep 1207` is looked for in /proc
const tmp = mkdtempSync(join(tmpdir(), "tasks-ts-"));
const show = (v) => JSON.stringify(v);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const wire = [];
let failed = false;

function check(name, cond, why) {
  console.log(cond ? `ok tasks_ts_v2.${name}` : `FAIL tasks_ts_v2.${name}: ${why}`);
  if (!cond) {
    failed = true;
    for (const line of wire.splice(0)) console.log(`    wire: ${line}`);
  }
}

function mint() {
  mkdirSync(join(root, EPISODE), { recursive: true });
  const out = join(tmp, "session");
  execFileSync(worldd, [
    "session", "mint", "--db", db, "--episode", EPISODE, "--grant", "Workspace.Exec=worktree:10",
    "--grant", "world.apply=world:10", "--yes", "--out", out,
  ], { stdio: "pipe" });
  return readFileSync(out, "utf8").trim();
}

// What the episode spent on Workspace.Exec.
async function spent() {
  const r = await fetch(`${base}/v1/episodes/${EPISODE}`);
  if (r.status === 404) return 0;
  return (await r.json()).spend.filter((g) => g.effect === "Workspace.Exec").reduce((n, g) => n + g.spent, 0);
}

// Processes on this machine whose command line holds `marker`.
function processesWith(marker) {
  const found = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmdline.includes(marker)) found.push(cmdline);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

async function connect() {
  const url = `${base}/mcp/`;
  const auth = { Authorization: `Bearer ${mint()}` };
  const clientInfo = { name: "world-ts-v2-tasks", version: "0.0.1" };
  const client = new Client(clientInfo, { versionNegotiation: { mode: "auto" } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } }));
  const protocolVersion = client.getNegotiatedProtocolVersion();
  // The host's raw path: ext-tasks frames the request's _meta; the headers
  // are the host's (Mcp-Name is the task's id on tasks/*, from the context).
  let nextId = 1;
  async function rawDispatch(request, options = {}) {
    const id = `raw-${nextId++}`;
    const response = await fetch(url, {
      method: "POST",
      signal: options.signal,
      headers: {
        ...auth,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "MCP-Protocol-Version": protocolVersion,
        "Mcp-Method": request.method,
        ...(request.method === "tools/call" ? { "Mcp-Name": request.params.name } : {}),
        ...(options.context?.headers ?? {}),
      },
      body: JSON.stringify({ jsonrpc: "2.0", id, ...request }),
    });
    const text = await response.text();
    wire.push(`> ${id} ${show(request)}`, `< ${id} ${response.status} ${text.trim().slice(0, 600)}`);
    const sse = (response.headers.get("content-type") ?? "").includes("text/event-stream");
    const reply = sse
      ? text.split("\n").filter((l) => l.startsWith("data:")).map((l) => JSON.parse(l.slice(5)))
          .findLast((m) => "result" in m || "error" in m)
      : JSON.parse(text);
    return reply.error ? { kind: "error", error: reply.error } : { kind: "result", result: reply.result };
  }
  const session = createTaskSessionFromClient(client, {
    endpointId: "world-ts-v2-tasks",
    rawDispatch,
    v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities: {} },
    onError: (e) => console.error("ext-tasks:", e),
  });
  check(
    "session",
    protocolVersion === "2026-07-28" && session.capabilities.execution && session.capabilities.cancellation,
    `version ${protocolVersion}, capabilities ${show(session.capabilities)}`,
  );
  return { client, session };
}

const exec = (session, script) =>
  session.callTool("workspace-exec", { command: "sh", args: ["-c", script] }, { task: { preference: "require" } });

async function polled(session) {
  const began = Date.now();
  const execution = await exec(session, LONG);
  const events = [];
  const { outcome } = await execution.settle({ onEvent: (ev) => events.push(ev) });
  const seconds = (Date.now() - began) / 1000;
  const working = events.filter((e) => e.type === "task" && e.task.status === "working");
  const result = outcome.status === "completed" ? resultFromTaskOutcome(outcome) : null;
  check(
    "poll",
    execution.kind === "task" &&
      working.length >= 2 &&
      working.every((e) => e.task.suggestedPollIntervalMs === 2000) &&
      working.some((e) => e.task.statusMessage?.includes("start")) &&
      outcome.status === "completed" &&
      result?.isError === false &&
      result?.structuredContent?.stdout === "start\nend\n" &&
      seconds >= 30,
    `after ${seconds} s: kind ${execution.kind}, events ${show(events.map((e) => e.task ?? e.outcome))}`,
  );
}

async function cancelled(session) {
  const execution = await exec(session, STOPPED);
  const taskId = execution.handle?.taskId;
  const until = Date.now() + 10_000;
  while (processesWith("sleep 1207").length === 0 && Date.now() < until) await sleep(100);
  const ran = processesWith("sleep 1207").length > 0;
  await execution.cancel();
  const outcome = await execution.result();
  // The client stops polling at the acknowledgement: ask the server itself
  // until the stop has been carried out.
  let view = await session.task(taskId).snapshot();
  while (view.status === "working" && Date.now() < until + 10_000) {
    await sleep(200);
    view = await session.task(taskId).snapshot();
  }
  const left = processesWith("sleep 1207");
  check(
    "cancel",
    execution.kind === "task" && ran && outcome.status === "cancelled" && view.status === "cancelled" && left.length === 0,
    `kind ${execution.kind}, ran ${ran}, outcome ${outcome.status}, server ${show(view)}, left ${show(left)}`,
  );
}

try {
  const { client, session } = await connect();
  const results = await Promise.allSettled([polled(session), cancelled(session)]);
  for (const [label, r] of [["poll", results[0]], ["cancel", results[1]]]) {
    if (r.status === "rejected") {
      console.error(r.reason);
      check(label, false, `${r.reason}`);
    }
  }
  const debited = await spent();
  check("debited_once_each", debited === 2, `spent ${debited} on Workspace.Exec`);
  await session.close();
  await client.close();
} catch (e) {
  console.error(e);
  check("run", false, `${e}`);
}
process.exit(failed ? 1 : 0);
