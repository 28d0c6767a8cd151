// The JavaScript A2A SDK (@a2a-js/sdk 1.3.0) in its default configuration
// (A2A 1.0) against worldd: the card (and the extended card it declares),
// SendMessage with a data part and the skill id in metadata, GetTask,
// ListTasks paged, CancelTask refused as the spec says.
//
//   TOKEN=<64 hex> SDK_DIR=<folder with node_modules> node a2a_js.mjs http://127.0.0.1:PORT/
//
// Prints one `ok <check>` or `FAIL <check>: reason` line per check.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(`${process.env.SDK_DIR}/package.json`);
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } = await load(
  "@a2a-js/sdk/client",
);
const { Role, TaskState } = await load("@a2a-js/sdk");

const base = process.argv[2];
const REF = /^sha256:[0-9a-f]{64}$/;
let failed = false;
const show = (v) => JSON.stringify(v);
function check(name, cond, why) {
  console.log(cond ? `ok a2a_js.${name}` : `FAIL a2a_js.${name}: ${why}`);
  if (!cond) failed = true;
}

// Every request as [HTTP method, URL path, A2A-Version header, JSON-RPC method].
const wire = [];
const authFetch = async (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${process.env.TOKEN}`);
  const body = typeof init.body === "string" ? JSON.parse(init.body) : {};
  wire.push([init.method ?? "GET", new URL(String(input.url ?? input)).pathname, headers.get("a2a-version"), body.method ?? null]);
  return fetch(input, { ...init, headers });
};

async function main() {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
      transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    }),
  );
  const client = await factory.createFromUrl(base);
  const card = await client.getAgentCard();
  check(
    "card",
    card.name === "worldd" && card.skills.some((s) => s.id === "ailang-read") && card.skills.some((s) => s.id === "tools.echo"),
    `card ${show(card)}`,
  );
  // The card declares an extended card, so the client asks for it: the session's card again.
  check(
    "extended_card",
    card.capabilities?.extendedAgentCard === true &&
      show(wire.find(([m]) => m === "POST")) === show(["POST", "/a2a/", "1.0", "GetExtendedAgentCard"]),
    `wire ${show(wire)}`,
  );

  const task = await client.sendMessage({
    message: {
      messageId: `js-${Date.now()}`,
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "data", value: { path: "hello.txt" } } }],
      metadata: { skill_id: "ailang-read" },
    },
  });
  const out = task?.artifacts?.[0]?.parts?.[0]?.content?.value ?? {};
  const eff = out.world?.effects?.[0] ?? {};
  check(
    "send_message",
    task?.status?.state === TaskState.TASK_STATE_COMPLETED &&
      out.ok === true &&
      out.content === "hello from World\n" &&
      eff.status === "ok" &&
      REF.test(eff.record ?? "") &&
      REF.test(task.metadata?.world_ref ?? ""),
    `task ${show(task)}`,
  );
  check(
    "speaks_1_0",
    show(wire.find(([m, , , rpc]) => m === "POST" && rpc === "SendMessage")) === show(["POST", "/a2a/", "1.0", "SendMessage"]),
    `wire ${show(wire)}`,
  );

  const again = await client.getTask({ id: task.id });
  check(
    "get_task",
    again.id === task.id &&
      again.status?.state === TaskState.TASK_STATE_COMPLETED &&
      show(again.artifacts?.[0]?.parts?.[0]?.content?.value) === show(out) &&
      again.metadata?.entry_index === task.metadata?.entry_index,
    `sent ${show(task)}, got ${show(again)}`,
  );

  // A replay of the same message id returns the committed task, not a second run.
  const replay = await client.sendMessage({
    message: {
      messageId: task.id,
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "data", value: { path: "hello.txt" } } }],
      metadata: { skill_id: "ailang-read" },
    },
  });
  check(
    "replay_is_the_same_task",
    replay.id === task.id && replay.metadata?.entry_index === task.metadata?.entry_index,
    `first ${show(task.metadata)}, replay ${show(replay.metadata)}`,
  );

  // Every task of the session's episode, newest first, two per page.
  const listed = [];
  const totals = new Set();
  let pageToken = "";
  for (let i = 0; i < 100; i++) {
    // Every member of the request type (an unset enum would be sent as "UNRECOGNIZED").
    const page = await client.listTasks({
      tenant: "",
      contextId: "",
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageSize: 2,
      pageToken,
    });
    listed.push(...page.tasks);
    totals.add(page.totalSize);
    pageToken = page.nextPageToken;
    if (!pageToken) break;
  }
  const listedIds = listed.map((t) => t.id);
  check(
    "list_tasks",
    listedIds[0] === task.id &&
      listed[0].status?.state === TaskState.TASK_STATE_COMPLETED &&
      new Set(listedIds).size === listedIds.length &&
      show([...totals]) === show([listed.length]),
    `listed ${show(listedIds)}, totals ${show([...totals])}`,
  );

  for (const [id, name, state] of [
    [task.id, "TaskNotCancelableError", "TASK_STATE_COMPLETED"],
    ["no-such-task", "TaskNotFoundError", undefined],
  ]) {
    let error;
    try {
      await client.cancelTask({ id });
    } catch (e) {
      error = e;
    }
    const info = Array.isArray(error?.data) ? error.data.find((d) => d["@type"]?.endsWith("google.rpc.ErrorInfo")) : undefined;
    check(
      `cancel_task.${name}`,
      error?.name === name && info?.metadata?.taskId === id && info?.metadata?.state === state,
      `error ${error?.name}: ${error?.message} ${show(error?.data)}`,
    );
  }
}

try {
  await main();
} catch (e) {
  console.error(e);
  console.log(`FAIL a2a_js: ${e}`);
  failed = true;
}
process.exit(failed ? 1 : 0);
