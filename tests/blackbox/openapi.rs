//! `docs/openapi.json` against the running daemon.
//!
//! Every reply of a documented route is checked: its status must be one the
//! document lists for that operation, its content type the documented one, and
//! its JSON body must satisfy the documented schema (a small validator for the
//! JSON Schema subset the document uses; an unknown keyword fails, so the
//! document cannot quietly outgrow what is checked).

use crate::harness::{Daemon, Reply, TempStore, assert_error};
use base64::Engine;
use serde_json::Value;
use std::sync::OnceLock;

const DOC_TEXT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json"));

pub fn doc() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_json::from_str(DOC_TEXT).expect("docs/openapi.json is JSON"))
}

/// The documented operation serving `method path` (the query is ignored), with its template.
fn operation(method: &str, path: &str) -> Option<(&'static str, &'static Value)> {
    let path = path.split('?').next().unwrap();
    let segments: Vec<&str> = path.split('/').collect();
    let mut found = None;
    for (template, item) in doc()["paths"].as_object().unwrap() {
        let axum = item["x-axum-path"].as_str().unwrap();
        let pattern: Vec<&str> = axum.split('/').collect();
        let matches = pattern.iter().enumerate().all(|(i, p)| {
            if p.starts_with("{*") {
                segments.len() > i && !segments[i..].join("/").is_empty()
            } else if p.starts_with('{') {
                segments.get(i).is_some_and(|s| !s.is_empty())
            } else {
                segments.get(i) == Some(p)
            }
        }) && (pattern.last().is_some_and(|p| p.starts_with("{*")) || pattern.len() == segments.len());
        if matches {
            assert!(found.is_none(), "{path} matches two documented routes");
            found = Some((template.as_str(), item));
        }
    }
    let (template, item) = found?;
    item.get(method.to_ascii_lowercase()).map(|op| (template, op))
}

fn resolve(v: &'static Value) -> &'static Value {
    match v.get("$ref").and_then(|r| r.as_str()) {
        Some(r) => resolve(doc().pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("dangling $ref {r}"))),
        None => v,
    }
}

/// Checks one reply against the document (see the module comment).
pub fn check(method: &str, path: &str, reply: &Reply) {
    let Some((template, op)) = operation(method, path) else { return };
    let code = reply.status.to_string();
    let response = op["responses"].get(&code).unwrap_or_else(|| {
        panic!("{method} {path} answered {code}, which docs/openapi.json does not list for {method} {template}")
    });
    let response = resolve(response);
    let content_type = reply.content_type().split(';').next().unwrap().trim();
    let media = response["content"].get(content_type).unwrap_or_else(|| {
        panic!("{method} {path} {code}: content type {content_type:?} is not documented for {template}")
    });
    let value = if content_type == "application/json" {
        serde_json::from_slice(&reply.body).unwrap_or_else(|e| panic!("{method} {path} {code}: not JSON: {e}"))
    } else {
        Value::String(String::from_utf8(reply.body.clone()).expect("UTF-8 text body"))
    };
    if let Err(e) = validate(&media["schema"], &value, "$") {
        panic!("{method} {path} {code}: the body does not match docs/openapi.json: {e}\nbody: {value}");
    }
}

