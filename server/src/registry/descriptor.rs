//! The descriptor vocabulary: what a transition is (its id, pinned source and
//! interpreter, runtime, schemas, access and declared effects) and the
//! semantic ids of the objects that hold them. Below both the registry and
//! the builtin runtime, which each name descriptors.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use world_store::Ref;

/// The registry head and the semantic id of its objects.
pub const TRANSITION_REGISTRY: &str = "world/transition-registry/v1";
pub const TRANSITION_SOURCE: &str = "world/transition-source/v1";
pub const INTERPRETER_OBJECT: &str = "world/interpreter/v1";
pub const INTERPRETER_BINARY: &str = "world/interpreter-binary/v1";
/// Every transition runs under semantics epoch 1 in this release.
pub const SEMANTICS_EPOCH: u64 = 1;
/// Largest transition source file or interpreter binary accepted at publish.
pub const SOURCE_BYTES_MAX: u64 = 1 << 20;
pub const INTERPRETER_BYTES_MAX: u64 = 48 << 20;
/// Most descriptors in one registry revision.
pub const DESCRIPTORS_MAX: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    pub effect: String,
    pub scope: String,
    pub cost: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum RuntimeSpec {
    /// Native, shipped in the binary, found by name.
    Builtin { name: String },
    /// A pinned interpreter runs the pinned source as a subprocess.
    Exec { interpreter_path: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Descriptor {
    pub id: String,
    pub title: String,
    pub description: String,
    pub transition_fn: Ref,
    pub interpreter: Ref,
    pub semantics_epoch: u64,
    pub runtime: RuntimeSpec,
    pub input_schema: Value,
    pub output_schema: Value,
    pub access: Access,
    pub declared_effects: Vec<Access>,
}

impl Descriptor {
    pub fn is_pure(&self) -> bool {
        self.declared_effects.is_empty()
    }
}
