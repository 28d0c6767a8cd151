//! The `/v1` REST table over HTTP: every route, every reachable error class.

use crate::fixture::{self, SEMANTIC_ID, Step, genesis, next, with_store};
use crate::harness::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use std::io::Write as _;
use world_store::{NewObject, Op, Ref, WorldStore};

const MALFORMED_REF: &str = "a ref must be sha256:<64 lowercase hex>";

/// A daemon on a fresh store, and a session token for it.
fn daemon_with_token() -> (TempStore, Daemon, String) {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    (store, d, token)
}

/// Commits `step` and asserts it became the selected head.
fn commit_ok(d: &Daemon, token: &str, step: &Step) {
    let r = d.commit(&step.bytes(), Some(token));
    let v = r.ok_json();
    assert_eq!(v, json!({"selectedHead": step.world.world_ref.to_string()}));
}

#[test]
fn health_reports_status_version_and_the_store_path() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let v = d.get("/v1/health").ok_json();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["daemon_version"], "0.1.0");
    let canonical = std::fs::canonicalize(&store.db).unwrap();
    assert_eq!(v["db_path"], canonical.to_str().unwrap());
    assert!(v["interpreter_ref"].is_string() && v["interpreter_version"].is_string(), "{v}");
    assert_eq!(v["confinement"], "kernel", "runs are confined unless the operator says --unconfined");
}

#[test]
fn the_head_is_not_found_before_genesis() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    assert_error(&d.get("/v1/head"), 404, "NotFound", Some("no world head has been selected yet"));
    assert_eq!(d.get("/v1/log").ok_json(), json!({"items": []}));
}

