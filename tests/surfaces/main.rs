//! Black-box proofs of the agent surfaces, rule by rule from the seed: each
//! test starts the real `worldd` on its own temporary store and workspace and
//! speaks raw HTTP/1.1 to it, so every header and byte is the test's own.
//!
//! - `mcp`: `POST /mcp/` — the 401s, transport checks, methods, results,
//!   batches, tool names and schemas, host failures, Origin/Host.
//! - `a2a`: `POST /a2a/` — every row of the error table, and the success shape.
//! - `a2a_spec`: `POST /a2a/` as A2A 1.0 has it — refusals with the spec's
//!   codes and reasons, the card's capabilities, CancelTask, history, ListTasks.
//! - `mcp_modern`: `POST /mcp/` in the 2026-07-28 era, beside the legacy one.
//! - `card`: the agent card, and that it and `tools/list` are one view.
//! - `reliability`: 200 task ids from 16 clients, twice, across a SIGKILL.
//! - `full_disk`: the store on a small tmpfs, filled: typed refusals, reads go on, writes resume.
//! - `metrics`: `GET /metrics` counts a known mix of calls exactly.
//! - `store`: registries `worldd publish` refuses, written through the store API.

mod a2a;
mod a2a_spec;
mod approvals;
mod card;
#[path = "../common/commit.rs"]
mod commit;
mod full_disk;
mod harness;
mod mcp;
mod mcp_modern;
mod metrics;
#[path = "../common/process.rs"]
mod process;
mod reliability;
mod store;
