//! Builtin transitions, shipped in the binary: `tools.echo` (pure) and the
//! coding tools, whose plan phase checks arguments and asks for one effect.

use crate::limits::DAEMON_VERSION;
use crate::registry::descriptor::{Access, TRANSITION_SOURCE};
use serde_json::{Map, Value, json};
use world_store::{NewObject, canonical};

pub const WORKTREE_SCOPE: &str = "worktree";
pub const EFFECT_PLAN: &str = "world/effect-plan/v1";
/// Longest path argument accepted by the coding tools.
pub const PATH_MAX: usize = 4096;
/// `workspace-exec` limits.
pub const EXEC_ARGS_MAX: usize = 16;
pub const EXEC_ARG_BYTES_MAX: usize = 512;
pub const SEARCH_QUERY_MAX: usize = 1024;

pub struct Builtin {
    pub id: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The one effect it declares, if any (scope `worktree`, cost 1).
    pub effect: Option<&'static str>,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    /// The transition: phase input in, phase output (a JSON object) out.
    pub run: fn(&Value) -> Result<Value, String>,
}

impl Builtin {
    pub fn access(&self) -> Access {
        match self.effect {
            Some(e) => Access { effect: e.into(), scope: WORKTREE_SCOPE.into(), cost: 0 },
            None => Access { effect: "world.apply".into(), scope: "world".into(), cost: 1 },
        }
    }

    pub fn declared_effects(&self) -> Vec<Access> {
        self.effect.iter().map(|e| Access { effect: (*e).into(), scope: WORKTREE_SCOPE.into(), cost: 1 }).collect()
    }
}

pub static BUILTINS: &[Builtin] = &[
    Builtin {
        id: "ailang-edit",
        title: "Edit (sandboxed)",
        description: "Replace exactly one occurrence of old_text with new_text in a worktree file.",
        effect: Some("Workspace.Write"),
        input_schema: || strict_schema(&["path", "old_text", "new_text"], &[]),
        output_schema: write_output_schema,
        run: |i| plan_tool(i, "ailang-edit", "Workspace.Write", &["path", "old_text", "new_text"], &[], edit_payload),
    },
    Builtin {
        id: "ailang-read",
        title: "Read (sandboxed)",
        description: "Read a UTF-8 file of the episode's worktree.",
        effect: Some("Workspace.Read"),
        input_schema: || strict_schema(&["path"], &[]),
        output_schema: read_output_schema,
        run: |i| plan_tool(i, "ailang-read", "Workspace.Read", &["path"], &[], |a| path_payload(a, "read", "path")),
    },
    Builtin {
        id: "ailang-write",
        title: "Write (sandboxed)",
        description: "Create or replace a worktree file with the given content.",
        effect: Some("Workspace.Write"),
        input_schema: || strict_schema(&["path", "content"], &[]),
        output_schema: write_output_schema,
        run: |i| {
            plan_tool(i, "ailang-write", "Workspace.Write", &["path", "content"], &[], |a| {
                let mut p = path_payload(a, "write", "path")?;
                p.insert("content".into(), a["content"].clone());
                Ok(p)
            })
        },
    },
    Builtin {
        id: "tools.echo",
        title: "Echo",
        description: "Return the arguments unchanged, as {\"echo\": <arguments>}.",
        effect: None,
        input_schema: || json!({"type": "object"}),
        output_schema: || json!({"type": "object", "properties": {"echo": {}, "world": {"type": "object"}}}),
        run: |args| Ok(json!({ "echo": args })),
    },
    Builtin {
        id: "workspace-exec",
        title: "Exec (operator allow-list)",
        description: "Run one command from the operator's allow-list in the worktree, with a timeout; output is head/tail truncated.",
        effect: Some("Workspace.Exec"),
        input_schema: || {
            json!({"type": "object", "additionalProperties": false, "required": ["command"], "properties": {
                "command": {"type": "string"},
                "args": {"type": "array", "items": {"type": "string"}, "maxItems": EXEC_ARGS_MAX}}})
        },
        output_schema: || {
            json!({"type": "object", "required": ["world"], "properties": {
                "ok": {"type": "boolean"}, "exit_code": {}, "timed_out": {"type": "boolean"}, "stdout": {"type": "string"},
                "stderr": {"type": "string"}, "refused": {"type": "string"}, "world": {"type": "object"}}})
        },
        run: |i| plan_tool(i, "workspace-exec", "Workspace.Exec", &["command"], &["args"], exec_payload),
    },
    Builtin {
        id: "workspace-list",
        title: "List (sandboxed)",
        description: "List the entries of a worktree directory (default: its root).",
        effect: Some("Workspace.Read"),
        input_schema: || strict_schema(&[], &["path"]),
        output_schema: || {
            json!({"type": "object", "required": ["world"], "properties": {
                "ok": {"type": "boolean"}, "entries": {"type": "array"}, "refused": {"type": "string"}, "world": {"type": "object"}}})
        },
        run: |i| {
            plan_tool(i, "workspace-list", "Workspace.Read", &[], &["path"], |a| {
                let mut a = a.clone();
                a.entry("path").or_insert(json!("."));
                path_payload(&a, "list", "path")
            })
        },
    },
    Builtin {
        id: "workspace-search",
        title: "Search (sandboxed)",
        description: "Find lines containing a literal query in the worktree's UTF-8 files.",
        effect: Some("Workspace.Read"),
        input_schema: || strict_schema(&["query"], &["path"]),
        output_schema: || {
            json!({"type": "object", "required": ["world"], "properties": {
                "ok": {"type": "boolean"}, "matches": {"type": "array"}, "truncated": {"type": "boolean"},
                "refused": {"type": "string"}, "world": {"type": "object"}}})
        },
        run: |i| {
            plan_tool(i, "workspace-search", "Workspace.Read", &["query"], &["path"], |a| {
                let query = a["query"].as_str().unwrap_or_default();
                if query.is_empty() || query.len() > SEARCH_QUERY_MAX {
                    return Err(format!("argument \"query\" must be 1-{SEARCH_QUERY_MAX} bytes"));
                }
                let mut a = a.clone();
                a.entry("path").or_insert(json!("."));
                let mut p = path_payload(&a, "search", "path")?;
                p.insert("query".into(), json!(query));
                Ok(p)
            })
        },
    },
];

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.id == name)
}

