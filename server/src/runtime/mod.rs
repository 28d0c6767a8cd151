//! Transition runtimes behind one calling convention: `main(input) -> output`,
//! a JSON object in and a JSON object out.

pub mod builtin;
pub mod exec;

use crate::registry::descriptor::{Descriptor, RuntimeSpec};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use world_store::Ref;

/// Each phase (plan, finish, or a pure run) is bounded by this.
pub const PHASE_DEADLINE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseError {
    /// The run failed, timed out, or broke a limit; the detail is for stderr.
    Failed(String),
    /// It ran, but what it printed is not a JSON object.
    NotAnObject,
    /// The runtime cannot run this transition at all (unknown builtin, bad source).
    Convention(String),
}

pub struct Runtimes {
    pub exec: exec::ExecRuntime,
}

impl Runtimes {
    pub fn new(confinement: std::sync::Arc<crate::confine::Confinement>) -> Runtimes {
        Runtimes { exec: exec::ExecRuntime::new(confinement) }
    }

    /// Runs one phase of `d` with `input`. `source` gives the pinned source bytes
    /// (only exec transitions need them).
    pub async fn run(
        &self,
        d: &Descriptor,
        source: impl FnOnce(&Ref) -> Result<Vec<u8>, String>,
        input: &Value,
    ) -> Result<Value, PhaseError> {
        let output = match &d.runtime {
            RuntimeSpec::Builtin { name } => {
                let b =
                    builtin::find(name).ok_or_else(|| PhaseError::Convention(format!("no builtin named {name:?}")))?;
                (b.run)(input).map_err(PhaseError::Failed)?
            }
            RuntimeSpec::Exec { interpreter_path } => {
                let src = source(&d.transition_fn).map_err(PhaseError::Convention)?;
                let bytes = world_store::canonical::to_vec(input);
                let out =
                    self.exec.run(Path::new(interpreter_path), d.interpreter, &src, &bytes, PHASE_DEADLINE).await?;
                serde_json::from_slice(&out).map_err(|_| PhaseError::NotAnObject)?
            }
        };
        if output.is_object() { Ok(output) } else { Err(PhaseError::NotAnObject) }
    }
}
