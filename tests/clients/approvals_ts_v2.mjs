// Grants that ask, through the TypeScript MCP client v2 (@modelcontextprotocol/client
// 2.4.0), default configuration, public APIs only: the elicitation capability
// declared in the constructor and an `elicitation/create` handler registered
// with setRequestHandler. In auto mode (2026-07-28) the client is asked
// in-band: accept runs the write once, decline records a denial. In its
// default mode (legacy) it cannot be asked: the tool error names the
// approval, `worldd approve` decides, and the same call runs once.
//
//   SDK_DIR=<folder with node_modules> node approvals_ts_v2.mjs http://127.0.0.1:PORT WORLDD DB WORKSPACE_ROOT
//
// Prints one `ok <check>` or `FAIL <check>: reason` line per check.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const require = createRequire(`${process.env.SDK_DIR}/package.json`);
const { Client, StreamableHTTPClientTransport } = await import(
  pathToFileURL(require.resolve("@modelcontextprotocol/client")).href
);

const [base, worldd, db, root] = process.argv.slice(2);
const tmp = mkdtempSync(join(tmpdir(), "approvals-ts-"));
let failed = false;
const show = (v) => JSON.stringify(v);

function check(name, cond, why) {
  console.log(cond ? `ok approvals_ts_v2.${name}` : `FAIL approvals_ts_v2.${name}: ${why}`);
  if (!cond) failed = true;
}

// A session of its own episode (and worktree) whose Workspace.Write asks.
function mint(episode) {
  mkdirSync(join(root, episode), { recursive: true });
  const out = join(tmp, `${episode}.session`);
  execFileSync(worldd, [
    "session", "mint", "--db", db, "--episode", episode, "--grant", "Workspace.Write=worktree:5",
    "--grant", "world.apply=world:10", "--ask", "Workspace.Write", "--yes", "--out", out,
  ], { stdio: "pipe" });
  return readFileSync(out, "utf8").trim();
}

// What the episode spent on Workspace.Write (no calls yet: no summary, 0).
async function spent(episode) {
  const r = await fetch(`${base}/v1/episodes/${episode}`);
  if (r.status === 404) return 0;
  const summary = await r.json();
  return summary.spend.filter((g) => g.effect === "Workspace.Write").reduce((n, g) => n + g.spent, 0);
}

const file = (episode, path) => (existsSync(join(root, episode, path)) ? readFileSync(join(root, episode, path), "utf8") : null);
const effect = (r) => r.structuredContent?.world?.effects?.[0] ?? {};

async function session(mode, episode) {
  const token = mint(episode);
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp/`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const options = { capabilities: { elicitation: { form: {} } } };
  if (mode === "auto") options.versionNegotiation = { mode: "auto" };
  const client = new Client({ name: "world-ts-v2-approvals", version: "0.0.1" }, options);
  // The person: each question takes the next answer.
  const asked = [];
  const answers = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push(request.params);
    return answers.shift();
  });
  await client.connect(transport);
  return { client, asked, answers };
}

async function inBand() {
  const ep = "ask-ts-auto";
  const { client, asked, answers } = await session("auto", ep);
  const name = (n) => `auto.${n}`;

  answers.push({ action: "accept", content: { decision: "approve" } });
  let r = await client.callTool({ name: "ailang-write", arguments: { path: "accepted.txt", content: "yes\n" } });
  const form = asked[0] ?? {};
  check(
    name("accept"),
    client.getNegotiatedProtocolVersion() === "2026-07-28" &&
      asked.length === 1 &&
      form.mode === "form" &&
      form.message?.includes("write 4 bytes to accepted.txt") &&
      show(form.requestedSchema?.required) === show(["decision"]) &&
      !r.isError &&
      effect(r).status === "ok" &&
      file(ep, "accepted.txt") === "yes\n" &&
      (await spent(ep)) === 1,
    `version ${client.getNegotiatedProtocolVersion()}, asked ${show(asked)}, result ${show(r)}, spent ${await spent(ep)}`,
  );

  answers.push({ action: "decline" });
  r = await client.callTool({ name: "ailang-write", arguments: { path: "declined.txt", content: "no\n" } });
  check(
    name("decline"),
    asked.length === 2 &&
      r.isError === true &&
      effect(r).status === "denied" &&
      file(ep, "declined.txt") === null &&
      (await spent(ep)) === 1,
    `asked ${asked.length}, result ${show(r)}, spent ${await spent(ep)}`,
  );
  await client.close();
}

async function operator() {
  const ep = "ask-ts-legacy";
  const { client, asked } = await session("default", ep);
  const name = (n) => `default.${n}`;
  const args = { path: "operator.txt", content: "operator\n" };

  let r = await client.callTool({ name: "ailang-write", arguments: args });
  const text = r.content?.[0]?.text ?? "";
  const id = /Approval (ap-[0-9a-f]{16}) /.exec(text)?.[1];
  check(
    name("waits"),
    client.getNegotiatedProtocolVersion() === "2025-11-25" &&
      asked.length === 0 &&
      r.isError === true &&
      id !== undefined &&
      text.includes("Nothing ran and nothing was debited") &&
      file(ep, args.path) === null &&
      (await spent(ep)) === 0,
    `version ${client.getNegotiatedProtocolVersion()}, asked ${show(asked)}, result ${show(r)}`,
  );
  if (id === undefined) return client.close();

  const approved = spawnSync(worldd, ["approve", id, "--db", db], { encoding: "utf8" });
  r = await client.callTool({ name: "ailang-write", arguments: args });
  check(
    name("approve"),
    approved.status === 0 &&
      !r.isError &&
      effect(r).status === "ok" &&
      asked.length === 0 &&
      file(ep, args.path) === args.content &&
      (await spent(ep)) === 1,
    `approve said ${show(approved.stdout + approved.stderr)}; result ${show(r)}, spent ${await spent(ep)}`,
  );
  await client.close();
}

for (const [label, scenario] of [["auto", inBand], ["default", operator]]) {
  try {
    await scenario();
  } catch (e) {
    // One scenario's crash is its failure, not the other's.
    console.error(e);
    check(label, false, `${e}`);
  }
}
process.exit(failed ? 1 : 0);