/// The source object of a builtin: a canonical description of it and its version.
pub fn source_object(name: &str) -> NewObject {
    let payload = canonical::to_vec(&json!({"builtin": name, "daemon": "worldd", "version": DAEMON_VERSION}));
    NewObject::derived(TRANSITION_SOURCE, "worldd/publish", payload)
}

fn strict_schema(required: &[&str], optional: &[&str]) -> Value {
    let props: Map<String, Value> =
        required.iter().chain(optional).map(|k| ((*k).to_string(), json!({"type": "string"}))).collect();
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": props})
}

fn read_output_schema() -> Value {
    json!({"type": "object", "required": ["world"], "properties": {
        "ok": {"type": "boolean"}, "content": {"type": "string"}, "tool": {"type": "string"},
        "policy_digest": {"type": "string"}, "refused": {"type": "string"}, "world": {"type": "object"}}})
}

fn write_output_schema() -> Value {
    json!({"type": "object", "required": ["world"], "properties": {
        "ok": {"type": "boolean"}, "tool": {"type": "string"}, "policy_digest": {"type": "string"},
        "refused": {"type": "string"}, "world": {"type": "object"}}})
}

/// The plan-phase path law: relative, non-empty, no `..` segment, no leading `-`.
pub fn plan_path_ok(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= PATH_MAX
        && !p.starts_with('/')
        && !p.starts_with('-')
        && !p.contains('\0')
        && !p.split('/').any(|seg| seg == "..")
}

fn path_payload(args: &Map<String, Value>, op: &str, key: &str) -> Result<Map<String, Value>, String> {
    let p = args[key].as_str().unwrap_or_default();
    if !plan_path_ok(p) {
        return Err(format!(
            "path {} refused: it must be relative and non-empty, with no \"..\" segment and no leading \"-\"",
            quote(p)
        ));
    }
    let mut m = Map::new();
    m.insert("op".into(), json!(op));
    m.insert("path".into(), json!(p));
    Ok(m)
}

fn edit_payload(a: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let mut p = path_payload(a, "edit", "path")?;
    if a["old_text"].as_str().is_some_and(str::is_empty) {
        return Err("argument \"old_text\" must not be empty".into());
    }
    p.insert("old_text".into(), a["old_text"].clone());
    p.insert("new_text".into(), a["new_text"].clone());
    Ok(p)
}

fn exec_payload(a: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let command = a["command"].as_str().unwrap_or_default();
    let b = command.as_bytes();
    let command_ok = !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !command_ok {
        return Err("argument \"command\" must match ^[a-z][a-z0-9-]{0,31}$".into());
    }
    let args = match a.get("args") {
        None => vec![],
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(exec_args_law()),
    };
    let ok = args.len() <= EXEC_ARGS_MAX
        && args
            .iter()
            .all(|v| v.as_str().is_some_and(|s| !s.is_empty() && s.len() <= EXEC_ARG_BYTES_MAX && !s.contains('\0')));
    if !ok {
        return Err(exec_args_law());
    }
    let mut m = Map::new();
    m.insert("op".into(), json!("exec"));
    m.insert("command".into(), json!(command));
    m.insert("args".into(), Value::Array(args));
    Ok(m)
}

