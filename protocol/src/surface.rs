//! The session's MCP tool surface: the grant-filtered transitions, named,
//! normalised, checked as a whole, sorted by tool name.
//!
//! Any problem refuses the **whole** surface rather than dropping or
//! truncating a tool: a session must never see a silently different set of
//! tools. The server logs the [`SurfaceError`] and answers the POST with the
//! `host callback failed` envelope.

use crate::json::go_quote;
use crate::names::{self, NameError};
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// How many schema violations an `invalid params` message lists at most.
pub const MAX_REPORTED_SCHEMA_ERRORS: usize = 5;
/// Longest argument-validation message (bytes); longer ones are cut, because
/// validation messages quote the offending argument values.
pub const MAX_ARGUMENT_ERROR_LEN: usize = 1024;

/// One transition as the server's grant-filtered registry view gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolView {
    /// The transition id, e.g. `tools.echo`.
    pub id: String,
    /// The descriptor title (the A2A skill name).
    pub title: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
}

/// Why the whole surface is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SurfaceError {
    /// Bad characters, empty, or an encoded name over 64 bytes.
    #[error("transition {id:?}: cannot be an MCP tool name: {source}")]
    InvalidId {
        id: String,
        #[source]
        source: NameError,
    },
    #[error("transitions {first:?} and {second:?} both map to MCP tool name {name:?}")]
    DuplicateName { name: String, first: String, second: String },
    #[error("transition {id:?}: input schema is not a JSON object")]
    SchemaNotObject { id: String },
    #[error("transition {id:?}: input schema has type {found}, expected \"object\"")]
    SchemaTypeNotObject { id: String, found: String },
}

impl SurfaceError {
    /// The transition id the refusal is about (the first one for duplicates).
    pub fn transition_id(&self) -> &str {
        match self {
            SurfaceError::InvalidId { id, .. }
            | SurfaceError::SchemaNotObject { id }
            | SurfaceError::SchemaTypeNotObject { id, .. } => id,
            SurfaceError::DuplicateName { first, .. } => first,
        }
    }
}