#[test]
fn a_rest_genesis_commit_is_readable_through_every_read_route() {
    let (_store, d, token) = daemon_with_token();
    // Bytes whose standard base64 uses `+` and `/`, so URL-safe base64 would differ.
    let payload = vec![0xfb, 0xff, 0xfe, 0x3e, 0x3f, 0x00, b'x'];
    let g = fixture::step(None, "genesis", payload.clone());
    assert!(BASE64.encode(&payload).contains('+') && BASE64.encode(&payload).contains('/'));
    commit_ok(&d, &token, &g);
    let world = g.world.world_ref.to_string();

    let head = d.get("/v1/head");
    assert_eq!(head.status, 200);
    assert_eq!(head.content_type(), "text/plain; charset=utf-8");
    assert_eq!(head.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(head.text(), world);

    assert_eq!(d.get(&format!("/v1/worlds/{world}")).ok_json(), g.body["nextWorld"]);
    assert_eq!(d.get("/v1/log/0").ok_json(), g.body["entry"]);
    assert_eq!(d.get("/v1/log").ok_json(), json!({"items": [g.body["entry"]]}));

    let hash = g.object.hash.to_string();
    let meta = json!({
        "hash": hash,
        "interfaceHash": g.object.interface_hash.to_string(),
        "semanticId": SEMANTIC_ID,
        "provenance": "blackbox test",
    });
    let plain = d.get(&format!("/v1/objects/{hash}")).ok_json();
    assert_eq!(plain, meta, "without ?payload=true the payload key is absent");
    assert_eq!(d.get(&format!("/v1/objects/{hash}?payload=false")).ok_json(), meta);
    let full = d.get(&format!("/v1/objects/{hash}?payload=true")).ok_json();
    let encoded = full["payload"].as_str().expect("payload with ?payload=true");
    assert_eq!(encoded, BASE64.encode(&payload));
    assert_eq!(BASE64.decode(encoded).unwrap(), payload);
    let mut without = full.clone();
    without.as_object_mut().unwrap().remove("payload");
    assert_eq!(without, meta);

    let found = d.get(&format!("/v1/objects/by-semantic-id/{SEMANTIC_ID}")).ok_json();
    assert_eq!(found, json!({"items": [meta]}));
}

#[test]
fn a_second_commit_extends_the_chain_and_the_log_pages_follow_it() {
    let (_store, d, token) = daemon_with_token();
    let g = genesis("one");
    commit_ok(&d, &token, &g);
    let n = next(&g.world, "two");
    commit_ok(&d, &token, &n);
    assert_eq!(d.get("/v1/head").text(), n.world.world_ref.to_string());
    assert_eq!(d.get("/v1/log").ok_json(), json!({"items": [g.body["entry"], n.body["entry"]]}));
    assert_eq!(d.get("/v1/log?from=1").ok_json(), json!({"items": [n.body["entry"]]}));
    assert_eq!(d.get("/v1/log?from=0&limit=1").ok_json(), json!({"items": [g.body["entry"]]}));
    assert_eq!(d.get("/v1/log?from=2").ok_json(), json!({"items": []}), "past the end is empty");
    assert_eq!(d.get("/v1/log?from=999999").ok_json(), json!({"items": []}));
    assert_eq!(d.get("/v1/log/1").ok_json(), n.body["entry"]);
    assert_eq!(d.get(&format!("/v1/worlds/{}", g.world.world_ref)).ok_json(), g.body["nextWorld"]);
}

#[test]
fn log_paging_defaults_to_100_caps_at_500_and_stops_at_the_end() {
    let store = TempStore::new();
    let worlds = with_store(&store.db, |s| fixture::commit_chain(s, 520));
    let d = Daemon::start(&store.db);
    let head = worlds.last().unwrap().world_ref.to_string();
    assert!(d.listening.contains(&format!("head {head}")), "{}", d.listening);
    let page = |q: &str| d.get(&format!("/v1/log{q}")).ok_json()["items"].as_array().unwrap().clone();
    let indexes =
        |items: &[Value]| items.iter().map(|e| e["header"]["entryIndex"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(indexes(&page("")), (0..100).collect::<Vec<_>>());
    assert_eq!(page("?limit=0").len(), 100, "limit < 1 is the default");
    assert_eq!(page("?limit=-7").len(), 100, "limit < 1 is the default");
    assert_eq!(indexes(&page("?limit=10000")), (0..500).collect::<Vec<_>>(), "the cap is 500");
    assert_eq!(indexes(&page("?from=515&limit=50")), (515..520).collect::<Vec<_>>());
    assert_eq!(indexes(&page("?from=7&limit=3")), vec![7, 8, 9]);
    for (i, e) in page("?from=100&limit=20").iter().enumerate() {
        let w = &worlds[100 + i];
        assert_eq!(e["entryHash"], w.log_head.to_string());
    }
}

#[test]
fn semantic_id_paging_is_in_hash_order_resumes_after_and_caps_at_500() {
    let store = TempStore::new();
    let mut hashes: Vec<Ref> = with_store(&store.db, |s| {
        let objects: Vec<_> = (0..530)
            .map(|i| world_store::NewObject::derived("bb/paged/v1", "p", format!("paged {i}").into_bytes()))
            .collect();
        let hashes = objects.iter().map(|o| o.hash).collect();
        s.call(Op::PutObjects(objects)).unwrap();
        hashes
    });
    hashes.sort();
    let d = Daemon::start(&store.db);
    let page = |q: &str| {
        let v = d.get(&format!("/v1/objects/by-semantic-id/bb/paged/v1{q}")).ok_json();
        v["items"].as_array().unwrap().iter().map(|o| o["hash"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let text: Vec<String> = hashes.iter().map(|h| h.to_string()).collect();
    assert_eq!(page(""), text[..100]);
    assert_eq!(page("?limit=0"), text[..100]);
    assert_eq!(page("?limit=501"), text[..500]);
    assert_eq!(page(&format!("?after={}&limit=3", text[99])), text[100..103]);
    assert_eq!(page("?after="), text[..100], "an empty after starts at the beginning");
    // Walking every page yields every object exactly once.
    let mut all = vec![];
    let mut after = String::new();
    loop {
        let p = page(&format!("?after={after}&limit=200"));
        if p.is_empty() {
            break;
        }
        after = p.last().unwrap().clone();
        all.extend(p);
    }
    assert_eq!(all, text);
    let items = d.get("/v1/objects/by-semantic-id/bb/paged/v1?limit=1").ok_json();
    assert!(items["items"][0].get("payload").is_none(), "pages never carry payloads");
}

#[test]
fn an_unknown_semantic_id_is_an_empty_page_not_a_404() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    assert_eq!(d.get("/v1/objects/by-semantic-id/no/such/name").ok_json(), json!({"items": []}));
}

#[test]
fn a_semantic_id_in_the_path_is_percent_decoded() {
    let store = TempStore::new();
    let object = world_store::NewObject::derived("bb/with space & more/v1", "p", b"spaced".to_vec());
    with_store(&store.db, |s| s.call(Op::PutObjects(vec![object.clone()])).unwrap());
    let d = Daemon::start(&store.db);
    let v = d.get("/v1/objects/by-semantic-id/bb/with%20space%20%26%20more/v1").ok_json();
    assert_eq!(v["items"][0]["hash"], object.hash.to_string());
    assert_eq!(v["items"][0]["semanticId"], "bb/with space & more/v1");
}

#[test]
fn an_empty_semantic_id_is_a_bad_request() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    assert_error(&d.get("/v1/objects/by-semantic-id/"), 400, "BadRequest", Some("semantic id must not be empty"));
}

#[test]
fn malformed_paging_parameters_are_bad_requests_naming_the_parameter() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    assert_error(&d.get("/v1/log?limit=ten"), 400, "BadRequest", Some("limit must be an integer"));
    assert_error(&d.get("/v1/log?from=-1"), 400, "BadRequest", Some("from must be a non-negative integer"));
    assert_error(&d.get("/v1/log?from=x"), 400, "BadRequest", Some("from must be a non-negative integer"));
    let by = "/v1/objects/by-semantic-id/a";
    assert_error(&d.get(&format!("{by}?limit=1.5")), 400, "BadRequest", Some("limit must be an integer"));
    assert_error(&d.get(&format!("{by}?after=sha256:zz")), 400, "BadRequest", Some(&format!("after: {MALFORMED_REF}")));
}

#[test]
fn malformed_refs_are_bad_requests_naming_the_field() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let upper = format!("sha256:{}", "A".repeat(64));
    for bad in ["nope", "sha256:1234", upper.as_str(), "sha1:0000"] {
        assert_error(
            &d.get(&format!("/v1/worlds/{bad}")),
            400,
            "BadRequest",
            Some(&format!("world ref: {MALFORMED_REF}")),
        );
        assert_error(
            &d.get(&format!("/v1/objects/{bad}")),
            400,
            "BadRequest",
            Some(&format!("object ref: {MALFORMED_REF}")),
        );
    }
}

#[test]
fn absent_things_are_not_found_with_their_messages() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let r = Ref::of(b"absent");
    assert_error(&d.get(&format!("/v1/worlds/{r}")), 404, "NotFound", Some("world not found"));
    assert_error(&d.get(&format!("/v1/objects/{r}")), 404, "NotFound", Some("object not found"));
    assert_error(&d.get(&format!("/v1/objects/{r}?payload=true")), 404, "NotFound", Some("object not found"));
    assert_error(&d.get("/v1/log/0"), 404, "NotFound", Some("log entry not found"));
    assert_error(&d.get("/v1/registry/world/epoch-registry/v1"), 404, "NotFound", Some("registry head not found"));
}

#[test]
fn a_malformed_log_index_is_a_bad_request() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    for bad in ["-1", "x", "1.0", "0x1"] {
        let r = d.get(&format!("/v1/log/{bad}"));
        assert_error(&r, 400, "BadRequest", Some("log index must be a non-negative integer"));
    }
}