fn exec_args_law() -> String {
    format!(
        "argument \"args\" must be an array of at most {EXEC_ARGS_MAX} strings of 1-{EXEC_ARG_BYTES_MAX} bytes without NUL"
    )
}

/// Go-style `%q` quoting, as the refusal texts show paths and keys.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Builds an effect's payload from checked arguments, or a refusal text.
type PayloadFn = fn(&Map<String, Value>) -> Result<Map<String, Value>, String>;

/// The shared plan phase of the coding tools: refuse unknown, missing or
/// mistyped arguments with a committed refusal, else ask for one effect.
fn plan_tool(
    input: &Value,
    tool: &str,
    effect: &str,
    required: &[&str],
    optional: &[&str],
    payload: PayloadFn,
) -> Result<Value, String> {
    let args = match (input.get("phase").and_then(Value::as_str), input.get("args")) {
        (Some("plan"), Some(Value::Object(a))) => a,
        _ => return Err("expected {\"phase\":\"plan\",\"args\":{…}}".into()),
    };
    match check_args(args, tool, required, optional).and_then(|()| payload(args)) {
        Ok(p) => Ok(json!({"plan": EFFECT_PLAN, "finish": false, "result": null,
            "effects": [{"id": "e1", "effect": effect, "scope": WORKTREE_SCOPE, "cost": 1, "payload": p}]})),
        Err(refused) => Ok(json!({"plan": EFFECT_PLAN, "finish": false, "effects": [],
            "result": {"ok": false, "refused": refused}})),
    }
}

fn check_args(args: &Map<String, Value>, tool: &str, required: &[&str], optional: &[&str]) -> Result<(), String> {
    let admitted: Vec<&str> = required.iter().chain(optional).copied().collect();
    if let Some(k) = args.keys().find(|k| !admitted.contains(&k.as_str())) {
        return Err(format!("unknown argument {}; {tool} admits only: {}", quote(k), admitted.join(", ")));
    }
    if let Some(k) = required.iter().find(|k| !args.contains_key(**k)) {
        return Err(format!("missing required argument {}", quote(k)));
    }
    let typed_elsewhere = ["args"];
    if let Some(k) =
        admitted.iter().find(|k| !typed_elsewhere.contains(k) && args.get(**k).is_some_and(|v| !v.is_string()))
    {
        return Err(format!("argument {} must be a string", quote(k)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(id: &str, args: Value) -> Value {
        (find(id).unwrap().run)(&json!({"phase": "plan", "args": args})).unwrap()
    }

    fn refusal(v: &Value) -> &str {
        v["result"]["refused"].as_str().unwrap_or("")
    }

    #[test]
    fn echo_returns_its_arguments() {
        assert_eq!((find("tools.echo").unwrap().run)(&json!({"a": 1})).unwrap(), json!({"echo": {"a": 1}}));
    }

    #[test]
    fn read_plans_one_read_effect() {
        let p = plan("ailang-read", json!({"path": "src/main.rs"}));
        assert_eq!(p["effects"][0]["payload"], json!({"op": "read", "path": "src/main.rs"}));
        assert_eq!(p["effects"][0]["effect"], "Workspace.Read");
        assert_eq!(p["effects"][0]["cost"], 1);
    }

    #[test]
    fn argument_refusals_use_the_documented_texts() {
        assert_eq!(
            refusal(&plan("ailang-read", json!({"path": "a", "x": 1}))),
            "unknown argument \"x\"; ailang-read admits only: path"
        );
        assert_eq!(refusal(&plan("ailang-write", json!({"path": "a"}))), "missing required argument \"content\"");
        assert_eq!(refusal(&plan("ailang-read", json!({"path": 3}))), "argument \"path\" must be a string");
        for bad in ["", "/etc/hosts", "../x", "a/../../b", "-rf"] {
            assert_eq!(
                refusal(&plan("ailang-read", json!({"path": bad}))),
                format!(
                    "path {} refused: it must be relative and non-empty, with no \"..\" segment and no leading \"-\"",
                    quote(bad)
                )
            );
        }
    }

    #[test]
    fn exec_checks_command_and_args() {
        assert!(refusal(&plan("workspace-exec", json!({"command": "Rm"}))).contains("^[a-z][a-z0-9-]{0,31}$"));
        assert!(refusal(&plan("workspace-exec", json!({"command": "ls", "args": [""]}))).contains("at most 16"));
        let p = plan("workspace-exec", json!({"command": "ls", "args": ["-la"]}));
        assert_eq!(p["effects"][0]["payload"], json!({"op": "exec", "command": "ls", "args": ["-la"]}));
    }

    #[test]
    fn every_builtin_has_a_valid_transition_id() {
        for b in BUILTINS {
            world_protocol::names::validate_transition_id(b.id).unwrap();
        }
        let ids: Vec<&str> = BUILTINS.iter().map(|b| b.id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "registry byte order");
    }
}
