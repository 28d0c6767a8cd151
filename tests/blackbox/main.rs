//! Black-box tests of `worldd`: each test starts the real binary on its own
//! temporary store (port 0, so tests run in parallel) and speaks HTTP to it or
//! runs its command line. Every JSON reply of a `/v1` route is also checked
//! against `docs/openapi.json` (see `openapi.rs`), so the document and the
//! daemon cannot disagree on a status or a shape unnoticed.
//!
//! A daemon per test rather than one per file: a daemon held in a `static`
//! would never be dropped, so it would outlive the test binary.

mod approvals;
mod cli;
#[path = "../../store/tests/common/cluster.rs"]
mod cluster;
mod episodes;
mod fixture;
mod floods;
mod harness;
mod nodes;
mod openapi;
#[path = "../common/process.rs"]
mod process;
mod provenance;
mod publish;
mod quickstart;
mod reads;
mod rest;
mod sessions;
mod tasks;
mod told;