#[test]
fn the_payload_flag_accepts_only_true_or_false() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let r = Ref::of(b"x");
    assert_error(
        &d.get(&format!("/v1/objects/{r}?payload=1")),
        400,
        "BadRequest",
        Some("payload must be true or false"),
    );
}

#[test]
fn a_registry_head_is_served_by_its_slash_separated_name() {
    let store = TempStore::new();
    let head = with_store(&store.db, |s| fixture::publish_registry(s, "world/epoch-registry/v1"));
    let d = Daemon::start(&store.db);
    let v = d.get("/v1/registry/world/epoch-registry/v1").ok_json();
    assert_eq!(v, json!({"name": "world/epoch-registry/v1", "head": head.to_string()}));
    assert_error(&d.get("/v1/registry/world/epoch-registry/v2"), 404, "NotFound", Some("registry head not found"));
}

#[test]
fn the_selected_world_head_is_not_served_as_a_registry() {
    let (_store, d, token) = daemon_with_token();
    commit_ok(&d, &token, &genesis("g"));
    assert_error(&d.get("/v1/registry/world/selected"), 404, "NotFound", Some("registry head not found"));
}

#[test]
fn receipts_are_resolved_after_a_rest_commit_and_not_started_before() {
    let (_store, d, token) = daemon_with_token();
    let r = d.get("/v1/receipts/rest:demo-1").ok_json();
    assert_eq!(r, json!({"invocationId": "rest:demo-1", "state": "not-started", "resultRef": ""}));
    let g = genesis("g").with_id("rest:demo-1");
    commit_ok(&d, &token, &g);
    let r = d.get("/v1/receipts/rest:demo-1").ok_json();
    let world = g.world.world_ref.to_string();
    assert_eq!(r, json!({"invocationId": "rest:demo-1", "state": "resolved", "resultRef": world}));
    // Resending the same body under the same id answers from the receipt, appending nothing.
    commit_ok(&d, &token, &g);
    assert_eq!(d.get("/v1/log").ok_json()["items"].as_array().unwrap().len(), 1);
}

