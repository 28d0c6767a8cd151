//! The transition registry: descriptors, the registry object, publishing, and
//! the grant-filtered view that feeds `tools/list`, the agent card and admission.

use crate::limits::DAEMON_VERSION;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use world_store::{Grant, NewObject, ReadError, Ref, RegistryPublish, Snapshot, canonical};

pub mod descriptor;

pub use descriptor::*;

/// The payload of a `world/transition-registry/v1` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub registry: String,
    pub revision: u64,
    /// Sorted by id: registry byte order.
    pub transitions: Vec<Descriptor>,
}

impl Registry {
    pub fn get(&self, id: &str) -> Option<&Descriptor> {
        self.transitions.binary_search_by(|d| d.id.as_str().cmp(id)).ok().map(|i| &self.transitions[i])
    }

    /// Canonical bytes of the registry object.
    pub fn to_bytes(&self) -> Vec<u8> {
        canonical::to_vec(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

/// Does a live grant satisfy `access`? Budget here is the grant's, not what is
/// left of it: a spent grant still shows its tools, and calls are then denied
/// `denied:budget` by the broker.
pub fn grants_admit(grants: &[Grant], live: bool, access: &Access) -> bool {
    live && grants.iter().any(|g| g.effect == access.effect && g.scope == access.scope && g.budget >= access.cost)
}

/// The one view function: the descriptors a session may see and call, in registry order.
pub fn view<'r>(registry: Option<&'r Registry>, grants: &[Grant], live: bool) -> Vec<&'r Descriptor> {
    registry
        .map(|r| r.transitions.iter().filter(|d| grants_admit(grants, live, &d.access)).collect())
        .unwrap_or_default()
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("registry head {head} names no object")]
    Missing { head: Ref },
    #[error("registry object {head} is not a valid registry: {detail}")]
    Invalid { head: Ref, detail: String },
}

/// Loads the current registry (None when no head exists).
pub fn load(snapshot: &Snapshot) -> Result<Option<(Ref, Registry)>, LoadError> {
    let Some(head) = snapshot.head(TRANSITION_REGISTRY)? else { return Ok(None) };
    let bytes = snapshot.payload(&head)?.ok_or(LoadError::Missing { head })?;
    let registry: Registry =
        serde_json::from_slice(&bytes).map_err(|e| LoadError::Invalid { head, detail: e.to_string() })?;
    Ok(Some((head, registry)))
}

// ---- publishing ----

/// A manifest entry (a JSON array of these is a manifest).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestEntry {
    pub id: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub transition_fn_file: Option<String>,
    #[serde(default)]
    pub transition_fn: Option<String>,
    pub runtime: ManifestRuntime,
    pub input_schema: Value,
    pub output_schema: Value,
    pub access: Access,
    pub declared_effects: Vec<Access>,
    #[serde(default)]
    pub semantics_epoch: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ManifestRuntime {
    Builtin { name: String },
    Exec { interpreter: String },
}

/// What a publish will write, or the reason nothing changes.
pub struct PublishPlan {
    pub publish: Option<RegistryPublish>,
    pub revision: u64,
    pub head: Ref,
    pub descriptors: usize,
}

impl PublishPlan {
    pub fn summary(&self) -> String {
        match self.publish {
            Some(_) => format!(
                "published transition registry revision {} (head {}) with {} descriptor(s); the next request sees them",
                self.revision, self.head, self.descriptors
            ),
            None => format!(
                "transition registry UNCHANGED at revision {} (head {}); nothing written",
                self.revision, self.head
            ),
        }
    }
}

/// One transition ready to publish: its descriptor and the objects it pins.
pub struct Prepared {
    pub descriptor: Descriptor,
    pub objects: Vec<NewObject>,
}

/// The builtin interpreter: the daemon binary itself, by name and version.
pub fn builtin_interpreter() -> NewObject {
    let payload = canonical::to_vec(&serde_json::json!({"interpreter": "worldd-builtin", "version": DAEMON_VERSION}));
    NewObject::derived(INTERPRETER_OBJECT, "worldd/publish", payload)
}

fn check_schema(field: &str, id: &str, schema: &Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err(format!("transition {id}: {field} must be a JSON object"));
    }
    Ok(())
}

