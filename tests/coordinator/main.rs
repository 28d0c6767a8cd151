//! Black-box proofs of the invocation coordinator: each test starts the real
//! `worldd` on its own temporary store and workspace, speaks A2A and REST to
//! it, runs its command line, and checks what lands on disk and in the log.
//!
//! - `exactly_once`: 64 concurrent calls on a budget of 10 run exactly 10 effects.
//! - `crash`: SIGKILL while effects run; resent task ids never run twice.
//! - `concurrency`: 8 episodes at once commit onto one valid chain.
//! - `confinement`: hostile paths are refused and nothing outside changes.
//! - `exec_runtime`: the Python examples, and transitions that misbehave.
//! - `bounds`: a run's memory bounded as a whole; eight bombs at once.
//! - `admission`: idempotency, R8, genesis, the pin, refusals, denial labels.
//! - `unrecorded`: EffectsUnrecorded produced by republishing mid-effect.
//! - `hostile`: the escape corpus (tests/hostile/) is blocked by the kernel, pure and exec alike.
//! - `unavailable`: where runs cannot be confined, `serve` refuses to start unless `--unconfined`.

mod admission;
mod bounds;
#[path = "../common/commit.rs"]
mod commit;
mod concurrency;
mod confinement;
mod crash;
mod exactly_once;
mod exec_runtime;
mod harness;
mod hostile;
#[path = "../common/process.rs"]
mod process;
mod unavailable;
mod unrecorded;