#[test]
fn a_journaled_rest_intent_without_an_outcome_is_an_indeterminate_receipt() {
    let store = TempStore::new();
    let g = genesis("pending").with_id("rest:pending-1");
    with_store(&store.db, |s| {
        let op = Op::RestIntent { invocation_id: "rest:pending-1".into(), request_digest: g.digest() };
        s.call(op).unwrap();
    });
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let r = d.get("/v1/receipts/rest:pending-1").ok_json();
    assert_eq!(r, json!({"invocationId": "rest:pending-1", "state": "indeterminate", "resultRef": ""}));
    // Reconciling: resending the same request commits it and resolves the receipt.
    commit_ok(&d, &token, &g);
    let r = d.get("/v1/receipts/rest:pending-1").ok_json();
    assert_eq!(r["state"], "resolved");
    assert_eq!(r["resultRef"], g.world.world_ref.to_string());
}

#[test]
fn a_receipt_id_without_the_rest_prefix_is_a_bad_request() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    for bad in ["demo-1", "a2a:ep:task", "rest:"] {
        let r = d.get(&format!("/v1/receipts/{bad}"));
        assert_error(&r, 400, "BadRequest", Some("receipt id must be rest:<id>"));
    }
}

#[test]
fn a_rest_id_reused_with_a_different_body_is_a_bad_request() {
    let (_store, d, token) = daemon_with_token();
    let g = genesis("g").with_id("rest:same");
    commit_ok(&d, &token, &g);
    let other = next(&g.world, "n").with_id("rest:same");
    let r = d.commit(&other.bytes(), Some(&token));
    assert_error(&r, 400, "BadRequest", Some("invocation id rest:same was already used for a different commit"));
}

#[test]
fn an_invocation_id_must_start_with_rest() {
    let (_store, d, token) = daemon_with_token();
    let g = genesis("g").with_id("a2a:ep:t");
    let r = d.commit(&g.bytes(), Some(&token));
    assert_error(&r, 400, "BadRequest", Some("invocationId must start with rest:"));
}

#[test]
fn a_commit_with_an_unknown_field_is_a_bad_request() {
    let (_store, d, token) = daemon_with_token();
    let mut g = genesis("g");
    g.body["bogus"] = json!(1);
    assert_error_starts(
        &d.commit(&g.bytes(), Some(&token)),
        400,
        "BadRequest",
        "invalid commit: unknown field `bogus`",
    );
    let mut nested = genesis("g");
    nested.body["entry"]["header"]["extra"] = json!("x");
    assert_error_starts(
        &d.commit(&nested.bytes(), Some(&token)),
        400,
        "BadRequest",
        "invalid commit: unknown field `extra`",
    );
    assert_error(&d.get("/v1/head"), 404, "NotFound", None);
}

#[test]
fn a_commit_with_a_trailing_value_is_a_bad_request() {
    let (_store, d, token) = daemon_with_token();
    let mut body = genesis("g").bytes();
    body.extend_from_slice(b" {}");
    assert_error_starts(&d.commit(&body, Some(&token)), 400, "BadRequest", "invalid commit JSON: trailing characters");
    assert_error(&d.get("/v1/head"), 404, "NotFound", None);
}

#[test]
fn a_commit_that_is_not_one_json_object_is_a_bad_request() {
    let (_store, d, token) = daemon_with_token();
    assert_error(&d.commit(b"[]", Some(&token)), 400, "BadRequest", Some("the commit body must be one JSON object"));
    assert_error_starts(&d.commit(b"{", Some(&token)), 400, "BadRequest", "invalid commit JSON: ");
    assert_error_starts(&d.commit(b"", Some(&token)), 400, "BadRequest", "invalid commit JSON: ");
    assert_error_starts(&d.commit(b"{}", Some(&token)), 400, "BadRequest", "invalid commit: missing field");
}

