// The TypeScript MCP SDK (@modelcontextprotocol/sdk 1.32.2) against worldd.
//
//   TOKEN=<64 hex> SDK_DIR=<folder with node_modules> node mcp_ts.mjs http://127.0.0.1:PORT/mcp/
//
// Prints one `ok <check>` or `FAIL <check>: reason` line per check.
import { createRequire } from "node:module";

const require = createRequire(`${process.env.SDK_DIR}/package.json`);
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { McpError } = require("@modelcontextprotocol/sdk/types.js");

const url = process.argv[2];
const REF = /^sha256:[0-9a-f]{64}$/;
let failed = false;

function check(name, cond, why) {
  console.log(cond ? `ok mcp_ts.${name}` : `FAIL mcp_ts.${name}: ${why}`);
  if (!cond) failed = true;
}
const show = (v) => JSON.stringify(v);

// Every exchange as [method, JSON-RPC method or id, HTTP status].
const wire = [];
async function recordingFetch(input, init = {}) {
  const res = await fetch(input, init);
  const body = typeof init.body === "string" ? JSON.parse(init.body) : {};
  wire.push([init.method ?? "GET", body.method ?? null, body.id, res.status]);
  return res;
}

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOKEN}` } },
    fetch: recordingFetch,
  });
  const client = new Client({ name: "world-ts-client", version: "0.0.1" });
  await client.connect(transport);
  check(
    "initialize",
    client.getServerVersion()?.name === "worldd" &&
      transport.protocolVersion === "2025-11-25" &&
      show(wire[0]) === show(["POST", "initialize", 0, 200]) &&
      client.getServerCapabilities()?.tools !== undefined,
    `server ${show(client.getServerVersion())}, version ${transport.protocolVersion}, wire ${show(wire)}`,
  );

  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  const read = byName["ailang-read"];
  check(
    "tools_list",
    byName.tools_decho?.inputSchema?.type === "object" &&
      show(read?.inputSchema?.required) === show(["path"]) &&
      read?.outputSchema?.properties?.world !== undefined,
    `tools ${show(Object.keys(byName))}`,
  );

  let r = await client.callTool({ name: "tools_decho", arguments: { n: 1 } });
  check(
    "call_echo",
    !r.isError &&
      show(r.structuredContent?.echo) === show({ n: 1 }) &&
      show(r.structuredContent?.world?.effects) === "[]" &&
      show(JSON.parse(r.content[0].text)) === show(r.structuredContent),
    `result ${show(r)}`,
  );

  r = await client.callTool({ name: "ailang-read", arguments: { path: "hello.txt" } });
  const s = r.structuredContent ?? {};
  const eff = s.world?.effects?.[0] ?? {};
  check(
    "call_read",
    s.ok === true &&
      s.content === "hello from World\n" &&
      eff.status === "ok" &&
      REF.test(eff.record ?? "") &&
      REF.test(s.world?.plan ?? ""),
    `result ${show(r)}`,
  );

  let err = null;
  try {
    await client.callTool({ name: "no-such-tool", arguments: {} });
  } catch (e) {
    err = e;
  }
  check("unknown_tool", err instanceof McpError && err.code === -32602, `threw ${err}`);

  err = null;
  try {
    await client.callTool({ name: "fixture_snot-json", arguments: {} });
  } catch (e) {
    err = e;
  }
  check("host_failure", err instanceof McpError && err.code === -32603, `threw ${err}`);

  // A stateless server answers the SDK's standalone GET stream with 405.
  check("get_405", wire.some(([m, , , st]) => m === "GET" && st === 405), `wire ${show(wire)}`);
  await client.close();
}

try {
  await main();
} catch (e) {
  console.error(e);
  console.log(`FAIL mcp_ts: ${e}`);
  failed = true;
}
process.exit(failed ? 1 : 0);