/// One tool of a built surface.
#[derive(Debug)]
pub struct Tool {
    name: String,
    transition_id: String,
    title: String,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    // Compiled on first use: most POSTs (initialize, ping, list) never
    // validate, and a surface is rebuilt for every POST.
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl Tool {
    /// The MCP tool name (encoded transition id).
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn transition_id(&self) -> &str {
        &self.transition_id
    }
    pub fn title(&self) -> &str {
        &self.title
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The input schema with `"type":"object"` ensured at the top level.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    fn validator(&self) -> &Result<jsonschema::Validator, String> {
        self.validator.get_or_init(|| jsonschema::validator_for(&self.input_schema).map_err(|e| e.to_string()))
    }

    /// Validates call arguments against the input schema; the error is the
    /// readable text after `invalid params: `.
    pub fn validate_arguments(&self, arguments: &Value) -> Result<(), String> {
        if !arguments.is_object() {
            return Err("arguments must be a JSON object".to_owned());
        }
        let validator = match self.validator() {
            Ok(v) => v,
            Err(e) => {
                return Err(truncate(format!("input schema of tool {} cannot be compiled: {e}", go_quote(&self.name))));
            }
        };
        let mut parts = Vec::new();
        let mut total = 0usize;
        for err in validator.iter_errors(arguments) {
            total += 1;
            if parts.len() < MAX_REPORTED_SCHEMA_ERRORS {
                let path = err.instance_path().to_string();
                if path.is_empty() {
                    parts.push(err.to_string());
                } else {
                    parts.push(format!("at {path}: {err}"));
                }
            }
        }
        if total == 0 {
            return Ok(());
        }
        let mut msg = parts.join("; ");
        if total > parts.len() {
            msg.push_str(&format!(" (and {} more)", total - parts.len()));
        }
        Err(truncate(msg))
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_ARGUMENT_ERROR_LEN {
        let mut cut = MAX_ARGUMENT_ERROR_LEN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// A session's tools, sorted by MCP name.
#[derive(Debug, Default)]
pub struct Surface {
    tools: Vec<Tool>,
}

impl Surface {
    /// The tools in MCP name order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool with this MCP name, if the session can see it.
    pub fn lookup(&self, name: &str) -> Option<&Tool> {
        self.tools.binary_search_by(|t| t.name.as_str().cmp(name)).ok().map(|i| &self.tools[i])
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Validates arguments for tool `name`; the error text follows
    /// `invalid params: ` on the wire.
    pub fn validate_arguments(&self, name: &str, arguments: &Value) -> Result<(), String> {
        match self.lookup(name) {
            Some(tool) => tool.validate_arguments(arguments),
            None => Err(format!("unknown tool {}", go_quote(name))),
        }
    }
}

/// Normalises an input schema: it must be an object; a missing top-level
/// `type` becomes `"object"`, any other `type` refuses.
fn normalize_input_schema(id: &str, schema: &Value) -> Result<Value, SurfaceError> {
    let Value::Object(obj) = schema else {
        return Err(SurfaceError::SchemaNotObject { id: id.to_owned() });
    };
    match obj.get("type") {
        None => {
            let mut with_type: Map<String, Value> = obj.clone();
            with_type.insert("type".to_owned(), Value::String("object".to_owned()));
            Ok(Value::Object(with_type))
        }
        Some(Value::String(t)) if t == "object" => Ok(schema.clone()),
        Some(other) => Err(SurfaceError::SchemaTypeNotObject { id: id.to_owned(), found: other.to_string() }),
    }
}

/// Builds the surface from the grant-filtered view (in registry order).
pub fn build_surface(view: &[ToolView]) -> Result<Surface, SurfaceError> {
    let mut tools = Vec::with_capacity(view.len());
    for t in view {
        names::validate_transition_id(&t.id).map_err(|source| SurfaceError::InvalidId { id: t.id.clone(), source })?;
        let input_schema = normalize_input_schema(&t.id, &t.input_schema)?;
        tools.push(Tool {
            name: names::encode(&t.id),
            transition_id: t.id.clone(),
            title: t.title.clone(),
            description: t.description.clone(),
            input_schema,
            // A JSON null is "no output schema", not a schema.
            output_schema: t.output_schema.clone().filter(|s| !s.is_null()),
            validator: OnceLock::new(),
        });
    }
    // Stable sort so a duplicate is reported with its registry order.
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = tools.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(SurfaceError::DuplicateName {
            name: w[0].name.clone(),
            first: w[0].transition_id.clone(),
            second: w[1].transition_id.clone(),
        });
    }
    Ok(Surface { tools })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn view(id: &str, schema: Value) -> ToolView {
        ToolView {
            id: id.to_owned(),
            title: format!("{id} title"),
            description: format!("{id} description"),
            input_schema: schema,
            output_schema: None,
        }
    }

    #[test]
    fn surface_is_sorted_by_encoded_name_and_looked_up_by_it() {
        let s = build_surface(&[
            view("tools.echo", json!({"type": "object"})),
            view("ailang-read", json!({"type": "object"})),
            view("tools-a", json!({"type": "object"})),
        ])
        .unwrap();
        let names: Vec<_> = s.tools().iter().map(|t| t.name()).collect();
        assert_eq!(names, ["ailang-read", "tools-a", "tools_decho"]);
        assert_eq!(s.lookup("tools_decho").unwrap().transition_id(), "tools.echo");
        assert!(s.lookup("tools.echo").is_none());
    }

    #[test]
    fn long_encoded_name_refuses_the_whole_surface() {
        // 33 characters of which 32 are '/' → 65 encoded bytes.
        let long = format!("a{}", "/".repeat(32));
        let err = build_surface(&[view("ok", json!({})), view(&long, json!({}))]).unwrap_err();
        assert_eq!(err.transition_id(), long);
        assert!(matches!(err, SurfaceError::InvalidId { source: NameError::TooLong { len: 65 }, .. }));
    }

    #[test]
    fn sixty_four_byte_name_is_allowed() {
        let id = "a".repeat(64);
        assert!(build_surface(&[view(&id, json!({}))]).is_ok());
    }

    #[test]
    fn duplicate_names_refuse_the_whole_surface() {
        let err = build_surface(&[view("x.y", json!({})), view("x.y", json!({}))]).unwrap_err();
        assert_eq!(err, SurfaceError::DuplicateName { name: "x_dy".into(), first: "x.y".into(), second: "x.y".into() });
    }

    #[test]
    fn uppercase_id_refuses_the_surface() {
        let err = build_surface(&[view("Tools", json!({}))]).unwrap_err();
        assert!(matches!(err, SurfaceError::InvalidId { .. }));
    }

    #[test]
    fn schema_without_type_gains_type_object_and_keeps_constraints() {
        let s = build_surface(&[view(
            "t",
            json!({"properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"]}),
        )])
        .unwrap();
        assert_eq!(
            s.tools()[0].input_schema(),
            &json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"]})
        );
    }

    #[test]
    fn non_object_schema_refuses_the_surface() {
        for bad in [json!(null), json!([]), json!("object"), json!(true)] {
            let err = build_surface(&[view("t", bad)]).unwrap_err();
            assert_eq!(err, SurfaceError::SchemaNotObject { id: "t".into() });
        }
    }

    #[test]
    fn schema_with_other_type_refuses_the_surface() {
        for bad in [json!({"type": "array"}), json!({"type": ["object", "null"]})] {
            let err = build_surface(&[view("t", bad)]).unwrap_err();
            assert!(matches!(err, SurfaceError::SchemaTypeNotObject { .. }), "{err}");
        }
    }

    #[test]
    fn output_schema_is_kept_verbatim() {
        let mut v = view("t", json!({}));
        v.output_schema = Some(json!({"type": "object", "additionalProperties": true}));
        let s = build_surface(&[v]).unwrap();
        assert_eq!(s.tools()[0].output_schema(), Some(&json!({"type": "object", "additionalProperties": true})));
    }

    #[test]
    fn arguments_are_validated_against_the_input_schema() {
        let s = build_surface(&[view("t", json!({"properties": {"path": {"type": "string"}}, "required": ["path"]}))])
            .unwrap();
        assert_eq!(s.validate_arguments("t", &json!({"path": "a"})), Ok(()));
        assert_eq!(s.validate_arguments("t", &json!({})), Err("\"path\" is a required property".to_owned()));
        assert_eq!(
            s.validate_arguments("t", &json!({"path": 5})),
            Err("at /path: 5 is not of type \"string\"".to_owned())
        );
    }

    #[test]
    fn arguments_must_be_an_object() {
        let s = build_surface(&[view("t", json!({}))]).unwrap();
        for bad in [json!(null), json!([]), json!(1), json!("s")] {
            assert_eq!(s.validate_arguments("t", &bad), Err("arguments must be a JSON object".to_owned()));
        }
    }

    #[test]
    fn unknown_tool_is_reported_with_go_quoting() {
        let s = build_surface(&[]).unwrap();
        assert_eq!(s.validate_arguments("nope", &json!({})), Err("unknown tool \"nope\"".to_owned()));
    }

    #[test]
    fn uncompilable_schema_refuses_the_call_not_the_surface() {
        let s = build_surface(&[view("t", json!({"properties": {"a": {"type": 5}}}))]).unwrap();
        let err = s.validate_arguments("t", &json!({"a": 1})).unwrap_err();
        assert!(err.starts_with("input schema of tool \"t\" cannot be compiled: "), "{err}");
    }

    #[test]
    fn long_validation_messages_are_cut() {
        let s = build_surface(&[view("t", json!({"properties": {"a": {"type": "integer"}}}))]).unwrap();
        let err = s.validate_arguments("t", &json!({"a": "x".repeat(5000)})).unwrap_err();
        assert!(err.len() <= MAX_ARGUMENT_ERROR_LEN + '…'.len_utf8());
    }

    #[test]
    fn surface_can_be_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Surface>();
    }
}