#[test]
fn a_malformed_ref_in_a_commit_names_the_field() {
    let (_store, d, token) = daemon_with_token();
    let cases: [(&str, &str); 7] = [
        ("/observedHead", "observedHead"),
        ("/nextWorld/ref", "nextWorld.ref"),
        ("/nextWorld/stateRoot", "nextWorld.stateRoot"),
        ("/entry/entryHash", "entry.entryHash"),
        ("/entry/header/prevEntryHash", "entry.header.prevEntryHash"),
        ("/objects/0/hash", "objects[0].hash"),
        ("/objects/0/interfaceHash", "objects[0].interfaceHash"),
    ];
    for (pointer, field) in cases {
        let mut g = genesis("g");
        *g.body.pointer_mut(pointer).unwrap() = json!("sha256:NOPE");
        let r = d.commit(&g.bytes(), Some(&token));
        assert_error(&r, 400, "BadRequest", Some(&format!("{field}: {MALFORMED_REF}")));
    }
}

#[test]
fn a_payload_that_is_not_standard_base64_is_a_bad_request() {
    let (_store, d, token) = daemon_with_token();
    let payload = vec![0xfb, 0xff, 0xfe];
    for encoded in [base64::engine::general_purpose::URL_SAFE.encode(&payload), "+/+".to_string()] {
        let mut g = fixture::step(None, "g", payload.clone());
        g.body["objects"][0]["payload"] = json!(encoded);
        assert_error_starts(
            &d.commit(&g.bytes(), Some(&token)),
            400,
            "BadRequest",
            "objects[0].payload: not standard base64",
        );
    }
}

#[test]
fn a_dishonest_chain_is_refused_naming_the_field() {
    let (_store, d, token) = daemon_with_token();
    let g = genesis("g");
    let refuse = |body: &Value, prefix: &str| {
        let r = d.commit(&serde_json::to_vec(body).unwrap(), Some(&token));
        assert_error_starts(&r, 400, "BadRequest", prefix);
    };
    let mut wrong_index = g.body.clone();
    wrong_index["entry"]["header"]["entryIndex"] = json!(3);
    refuse(&wrong_index, "entry.header.entryIndex must be 0");
    let mut wrong_hash = g.body.clone();
    wrong_hash["entry"]["entryHash"] = json!(Ref::of(b"other").to_string());
    refuse(&wrong_hash, "entry.entryHash does not match its canonical preimage");
    let mut wrong_world = g.body.clone();
    wrong_world["nextWorld"]["ref"] = json!(Ref::of(b"other").to_string());
    refuse(&wrong_world, "nextWorld.ref does not match its canonical preimage");
    let mut payload_mismatch = g.body.clone();
    payload_mismatch["objects"][0]["payload"] = json!(BASE64.encode(b"not the hashed bytes"));
    refuse(&payload_mismatch, "object hash");
    commit_ok(&d, &token, &g);
    let mut n = next(&g.world, "n").body;
    n["entry"]["header"]["prevEntryHash"] = json!(Ref::of(b"elsewhere").to_string());
    refuse(&n, "entry.header.prevEntryHash must be");
    assert_eq!(d.get("/v1/head").text(), g.world.world_ref.to_string(), "nothing refused was committed");
}

#[test]
fn a_stale_observed_head_is_a_head_conflict_carrying_both_heads() {
    let (_store, d, token) = daemon_with_token();
    let g = genesis("g");
    let stale = next(&g.world, "stale");
    // Before genesis the selected head is empty.
    let err = assert_error(&d.commit(&stale.bytes(), Some(&token)), 409, "HeadConflict", None);
    assert_eq!(err["observedHead"], g.world.world_ref.to_string());
    assert_eq!(err["selectedHead"], "");
    commit_ok(&d, &token, &g);
    // A second genesis observes "" while a head exists.
    let err = assert_error(&d.commit(&genesis("again").bytes(), Some(&token)), 409, "HeadConflict", None);
    assert_eq!(err["observedHead"], "");
    assert_eq!(err["selectedHead"], g.world.world_ref.to_string());
    let n = next(&g.world, "n");
    commit_ok(&d, &token, &n);
    let err = assert_error(&d.commit(&next(&g.world, "late").bytes(), Some(&token)), 409, "HeadConflict", None);
    assert_eq!(err["observedHead"], g.world.world_ref.to_string());
    assert_eq!(err["selectedHead"], n.world.world_ref.to_string());
    assert_eq!(err.as_object().unwrap().len(), 4, "class, message and the two heads: {err}");
}

