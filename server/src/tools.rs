//! A session's tools: the views of the transitions its grants show, and the
//! MCP surface (with compiled argument validators) built from them, cached
//! per registry head and visible set. The one function behind `tools/list`,
//! `tools/call` and the agent card.

use crate::coordinator::Coordinator;
use crate::registry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use world_protocol::surface::{self, Surface, SurfaceError, ToolView};
use world_store::{Grant, Ref, Snapshot};

/// Most built tool views kept (per registry head and visible set).
pub const TOOL_VIEWS_CACHED_MAX: usize = 64;

/// What a session sees: its tool views and the MCP surface built from them.
pub struct SessionTools {
    pub views: Vec<ToolView>,
    pub surface: Result<Surface, SurfaceError>,
}

/// The tool views of every session that sees the same transitions of the same
/// registry revision are the same: they are built (and their argument
/// validators compiled) once, not on every POST.
#[derive(Default)]
pub struct ToolsCache {
    built: Mutex<HashMap<ToolsKey, Arc<SessionTools>>>,
}

/// The registry head and the ids of the transitions a session sees.
type ToolsKey = (Option<Ref>, Vec<String>);

impl ToolsCache {
    /// The session's tools as of `snap`: the one function behind `tools/list`,
    /// `tools/call` and the agent card (admission re-reads the registry itself).
    pub fn get(
        &self,
        coordinator: &Coordinator,
        snap: &Snapshot,
        grants: &[Grant],
        live: bool,
    ) -> Result<Arc<SessionTools>, String> {
        let registry = coordinator.registry_at(snap).map_err(|e| e.to_string())?;
        let head = registry.as_ref().map(|(h, _)| *h);
        let visible = registry::view(registry.as_ref().map(|(_, r)| r.as_ref()), grants, live);
        let key = (head, visible.iter().map(|d| d.id.clone()).collect::<Vec<_>>());
        if let Some(tools) = self.built.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(tools.clone());
        }
        let views: Vec<ToolView> = visible.into_iter().map(tool_view).collect();
        let surface = surface::build_surface(&views);
        let tools = Arc::new(SessionTools { views, surface });
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        // Only the current revision is worth keeping.
        if built.len() >= TOOL_VIEWS_CACHED_MAX || built.keys().any(|(h, _)| *h != head) {
            built.clear();
        }
        built.insert(key, tools.clone());
        Ok(tools)
    }
}

pub fn tool_view(d: &registry::Descriptor) -> ToolView {
    ToolView {
        id: d.id.clone(),
        title: d.title.clone(),
        description: d.description.clone(),
        input_schema: d.input_schema.clone(),
        output_schema: Some(d.output_schema.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_seeing_the_same_tools_share_one_built_surface_until_the_registry_moves() {
        use world_store::{NewObject, Op, Reads, RegistryPublish, Store, WorldStore};
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(&dir.path().join("world.db"), 1).unwrap();
        let builtin = crate::publish::PublishRequest { manifest: None, builtin: true, replace: false };
        crate::publish::publish(&store, &builtin).unwrap();
        let (coordinator, cache) = (Coordinator::default(), ToolsCache::default());
        let tools = |grants: &[Grant]| cache.get(&coordinator, &store.snapshot().unwrap(), grants, true).unwrap();
        let apply = [Grant::new("world.apply", "world", 5)];
        let pure = tools(&apply);
        assert!(Arc::ptr_eq(&pure, &tools(&apply)), "the same view is built once");
        assert!(pure.views.iter().any(|v| v.id == "tools.echo"));
        let read = [apply[0].clone(), Grant::new("Workspace.Read", "worktree", 5)];
        let reader = tools(&read);
        assert!(reader.views.len() > pure.views.len(), "a grant shows more tools");
        assert!(Arc::ptr_eq(&reader, &tools(&read)));

        let (head, mut reg) = registry::load(&store.snapshot().unwrap()).unwrap().unwrap();
        reg.transitions.iter_mut().find(|d| d.id == "tools.echo").unwrap().description = "moved".into();
        let object = NewObject::derived(registry::TRANSITION_REGISTRY, "test", reg.to_bytes());
        store
            .call(Op::PublishRegistry(RegistryPublish {
                name: registry::TRANSITION_REGISTRY.into(),
                expected: Some(head),
                head: object.hash,
                entries: reg.transitions.iter().map(|d| (d.id.clone(), d.transition_fn)).collect(),
                objects: vec![object],
            }))
            .unwrap();
        let moved = tools(&apply);
        assert!(!Arc::ptr_eq(&pure, &moved), "a new registry revision builds anew");
        let echo = moved.views.iter().find(|v| v.id == "tools.echo").unwrap();
        assert_eq!(echo.description, "moved");
    }
}