/// Validates and pins one manifest entry. Paths are relative to `base`.
pub fn prepare(entry: ManifestEntry, base: &Path, snapshot: &Snapshot) -> Result<Prepared, String> {
    let id = entry.id.clone();
    world_protocol::names::validate_transition_id(&id).map_err(|e| format!("transition id {id:?}: {e}"))?;
    check_schema("inputSchema", &id, &entry.input_schema)?;
    // MCP tools take an object; any other top-level type would refuse the whole
    // tool surface of every session that sees this transition.
    if entry.input_schema.get("type").is_some_and(|t| t != "object") {
        return Err(format!("transition {id}: inputSchema.type must be \"object\" (or absent)"));
    }
    check_schema("outputSchema", &id, &entry.output_schema)?;
    if entry.declared_effects.len() > 1 {
        return Err(format!("transition {id}: at most one declared effect in this release"));
    }
    if let Some(epoch) = entry.semantics_epoch
        && epoch != SEMANTICS_EPOCH
    {
        return Err(format!(
            "transition {id}: semanticsEpoch {epoch} is not nominated; this release serves epoch {SEMANTICS_EPOCH}"
        ));
    }
    let mut objects = vec![];
    let (runtime, interpreter) = match &entry.runtime {
        ManifestRuntime::Builtin { name } => {
            if crate::runtime::builtin::find(name).is_none() {
                return Err(format!("transition {id}: no builtin named {name:?}"));
            }
            let interp = builtin_interpreter();
            let r = interp.hash;
            objects.push(interp);
            (RuntimeSpec::Builtin { name: name.clone() }, r)
        }
        ManifestRuntime::Exec { interpreter } => {
            // Relative to the manifest, like transitionFnFile: never to whichever
            // process (CLI or daemon) happens to run the publish.
            let path = std::fs::canonicalize(base.join(interpreter))
                .map_err(|e| format!("transition {id}: interpreter {interpreter}: {e}"))?;
            let bytes = read_bounded(&path, INTERPRETER_BYTES_MAX)
                .map_err(|e| format!("transition {id}: interpreter {}: {e}", path.display()))?;
            let obj = NewObject::derived(INTERPRETER_BINARY, "worldd/publish", bytes);
            let r = obj.hash;
            objects.push(obj);
            (RuntimeSpec::Exec { interpreter_path: path.display().to_string() }, r)
        }
    };
    let transition_fn = match (&entry.transition_fn_file, &entry.transition_fn, &entry.runtime) {
        (Some(file), None, _) => {
            let path = base.join(file);
            let bytes = read_bounded(&path, SOURCE_BYTES_MAX)
                .map_err(|e| format!("transition {id}: transitionFnFile {}: {e}", path.display()))?;
            let obj = NewObject::derived(TRANSITION_SOURCE, "worldd/publish", bytes);
            let r = obj.hash;
            objects.push(obj);
            r
        }
        (None, Some(text), _) => {
            let r = Ref::parse(text).map_err(|e| format!("transition {id}: transitionFn: {e}"))?;
            let meta = snapshot.object_meta(&r).map_err(|e| e.to_string())?;
            match meta {
                Some(m) if m.semantic_id == TRANSITION_SOURCE => r,
                _ => {
                    return Err(format!(
                        "transition {id}: transitionFn {r} is not a {TRANSITION_SOURCE} object in this store"
                    ));
                }
            }
        }
        (None, None, ManifestRuntime::Builtin { name }) => {
            let obj = crate::runtime::builtin::source_object(name);
            let r = obj.hash;
            objects.push(obj);
            r
        }
        _ => return Err(format!("transition {id}: give exactly one of transitionFnFile and transitionFn")),
    };
    let descriptor = Descriptor {
        title: entry.title.unwrap_or_else(|| id.clone()),
        description: entry.description.unwrap_or_default(),
        id,
        transition_fn,
        interpreter,
        semantics_epoch: SEMANTICS_EPOCH,
        runtime,
        input_schema: entry.input_schema,
        output_schema: entry.output_schema,
        access: entry.access,
        declared_effects: entry.declared_effects,
    };
    Ok(Prepared { descriptor, objects })
}

fn read_bounded(path: &PathBuf, max: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > max {
        return Err(format!("{} bytes exceeds the limit of {max}", meta.len()));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}

/// Merges prepared transitions into the current registry. An identical
/// descriptor changes nothing; a different one under an existing id is refused
/// unless `replace` (the old revision stays in history either way).
pub fn plan_publish(
    current: Option<(Ref, Registry)>,
    prepared: Vec<Prepared>,
    replace: bool,
) -> Result<PublishPlan, String> {
    let (expected, mut registry) = match current {
        Some((head, r)) => (Some(head), r),
        None => (None, Registry { registry: TRANSITION_REGISTRY.into(), revision: 0, transitions: vec![] }),
    };
    let old = registry.clone();
    let mut objects = vec![];
    let mut seen = std::collections::HashSet::new();
    for p in prepared {
        let d = p.descriptor;
        if !seen.insert(d.id.clone()) {
            return Err(format!("transition {} appears twice in the manifest", d.id));
        }
        match registry.transitions.binary_search_by(|x| x.id.cmp(&d.id)) {
            Ok(i) if registry.transitions[i] == d => {}
            Ok(_) if !replace => {
                return Err(format!(
                    "transition {} is already published with different bytes; nothing written (pass --replace to publish a new revision of it)",
                    d.id
                ));
            }
            Ok(i) => registry.transitions[i] = d,
            Err(i) => registry.transitions.insert(i, d),
        }
        objects.extend(p.objects);
    }
    if registry.transitions.len() > DESCRIPTORS_MAX {
        return Err(format!("a registry holds at most {DESCRIPTORS_MAX} transitions"));
    }
    if registry.transitions == old.transitions && expected.is_some() {
        let head = expected.unwrap_or(Ref([0; 32]));
        return Ok(PublishPlan { publish: None, revision: old.revision, head, descriptors: old.transitions.len() });
    }
    registry.revision = old.revision + 1;
    let entries = registry.transitions.iter().map(|d| (d.id.clone(), d.transition_fn)).collect();
    let object = NewObject::derived(TRANSITION_REGISTRY, "worldd/publish", registry.to_bytes());
    let head = object.hash;
    objects.push(object);
    Ok(PublishPlan {
        revision: registry.revision,
        head,
        descriptors: registry.transitions.len(),
        publish: Some(RegistryPublish { name: TRANSITION_REGISTRY.into(), expected, head, objects, entries }),
    })
}

/// The shipped package: `tools.echo` and the coding tools.
pub fn builtin_manifest() -> Vec<ManifestEntry> {
    crate::runtime::builtin::BUILTINS
        .iter()
        .map(|b| ManifestEntry {
            id: b.id.to_string(),
            title: Some(b.title.to_string()),
            description: Some(b.description.to_string()),
            transition_fn_file: None,
            transition_fn: None,
            runtime: ManifestRuntime::Builtin { name: b.id.to_string() },
            input_schema: (b.input_schema)(),
            output_schema: (b.output_schema)(),
            access: b.access(),
            declared_effects: b.declared_effects(),
            semantics_epoch: None,
        })
        .collect()
}