/// Validates `value` against `schema`; the error names the failing location.
pub fn validate(schema: &'static Value, value: &Value, at: &str) -> Result<(), String> {
    let schema = match schema.get("$ref") {
        Some(_) => resolve(schema),
        None => schema,
    };
    let Some(keywords) = schema.as_object() else { return Err(format!("{at}: schema is not an object")) };
    for (k, s) in keywords {
        match k.as_str() {
            "description" | "contentEncoding" => {}
            "allOf" => {
                for sub in s.as_array().unwrap() {
                    validate(sub, value, at)?;
                }
            }
            "anyOf" => {
                if !s.as_array().unwrap().iter().any(|sub| validate(sub, value, at).is_ok()) {
                    return Err(format!("{at}: {value} matches none of anyOf"));
                }
            }
            "type" => {
                let types: Vec<&str> = match s {
                    Value::Array(list) => list.iter().map(|t| t.as_str().unwrap()).collect(),
                    t => vec![t.as_str().unwrap()],
                };
                let mut ok = false;
                for t in types {
                    ok |= match t {
                        "object" => value.is_object(),
                        "array" => value.is_array(),
                        "string" => value.is_string(),
                        "integer" => value.is_u64() || value.is_i64(),
                        "boolean" => value.is_boolean(),
                        "null" => value.is_null(),
                        other => return Err(format!("{at}: unsupported type {other}")),
                    };
                }
                if !ok {
                    return Err(format!("{at}: expected {s}, got {value}"));
                }
            }
            "const" if value != s => return Err(format!("{at}: expected {s}, got {value}")),
            "const" => {}
            "enum" if !s.as_array().unwrap().contains(value) => return Err(format!("{at}: {value} is not one of {s}")),
            "enum" => {}
            "required" => {
                for name in s.as_array().unwrap() {
                    if value.get(name.as_str().unwrap()).is_none() {
                        return Err(format!("{at}: missing {name}"));
                    }
                }
            }
            "properties" => {
                let Some(obj) = value.as_object() else { continue };
                for (name, sub) in s.as_object().unwrap() {
                    if let Some(v) = obj.get(name) {
                        validate(sub, v, &format!("{at}.{name}"))?;
                    }
                }
            }
            "additionalProperties" => {
                let known = keywords.get("properties").and_then(|p| p.as_object());
                let Some(obj) = value.as_object() else { continue };
                let mut extra = obj.iter().filter(|(k, _)| !known.is_some_and(|p| p.contains_key(*k)));
                match s {
                    Value::Bool(false) => {
                        if let Some((name, _)) = extra.next() {
                            return Err(format!("{at}: undocumented member {name:?}"));
                        }
                    }
                    // A map: every member the properties do not name has this schema.
                    Value::Object(_) => {
                        for (name, v) in extra {
                            validate(s, v, &format!("{at}.{name}"))?;
                        }
                    }
                    other => panic!("additionalProperties {other} is not supported"),
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (i, v) in items.iter().enumerate() {
                        validate(s, v, &format!("{at}[{i}]"))?;
                    }
                }
            }
            "minimum" => {
                if value.as_i64().is_some_and(|n| n < s.as_i64().unwrap()) {
                    return Err(format!("{at}: {value} is below {s}"));
                }
            }
            "minLength" => {
                if value.as_str().is_some_and(|t| (t.chars().count() as u64) < s.as_u64().unwrap()) {
                    return Err(format!("{at}: {value} is shorter than {s}"));
                }
            }
            "pattern" => {
                if let Some(t) = value.as_str()
                    && !pattern_matches(s.as_str().unwrap(), t)
                {
                    return Err(format!("{at}: {value} does not match {s}"));
                }
            }
            other => return Err(format!("{at}: unsupported schema keyword {other}")),
        }
    }
    if keywords.get("contentEncoding").and_then(|e| e.as_str()) == Some("base64")
        && let Some(t) = value.as_str()
        && base64::engine::general_purpose::STANDARD.decode(t).is_err()
    {
        return Err(format!("{at}: not standard base64"));
    }
    Ok(())
}

fn is_ref(t: &str) -> bool {
    t.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The document's patterns, checked by hand (no regex engine here). An unknown one fails.
fn pattern_matches(pattern: &str, t: &str) -> bool {
    match pattern {
        "^sha256:[0-9a-f]{64}$" => is_ref(t),
        "^(sha256:[0-9a-f]{64})?$" => t.is_empty() || is_ref(t),
        "^rest:" => t.starts_with("rest:"),
        other => panic!("docs/openapi.json uses pattern {other}, which this checker does not know"),
    }
}

/// The frozen v1 table as the contract gives it (method, path).
const CONTRACT_ROUTES: [(&str, &str); 10] = [
    ("get", "/v1/health"),
    ("get", "/v1/head"),
    ("get", "/v1/worlds/{ref}"),
    ("get", "/v1/objects/{ref}"),
    ("get", "/v1/objects/by-semantic-id/{name}"),
    ("get", "/v1/log/{index}"),
    ("get", "/v1/log"),
    ("get", "/v1/registry/{name}"),
    ("post", "/v1/commit"),
    ("get", "/v1/receipts/{id}"),
];

/// A path with its parameter names blanked: `/v1/worlds/{}`.
fn shape(path: &str) -> String {
    path.split('/').map(|s| if s.starts_with('{') { "{}" } else { s }).collect::<Vec<_>>().join("/")
}

#[test]
fn the_openapi_document_marks_exactly_the_frozen_v1_table_as_frozen() {
    let mut documented = vec![];
    for (path, item) in doc()["paths"].as_object().unwrap() {
        if item["x-frozen"] != true {
            continue;
        }
        for method in item.as_object().unwrap().keys().filter(|k| !k.starts_with("x-")) {
            documented.push((method.clone(), shape(path)));
        }
    }
    let mut contract: Vec<(String, String)> = CONTRACT_ROUTES.iter().map(|(m, p)| (m.to_string(), shape(p))).collect();
    documented.sort();
    contract.sort();
    assert_eq!(documented, contract);
    assert_eq!(doc()["openapi"], "3.1.0");
}

#[test]
fn every_documented_route_is_served_by_the_daemon() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let sample_ref = world_store::Ref::of(b"nothing").to_string();
    for (path, item) in doc()["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{ref}", &sample_ref)
            .replace("{object}", &sample_ref)
            .replace("{name}", "some/name")
            .replace("{index}", "0")
            .replace("{id}", "rest:x");
        for method in item.as_object().unwrap().keys().filter(|k| !k.starts_with("x-")) {
            let method = method.to_uppercase();
            let body = (method == "POST").then_some(&b"{}"[..]);
            // `request` also checks the reply against the document.
            let r = d.request(&method, &concrete, &[], body);
            assert_ne!(r.status, 405, "{method} {concrete}");
            if r.status == 404 {
                let err = assert_error(&r, 404, "NotFound", None);
                assert_ne!(err["message"], "no such route", "{method} {concrete} is documented but not routed");
            }
        }
    }
}