#[test]
fn thirty_two_concurrent_commits_on_one_head_have_exactly_one_winner() {
    let (store, d, token) = daemon_with_token();
    let g = genesis("g");
    commit_ok(&d, &token, &g);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(32));
    let threads: Vec<_> = (0..32)
        .map(|i| {
            let (agent, url, barrier, token) = (d.agent(), d.url("/v1/commit"), barrier.clone(), token.clone());
            let step = next(&g.world, &format!("contender {i}"));
            std::thread::spawn(move || {
                let auth = format!("Bearer {token}");
                let body = step.bytes();
                barrier.wait();
                (step, send(&agent, "POST", &url, &[("Authorization", &auth)], Some(&body)))
            })
        })
        .collect();
    let results: Vec<(Step, Reply)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let winners: Vec<&Step> = results.iter().filter(|(_, r)| r.status == 200).map(|(s, _)| s).collect();
    assert_eq!(winners.len(), 1, "statuses: {:?}", results.iter().map(|(_, r)| r.status).collect::<Vec<_>>());
    let winner = winners[0].world.world_ref.to_string();
    for (step, r) in &results {
        crate::openapi::check("POST", "/v1/commit", r);
        if r.status == 200 {
            assert_eq!(r.json(), json!({"selectedHead": step.world.world_ref.to_string()}));
        } else {
            let err = assert_error(r, 409, "HeadConflict", None);
            assert_eq!(err["observedHead"], g.world.world_ref.to_string());
            assert_eq!(err["selectedHead"], winner);
        }
    }
    assert_eq!(d.get("/v1/head").text(), winner);
    assert_eq!(d.get("/v1/log").ok_json()["items"].as_array().unwrap().len(), 2);
    let v = worldd(&["verify", "--db", store.db.to_str().unwrap()]);
    assert!(v.status.success(), "verify: {}{}", stdout(&v), stderr(&v));
    assert!(stdout(&v).contains("2 log entries") && stdout(&v).trim_end().ends_with("; 0 fault(s)"), "{}", stdout(&v));
}

/// A genesis commit padded with trailing whitespace to exactly `len` bytes.
fn padded_genesis(len: usize) -> (Step, Vec<u8>) {
    let g = genesis("big");
    let mut body = g.bytes();
    assert!(body.len() < len);
    body.resize(len, b' ');
    (g, body)
}

#[test]
fn a_commit_of_exactly_8_mib_is_accepted() {
    let (_store, d, token) = daemon_with_token();
    let (g, body) = padded_genesis(8 << 20);
    let r = d.commit(&body, Some(&token));
    assert_eq!(r.ok_json(), json!({"selectedHead": g.world.world_ref.to_string()}));
}

#[test]
fn a_commit_of_8_mib_and_one_byte_is_payload_too_large() {
    let (_store, d, token) = daemon_with_token();
    let (_, body) = padded_genesis((8 << 20) + 1);
    let r = d.commit(&body, Some(&token));
    assert_error(&r, 413, "PayloadTooLarge", Some("commit body exceeds 8388608 bytes"));
    assert_error(&d.get("/v1/head"), 404, "NotFound", None);
}

#[test]
fn a_chunked_commit_over_8_mib_is_payload_too_large() {
    let (_store, d, token) = daemon_with_token();
    let (_, body) = padded_genesis((8 << 20) + 1);
    let mut conn = Raw::connect(&d.addr);
    let head =
        format!("Authorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n");
    conn.send(&raw_head("POST", &d.addr, "/v1/commit", head.as_bytes()));
    let mut writer = conn.stream.try_clone().unwrap();
    // The daemon may answer and close before taking every byte; write errors are expected then.
    let sender = std::thread::spawn(move || {
        for chunk in body.chunks(1 << 20) {
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(chunk);
            framed.extend_from_slice(b"\r\n");
            if writer.write_all(&framed).is_err() {
                return;
            }
        }
        let _ = writer.write_all(b"0\r\n\r\n");
    });
    let r = conn.read_reply();
    let _ = sender.join();
    crate::openapi::check("POST", "/v1/commit", &r);
    assert_error(&r, 413, "PayloadTooLarge", Some("commit body exceeds 8388608 bytes"));
}

#[test]
fn a_wrong_method_on_a_known_route_is_405() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    for (method, path) in [("POST", "/v1/head"), ("GET", "/v1/commit"), ("DELETE", "/v1/log"), ("PUT", "/v1/health")] {
        let r = d.request(method, path, &[], None);
        assert_eq!(r.status, 405, "{method} {path}");
        assert!(r.header("allow").is_some(), "{method} {path} names the allowed methods");
    }
}

