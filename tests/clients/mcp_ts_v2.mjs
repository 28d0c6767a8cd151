// The TypeScript MCP client v2 (@modelcontextprotocol/client 2.4.0) against
// worldd, twice: in its auto mode, which probes `server/discover` and must
// settle on 2026-07-28, and in its default mode, which speaks the legacy era.
//
//   TOKEN=<64 hex> SDK_DIR=<folder with node_modules> node mcp_ts_v2.mjs http://127.0.0.1:PORT/mcp/
//
// Prints one `ok <check>` or `FAIL <check>: reason` line per check.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(`${process.env.SDK_DIR}/package.json`);
const { Client, StreamableHTTPClientTransport, ProtocolError } = await import(
  pathToFileURL(require.resolve("@modelcontextprotocol/client")).href
);

const url = process.argv[2];
const MODERN = "2026-07-28";
const LEGACY = "2025-11-25";
const REF = /^sha256:[0-9a-f]{64}$/;
let failed = false;
const show = (v) => JSON.stringify(v);

async function thrown(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  return null;
}

async function session(mode, version) {
  const check = (name, cond, why) => {
    console.log(cond ? `ok mcp_ts_v2.${mode}.${name}` : `FAIL mcp_ts_v2.${mode}.${name}: ${why}`);
    if (!cond) failed = true;
  };
  // Every POST as [protocol-version header, JSON-RPC method].
  const wire = [];
  const recordingFetch = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    const body = typeof init.body === "string" ? JSON.parse(init.body) : {};
    if ((init.method ?? "GET") === "POST") wire.push([headers.get("mcp-protocol-version"), body.method ?? null]);
    return fetch(input, init);
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.TOKEN}` } },
    fetch: recordingFetch,
  });
  const options = mode === "auto" ? { versionNegotiation: { mode: "auto" } } : {};
  const client = new Client({ name: "world-ts-v2-client", version: "0.0.1" }, options);
  await client.connect(transport);
  const negotiated = client.getNegotiatedProtocolVersion();
  const probe = version === MODERN ? show(wire) === show([[MODERN, "server/discover"]]) : wire.some(([, m]) => m === "initialize");
  check(
    "negotiate",
    negotiated === version && probe && client.getServerVersion()?.name === "worldd",
    `version ${negotiated}, server ${show(client.getServerVersion())}, wire ${show(wire)}`,
  );

  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check(
    "tools_list",
    byName.tools_decho?.inputSchema?.type === "object" &&
      show(byName["ailang-read"]?.inputSchema?.required) === show(["path"]),
    `tools ${show(Object.keys(byName))}`,
  );

  let r = await client.callTool({ name: "tools_decho", arguments: { n: 1 } });
  check(
    "call_echo",
    !r.isError && show(r.structuredContent?.echo) === show({ n: 1 }) && show(JSON.parse(r.content[0].text)) === show(r.structuredContent),
    `result ${show(r)}`,
  );

  r = await client.callTool({ name: "ailang-read", arguments: { path: "hello.txt" } });
  const eff = r.structuredContent?.world?.effects?.[0] ?? {};
  check(
    "call_read",
    r.structuredContent?.content === "hello from World\n" && eff.status === "ok" && REF.test(eff.record ?? ""),
    `result ${show(r)}`,
  );

  r = await client.callTool({ name: "ailang-read", arguments: { path: "../outside.txt" } });
  check(
    "call_refused_path",
    Boolean(r.isError) === (version === MODERN) && r.structuredContent?.ok === false,
    `result ${show(r)}`,
  );

  const unknown = await thrown(client.callTool({ name: "no-such-tool", arguments: {} }));
  check("unknown_tool", unknown instanceof ProtocolError && unknown.code === -32602, `threw ${unknown}`);
  const host = await thrown(client.callTool({ name: "fixture_snot-json", arguments: {} }));
  check("host_failure", host instanceof ProtocolError && host.code === -32603, `threw ${host}`);

  const versions = new Set(wire.filter(([, m]) => m !== "initialize").map(([v]) => v));
  check(
    "one_era_throughout",
    show([...versions]) === show([version]) && wire.some(([, m]) => m === "initialize") === (version === LEGACY),
    `wire ${show(wire)}`,
  );
  await client.close();
}

try {
  await session("auto", MODERN);
  await session("default", LEGACY);
} catch (e) {
  console.error(e);
  console.log(`FAIL mcp_ts_v2: ${e}`);
  failed = true;
}
process.exit(failed ? 1 : 0);