#[test]
fn the_schema_checker_refuses_what_the_document_does_not_allow() {
    let world = &doc()["components"]["schemas"]["World"];
    let r = world_store::Ref::of(b"x").to_string();
    let good = serde_json::json!({"ref": r, "revision": 0, "stateRoot": r, "logHead": r});
    validate(world, &good, "$").unwrap();
    let mut extra = good.clone();
    extra["more"] = Value::Bool(true);
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("logHead");
    let mut bad_ref = good.clone();
    bad_ref["stateRoot"] = Value::String(r.to_uppercase());
    let mut negative = good.clone();
    negative["revision"] = serde_json::json!(-1);
    for v in [extra, missing, bad_ref, negative] {
        assert!(validate(world, &v, "$").is_err(), "{v}");
    }
    let envelope = &doc()["components"]["schemas"]["HeadConflictError"];
    let conflict =
        serde_json::json!({"error": {"class": "HeadConflict", "message": "m", "observedHead": "", "selectedHead": r}});
    validate(envelope, &conflict, "$").unwrap();
    let no_heads = serde_json::json!({"error": {"class": "HeadConflict", "message": "m"}});
    assert!(validate(envelope, &no_heads, "$").is_err());
    let wrong_class =
        serde_json::json!({"error": {"class": "Nope", "message": "m", "observedHead": "", "selectedHead": ""}});
    assert!(validate(envelope, &wrong_class, "$").is_err());
}

#[test]
fn replies_are_matched_to_their_documented_operation() {
    let template = |method: &str, path: &str| operation(method, path).map(|(t, _)| t);
    assert_eq!(template("GET", "/v1/log?from=1"), Some("/v1/log"));
    assert_eq!(template("GET", "/v1/log/3"), Some("/v1/log/{index}"));
    assert_eq!(template("GET", "/v1/objects/by-semantic-id/a/b/c"), Some("/v1/objects/by-semantic-id/{name}"));
    assert_eq!(template("GET", "/v1/objects/x"), Some("/v1/objects/{ref}"));
    assert_eq!(template("GET", "/v1/objects/x/referrers"), Some("/v1/objects/{object}/referrers"));
    assert_eq!(template("POST", "/v1/commit"), Some("/v1/commit"));
    assert_eq!(template("POST", "/v1/head"), None);
    assert_eq!(template("GET", "/v1/nope"), None);
    assert_eq!(template("GET", "/v1/objects/by-semantic-id/"), None);
}

#[test]
fn an_undocumented_status_or_content_type_fails_the_check() {
    let reply = |status: u16, content_type: &str, body: &str| Reply {
        status,
        headers: vec![("content-type".into(), content_type.into())],
        body: body.as_bytes().to_vec(),
    };
    let r = world_store::Ref::of(b"x").to_string();
    check("GET", "/v1/head", &reply(200, "text/plain; charset=utf-8", &r));
    let fails = |rep: Reply| std::panic::catch_unwind(|| check("GET", "/v1/head", &rep)).is_err();
    assert!(fails(reply(418, "text/plain; charset=utf-8", &r)), "status not documented");
    assert!(fails(reply(200, "application/json", "{}")), "content type not documented");
    assert!(fails(reply(200, "text/plain; charset=utf-8", "not a ref")), "body not a ref");
    let envelope = "{\"error\":{\"class\":\"BadRequest\",\"message\":\"m\"}}";
    assert!(fails(reply(404, "application/json", envelope)), "a 404 must be NotFound");
}