#[test]
fn an_unknown_path_is_404_in_the_rest_envelope() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    for path in ["/v1/nope", "/", "/v2/health", "/v1/log/0/extra", "/v1/worlds"] {
        assert_error(&d.get(path), 404, "NotFound", Some("no such route"));
    }
}

#[test]
fn a_store_failure_is_internal_with_the_fixed_message_and_the_cause_on_stderr() {
    let store = TempStore::new();
    let victim = Ref::of(b"victim");
    with_store(&store.db, |_| ());
    {
        // Damage one object row below the store API: a row that does not decode.
        let db = redb::Database::open(&store.db).unwrap();
        let txn = db.begin_write().unwrap();
        use world_store::tables::{OBJECT_ROWS, PLACE_OBJECT, PLACES, PlaceKey};
        let seq = 1_000_000u64;
        txn.open_table(PLACES.young).unwrap().insert(PlaceKey(victim.0, PLACE_OBJECT), seq).unwrap();
        txn.open_table(OBJECT_ROWS).unwrap().insert(seq, &b"\xffnot a row"[..]).unwrap();
        txn.commit().unwrap();
    }
    let d = Daemon::start(&store.db);
    let r = d.get(&format!("/v1/objects/{victim}"));
    assert_error(&r, 500, "Internal", Some("internal store failure"));
    assert_eq!(r.body, b"{\"error\":{\"class\":\"Internal\",\"message\":\"internal store failure\"}}\n");
    let logged = || d.stderr_lines().into_iter().any(|l| l.contains("internal error") && l.contains("/v1/objects"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !logged() {
        assert!(std::time::Instant::now() < deadline, "no cause on stderr: {:?}", d.stderr_lines());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_referrers_of_a_committed_object_name_its_entry_and_the_entry_names_its_world() {
    let (_store, d, token) = daemon_with_token();
    let g = genesis("g");
    commit_ok(&d, &token, &g);
    let entry_hash = g.entry.entry_hash.to_string();
    let v = d.get(&format!("/v1/objects/{}/referrers", g.object.hash)).ok_json();
    assert_eq!(v, json!({"items": [{"kind": "entry", "ref": entry_hash, "entryIndex": 0}]}));
    // The entry is named by its world, and by the record of who committed it.
    let v = d.get(&format!("/v1/objects/{entry_hash}/referrers")).ok_json();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{v}");
    assert!(items.contains(&json!({"kind": "world", "ref": g.world.world_ref.to_string()})), "{v}");
    let record = items.iter().find(|i| i["kind"] == "object").unwrap_or_else(|| panic!("{v}"));
    let record = d.get(&format!("/v1/objects/{}", record["ref"].as_str().unwrap())).ok_json();
    assert_eq!(record["semanticId"], "world/commit-record/v1", "{record}");
    let absent = Ref::of(b"absent");
    assert_error(&d.get(&format!("/v1/objects/{absent}/referrers")), 404, "NotFound", Some("object not found"));
    let r = d.get(&format!("/v1/objects/{}/referrers?after=nope", g.object.hash));
    assert_error(&r, 400, "BadRequest", Some("after must be <kind>:<ref> with kind object, entry or world"));
    assert_error(
        &d.get("/v1/objects/nope/referrers"),
        400,
        "BadRequest",
        Some(&format!("object ref: {MALFORMED_REF}")),
    );
}

#[test]
fn the_journal_of_an_unknown_record_is_not_found_and_a_malformed_one_a_bad_request() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let r = d.get(&format!("/v1/objects/{}/journal", Ref::of(b"record")));
    assert_error_starts(&r, 404, "NotFound", "no journal item carries this effect record");
    let r = d.get("/v1/objects/nope/journal");
    assert_error(&r, 400, "BadRequest", Some(&format!("effect record ref: {MALFORMED_REF}")));
}

#[test]
fn the_largest_numbers_a_reader_can_send_are_answered_and_never_wrap() {
    let (store, d, token) = daemon_with_token();
    commit_ok(&d, &token, &genesis("g"));
    // An episode with a call, so its pages have something to count from.
    let db = store.db.to_str().unwrap();
    let o = worldd(&["publish", "--db", db, "--builtin"]);
    assert!(o.status.success(), "publish: {}", stderr(&o));
    let minted = crate::episodes::mint(db, "ep", &["world.apply=world:10"], None);
    crate::episodes::mcp(&d, &minted.token, "tools_decho", json!({"message": "hi"}));
    let max = u64::MAX;
    for path in [
        format!("/v1/log?from={max}&limit={max}"),
        format!("/v1/episodes?limit={max}"),
        format!("/v1/episodes/ep/calls?from={max}&limit={max}"),
        format!("/workbench?from={max}"),
        format!("/workbench/episodes/ep?from={max}"),
    ] {
        let r = d.get(&path);
        assert!(r.status < 500, "{path}: {} {}", r.status, r.text());
    }
    assert_eq!(d.get("/v1/health").status, 200, "the daemon is still whole");
}

#[test]
fn a_commit_needs_the_commit_grant_is_paid_once_and_names_the_session_that_made_it() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let db = store.db.to_str().unwrap();
    // A session granted nothing but reads may not write the log.
    let reader = crate::episodes::mint(db, "ep", &["Workspace.Read=worktree:1"], None);
    let g = fixture::genesis("g");
    let r = d.commit(&g.bytes(), Some(&reader.token));
    let e = assert_error(&r, 403, "NotGranted", None);
    assert!(e["message"].as_str().unwrap().contains("World.Commit=log"), "{e}");
    assert_error(&d.get("/v1/head"), 404, "NotFound", None);

    // Three units: the genesis (1), a 1500-byte commit (2), then nothing more.
    let writer = crate::episodes::mint(db, "ep", &["World.Commit=log:3"], None);
    commit_ok(&d, &writer.token, &g);
    let big = fixture::step(Some(&g.world), "big", vec![7; 1500]).with_id("rest:big");
    commit_ok(&d, &writer.token, &big);
    // Resent under its id: answered from its receipt, not paid again.
    commit_ok(&d, &writer.token, &big);
    let over = next(&big.world, "over");
    let r = d.commit(&over.bytes(), Some(&writer.token));
    let e = assert_error(&r, 403, "BudgetExhausted", None);
    assert!(e["message"].as_str().unwrap().contains("0 unit(s) left"), "{e}");
    assert_eq!(d.get("/v1/head").text().trim(), big.world.world_ref.to_string());

    // The episode shows what it paid, though it made no call.
    let summary = d.get("/v1/episodes/ep").ok_json();
    let spend = summary["spend"].as_array().unwrap();
    let commits = spend.iter().find(|s| s["effect"] == "World.Commit").unwrap_or_else(|| panic!("{summary}"));
    assert_eq!((&commits["scope"], &commits["spent"]), (&json!("log"), &json!(3)), "{summary}");

    // `why` walks from the entry to the session that committed it.
    let o = worldd(&["why", "1", "--addr", &d.base_url(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let walked: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let credential = format!("sha256:{}", writer.credential_id);
    assert_eq!(walked["commitRecord"]["credentialId"], json!(credential), "{walked}");
    assert_eq!(walked["journal"]["invocationId"], "rest-entry:1", "{walked}");
    assert_eq!(walked["journal"]["intent"]["cost"], 2, "{walked}");
    let o = worldd(&["verify", "--db", db]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}

#[test]
fn a_commit_cannot_pose_as_the_daemon() {
    let (_store, d, token) = daemon_with_token();
    let g = fixture::genesis("g");
    commit_ok(&d, &token, &g);
    let object = |semantic_id: &str, provenance: &str| NewObject::derived(semantic_id, provenance, b"{}".to_vec());
    let posing = [
        (fixture::step_by(Some(&g.world), "c", object("demo/x", "me"), "coordinator:epb"), "entry.header.writtenBy"),
        (fixture::step_by(Some(&g.world), "w", object("demo/x", "me"), "worldd/quickstart"), "entry.header.writtenBy"),
        (fixture::step_by(Some(&g.world), "a", object("world/approval/v1", "me"), "me"), "objects[0].semanticId"),
        (fixture::step_by(Some(&g.world), "r", object("world/effect-record/v3", "me"), "me"), "objects[0].semanticId"),
        (fixture::step_by(Some(&g.world), "p", object("demo/x", "host/approvals"), "me"), "objects[0].provenance"),
    ];
    for (step, field) in posing {
        let e = assert_error(&d.commit(&step.bytes(), Some(&token)), 400, "BadRequest", None);
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{field}: ")), "{field}: {message}");
    }
    assert_eq!(d.get("/v1/head").text().trim(), g.world.world_ref.to_string(), "nothing was committed");
}
