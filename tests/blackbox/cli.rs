//! `worldd serve` as a process (startup, refusals, shutdown) and the client verbs.

use crate::fixture::{genesis, next, with_store};
use crate::harness::*;
use serde_json::json;

fn db_str(store: &TempStore) -> &str {
    store.db.to_str().unwrap()
}

#[test]
fn serve_creates_the_store_and_reports_address_store_and_head_on_one_line() {
    let store = TempStore::new();
    assert!(!store.db.exists());
    let d = Daemon::start(&store.db);
    assert!(store.db.exists(), "serve creates an absent store");
    let canonical = std::fs::canonicalize(&store.db).unwrap();
    let expected = format!("worldd listening on http://{} (store {}, head none)", d.addr, canonical.display());
    assert_eq!(d.listening, expected);
    assert_eq!(d.stderr_lines(), [expected], "the listening line is the only line");
    assert!(d.addr.starts_with("127.0.0.1:") && !d.addr.ends_with(":0"), "{}", d.addr);
    let token = mint(&store.db);
    let g = genesis("g");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    drop(d); // killed: the lock goes with the process, a stale admin socket stays behind
    let again = Daemon::start(&store.db);
    assert!(again.listening.ends_with(&format!(", head {})", g.world.world_ref)), "{}", again.listening);
    assert_eq!(mint(&store.db).len(), 64, "the stale admin socket was replaced by a live one");
}

#[test]
fn serve_tells_before_and_after_upgrading_an_older_store_in_place() {
    let store = TempStore::new();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/tests/fixtures/format6.db");
    std::fs::copy(fixture, &store.db).unwrap();
    let d = Daemon::start(&store.db);
    let lines = d.stderr_lines();
    let to = world_store::tables::STORE_FORMAT;
    let before = lines.iter().position(|l| l.contains("upgrading the store in place before serving"));
    let before = before.unwrap_or_else(|| panic!("no upgrade notice: {lines:?}"));
    assert!(lines[before].contains("from=6") && lines[before].contains(&format!("to={to}")), "{}", lines[before]);
    let after = lines.iter().position(|l| l.contains("the store was upgraded") && l.contains("seconds="));
    assert!(after.is_some_and(|a| a > before), "{lines:?}");
    assert_eq!(d.get("/v1/health").status, 200);
    drop(d); // killed: the next start replays its log, on the upgraded store
    let again = Daemon::start(&store.db);
    let lines = again.stderr_lines();
    assert!(!lines.iter().any(|l| l.contains("upgrad")), "upgraded once: {lines:?}");
}

#[test]
fn a_non_loopback_bind_is_refused_with_one_line_before_the_store_is_touched() {
    let store = TempStore::new();
    for (bind, host) in
        [("0.0.0.0:0", "\"0.0.0.0\""), ("192.0.2.1:7644", "\"192.0.2.1\""), ("example.com:80", "\"example.com\"")]
    {
        let o = worldd(&["serve", "--db", db_str(&store), "--bind", bind]);
        assert_eq!(o.status.code(), Some(2), "{bind}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("worldd: daemon startup failed at bind-policy: bind host {host} is not loopback"))
        );
        assert!(!store.db.exists(), "{bind}: the store was created");
    }
}

#[test]
fn a_second_daemon_on_the_same_store_fails_at_once_naming_the_lock() {
    let store = TempStore::new();
    let first = Daemon::start(&store.db);
    let o = worldd(&["serve", "--db", db_str(&store), "--bind", "127.0.0.1:0"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("worldd: daemon startup failed at store-open: "), "{err}");
    assert!(err.contains(store.lock().to_str().unwrap()), "names the lock file: {err}");
    // The first daemon is untouched, admin socket included.
    assert_eq!(first.get("/v1/health").status, 200);
    assert_eq!(mint(&store.db).len(), 64);
}

#[test]
fn sigterm_drains_an_in_flight_request_then_exits_zero() {
    let store = TempStore::new();
    let mut d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let g = genesis("drained");
    let body = g.bytes();
    let mut conn = Raw::connect(&d.addr);
    let head = format!("Authorization: Bearer {token}\r\nExpect: 100-continue\r\nContent-Length: {}\r\n", body.len());
    conn.send(&raw_head("POST", &d.addr, "/v1/commit", head.as_bytes()));
    // `100 Continue` comes when the handler starts reading the body: the request is in flight.
    assert_eq!(conn.read_head().0, 100);
    let pid = d.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    wait_until_refused(&d.addr);
    conn.send(&body);
    let r = conn.read_reply();
    assert_eq!(r.ok_json(), json!({"selectedHead": g.world.world_ref.to_string()}));
    let status = d.wait_exit();
    assert_eq!(status.code(), Some(0), "stderr: {:?}", d.stderr_lines());
    assert!(!store.socket().exists(), "the admin socket is removed");
    // The lock is released and the drained commit is durable.
    let head = with_store(&store.db, |s| {
        use world_store::Reads;
        s.snapshot().unwrap().selected_head().unwrap()
    });
    assert_eq!(head, Some(g.world.world_ref));
}

#[test]
fn sigterm_gives_up_on_a_request_that_never_finishes_and_still_exits_zero() {
    let store = TempStore::new();
    let mut d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let mut conn = Raw::connect(&d.addr);
    let head = format!("Authorization: Bearer {token}\r\nExpect: 100-continue\r\nContent-Length: 100\r\n");
    conn.send(&raw_head("POST", &d.addr, "/v1/commit", head.as_bytes()));
    assert_eq!(conn.read_head().0, 100);
    // The body never comes: the drain is bounded (10 s), then the daemon exits cleanly.
    assert_eq!(d.signal_and_wait("TERM").code(), Some(0), "stderr: {:?}", d.stderr_lines());
    assert!(!store.socket().exists());
    with_store(&store.db, |_| ());
    drop(conn);
}

#[test]
fn sigint_stops_the_daemon_with_exit_zero() {
    let store = TempStore::new();
    let mut d = Daemon::start(&store.db);
    assert_eq!(d.get("/v1/health").status, 200);
    let status = d.signal_and_wait("INT");
    assert_eq!(status.code(), Some(0), "{status:?} {:?}", d.stderr_lines());
    assert!(!store.socket().exists());
    with_store(&store.db, |_| ()); // the writer lock is free again
}

#[test]
fn the_head_verb_prints_the_ref_or_one_error_line() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let addr = d.base_url();
    let o = worldd(&["head", "--addr", &addr]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "worldd: /v1/head returned HTTP 404 NotFound: no world head has been selected yet\n");
    let token = mint(&store.db);
    let g = genesis("g");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    let o = worldd(&["head", "--addr", &addr]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), format!("{}\n", g.world.world_ref));
}

#[test]
fn no_verb_panics_when_its_reader_has_gone() {
    let store = TempStore::new();
    let db = db_str(&store);
    drop(Daemon::start(&store.db));
    let token = mint(&store.db);
    let offline: [&[&str]; 4] = [
        &["session", "list", "--db", db],
        &["approvals", "--db", db],
        &["verify", "--db", db],
        &["session", "mint", "--db", db, "--episode", "p", "--grant", "world.apply=world:1", "--yes"],
    ];
    let quiet = |args: &[&str], o: &std::process::Output, code: i32| {
        let err = stderr(o);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "worldd {args:?}: {err}");
        assert_eq!(o.status.code(), Some(code), "worldd {args:?} exits with its own code: {err}");
    };
    for args in offline {
        quiet(args, &worldd_into_closed_pipe(args), 0);
    }
    let d = Daemon::start(&store.db);
    assert_eq!(d.commit(&genesis("g").bytes(), Some(&token)).status, 200);
    let addr = d.base_url();
    let online: [&[&str]; 5] = [
        &["head", "--addr", &addr],
        &["log", "--addr", &addr],
        &["episodes", "--addr", &addr],
        &["session", "list", "--db", db],
        &["verify", "--db", db],
    ];
    for args in online {
        quiet(args, &worldd_into_closed_pipe(args), 0);
    }
    quiet(&["--help"], &worldd_into_closed_pipe(&["--help"]), 0);
}

#[test]
fn the_log_verb_prints_a_page_of_entries() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let g = genesis("g");
    let n = next(&g.world, "n");
    for s in [&g, &n] {
        assert_eq!(d.commit(&s.bytes(), Some(&token)).status, 200);
    }
    let addr = d.base_url();
    let o = worldd(&["log", "--from", "1", "--limit", "1", "--addr", &addr]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap(), json!({"items": [n.body["entry"]]}));
    let o = worldd(&["log", "--addr", &addr]);
    let all: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
}

#[test]
fn the_object_verb_prints_metadata_and_with_payload_the_payload() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let g = genesis("object verb");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    let (addr, hash) = (d.base_url(), g.object.hash.to_string());
    let plain: serde_json::Value = serde_json::from_str(&stdout(&worldd(&["object", &hash, "--addr", &addr]))).unwrap();
    assert_eq!(plain["hash"], hash);
    assert!(plain.get("payload").is_none());
    let o = worldd(&["object", &hash, "--payload", "--addr", &addr]);
    let full: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(full["payload"], g.body["objects"][0]["payload"]);
    let o = worldd(&["object", "nope", "--addr", &addr]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "worldd: /v1/objects/nope returned HTTP 400 BadRequest: object ref: a ref must be sha256:<64 lowercase hex>\n"
    );
}

#[test]
fn a_client_verb_without_a_daemon_fails_with_one_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("http://127.0.0.1:{port}");
    let o = worldd(&["head", "--addr", &addr]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("worldd: cannot reach the daemon at {addr} (--addr): ")), "{err}");
}

#[test]
fn why_against_a_daemon_it_cannot_reach_says_so_and_exits_3_not_as_a_failed_link() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("http://127.0.0.1:{port}");
    for target in ["head", "0", "sha256:0000000000000000000000000000000000000000000000000000000000000000"] {
        let o = worldd(&["why", target, "--addr", &addr]);
        assert_eq!(o.status.code(), Some(3), "{target}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).is_empty(), "no walk is shown: {}", stdout(&o));
        let err = stderr(&o);
        assert!(!err.contains("FAILED") && !err.contains("link"), "{err}");
        assert!(err.starts_with(&format!("worldd: why: cannot reach the daemon at {addr} (--addr): ")), "{err}");
        assert!(err.contains("--addr URL (or set WORLD_ADDR=URL)"), "{err}");
        let o = worldd(&["why", target, "--addr", &addr, "--json"]);
        assert_eq!(o.status.code(), Some(3), "{target}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!((&v["reachable"], &v["verified"]), (&serde_json::json!(false), &serde_json::json!(false)), "{v}");
    }
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    for args in [&["log", "--from", "x"][..], &["no-such-verb"], &["session", "mint"], &[]] {
        let o = worldd(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty());
    }
    let help = worldd(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("serve"));
    assert_eq!(worldd(&["--version"]).status.code(), Some(0));
}

#[test]
fn verify_beside_a_running_daemon_is_answered_by_it_from_a_snapshot_and_agrees_with_an_offline_verify() {
    let store = TempStore::new();
    let mut d = Daemon::start(&store.db);
    let token = mint(&store.db);
    assert_eq!(d.commit(&genesis("g").with_id("rest:v-2").bytes(), Some(&token)).status, 200);
    // The referrer index catches up behind the commits (at the idle
    // checkpoint, or the close's): compare once the daemon's has.
    let indexed = |report: &std::process::Output| {
        let report: serde_json::Value = serde_json::from_str(&stdout(report)).unwrap_or_default();
        let tables = report["tables"].as_array().cloned().unwrap_or_default();
        tables.iter().any(|t| t["table"] == "referrers_by_target" && t["rows"].as_u64() > Some(0))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let live = loop {
        let live = worldd(&["verify", "--db", db_str(&store), "--json"]);
        if indexed(&live) || std::time::Instant::now() > deadline {
            break live;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(live.status.code(), Some(0), "{} {}", stdout(&live), stderr(&live));
    assert!(stderr(&live).contains("answered by the daemon running on this store"), "{}", stderr(&live));
    let text = worldd(&["verify", "--db", db_str(&store)]);
    assert_eq!(text.status.code(), Some(0));
    let summary = stdout(&text);
    assert!(
        summary.starts_with(&format!("verified {} in ", db_str(&store))) && summary.ends_with("; 0 fault(s)\n"),
        "{summary}"
    );
    assert!(d.signal_and_wait("TERM").success());
    let offline = worldd(&["verify", "--db", db_str(&store), "--json"]);
    assert_eq!(offline.status.code(), Some(0), "{}", stderr(&offline));
    assert!(!stderr(&offline).contains("answered by the daemon"), "no daemon, the file itself");
    let (mut live, mut offline): (serde_json::Value, serde_json::Value) =
        (serde_json::from_str(&stdout(&live)).unwrap(), serde_json::from_str(&stdout(&offline)).unwrap());
    // The files' sizes may move with the checkpoint at shutdown; what they hold may not.
    for report in [&mut live, &mut offline] {
        let o = report.as_object_mut().unwrap();
        assert!(o.remove("fileBytes").unwrap().as_u64().unwrap() >= o["pageBytes"].as_u64().unwrap(), "{o:?}");
        o.remove("walBytes").unwrap();
        o.remove("allocatedBytes").unwrap();
        // A running store keeps room ahead of its payloads' end.
        let payloads = o["counts"]["payloadBytes"].as_u64().unwrap();
        assert!(o.remove("payloadFileBytes").unwrap().as_u64().unwrap() >= payloads, "{o:?}");
    }
    assert_eq!(live, offline, "the daemon's snapshot and the file say the same");
    assert_eq!(live["counts"]["receipts"], 1);
}

#[test]
fn verify_reports_what_the_store_logically_holds_against_its_pages_and_file() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    assert_eq!(d.commit(&genesis("g").bytes(), Some(&token)).status, 200);
    drop(d);
    let o = worldd(&["verify", "--db", db_str(&store), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let bytes = |k: &str| report[k].as_u64().unwrap_or_else(|| panic!("{k} in {report}"));
    let payload_bytes = report["counts"]["payloadBytes"].as_u64().unwrap();
    let rows = bytes("logicalBytes") - payload_bytes;
    assert!(0 < payload_bytes && 0 < rows && rows <= bytes("pageBytes"), "{report}");
    assert!(bytes("pageBytes") <= bytes("fileBytes"), "{report}");
    assert_eq!(bytes("fileBytes"), std::fs::metadata(&store.db).unwrap().len());
    // The payloads are the payload file, back to back.
    let payload_file = std::fs::metadata(world_store::media::payloads_path(&store.db)).unwrap().len();
    assert_eq!((bytes("payloadFileBytes"), payload_file), (payload_bytes, payload_bytes), "{report}");
    let tables = report["tables"].as_array().unwrap();
    assert!(tables.iter().all(|t| t["table"] != "payloads_by_seq"), "payloads are no table: {report}");
    let sum: u64 = tables.iter().map(|t| t["storedBytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, rows);
    let text = stdout(&worldd(&["verify", "--db", db_str(&store)]));
    assert!(text.contains(" MiB of rows and payloads: ") && text.contains(" MiB payload file "), "{text}");
    assert!(bytes("allocatedBytes") > 0, "{report}");
}

#[test]
fn compact_gives_space_back_offline_and_is_refused_beside_a_daemon() {
    let store = TempStore::new();
    let mut d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let g = genesis("g");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    let refused = worldd(&["compact", "--db", db_str(&store)]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("a daemon is running on this store: stop it"), "{}", stderr(&refused));
    assert!(d.signal_and_wait("TERM").success());

    let before = std::fs::metadata(&store.db).unwrap().len();
    let o = worldd(&["compact", "--db", db_str(&store)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&format!("compacted {}: ", db_str(&store))), "{}", stdout(&o));
    assert!(std::fs::metadata(&store.db).unwrap().len() <= before);
    assert_eq!(worldd(&["verify", "--db", db_str(&store)]).status.code(), Some(0));
    let again = Daemon::start(&store.db);
    assert!(again.listening.ends_with(&format!(", head {})", g.world.world_ref)), "{}", again.listening);
    let missing = worldd(&["compact", "--db", store.db.with_extension("absent").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("does not exist"), "{}", stderr(&missing));
}

#[test]
fn the_page_cache_is_bounded_by_serve_cache_mib_and_reported_with_the_store() {
    let store = TempStore::new();
    let d = Daemon::start_with(&store.db, &["--cache-mib", "8"]);
    let status = d.get("/v1/store").ok_json();
    assert_eq!(status["cacheBytesMax"], 8 << 20, "{status}");
    assert_eq!(status["fileBytes"], std::fs::metadata(&store.db).unwrap().len(), "{status}");
    assert!(status["allocatedBytes"].as_u64().unwrap() > 0, "{status}");
    assert!(status["walBytes"].as_u64().unwrap() > 0 && status["residentBytes"].as_u64().unwrap() > 0, "{status}");
    assert!(status["freeBytes"].as_u64().unwrap() > 0, "{status}");
    // A young store's tiered indexes have no run yet.
    let indexes: Vec<&str> =
        status["indexes"].as_array().unwrap().iter().map(|i| i["index"].as_str().unwrap()).collect();
    assert_eq!(indexes, ["places", "semantic"], "{status}");
    assert!(status["indexes"].as_array().unwrap().iter().all(|i| i["runs"] == 0), "{status}");
    let default = Daemon::start(&TempStore::new().db);
    assert_eq!(default.get("/v1/store").ok_json()["cacheBytesMax"], 64 << 20);
    for bad in ["1", "0", "70000", "lots"] {
        let o = worldd(&["serve", "--db", db_str(&store), "--cache-mib", bad]);
        assert_eq!(o.status.code(), Some(1), "--cache-mib {bad}: {}", stderr(&o));
    }
}

#[test]
fn verify_is_clean_on_a_store_written_over_rest() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let g = genesis("g").with_id("rest:v-1");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    let o = worldd(&["verify", "--db", db_str(&store), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["faultCount"], 0, "{report}");
    assert_eq!(report["counts"]["receipts"], 1, "{report}");
}

/// `worldd ARGS…` with `vars` set in its environment.
fn worldd_with(args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(WORLDD);
    cmd.args(args).env_remove("WORLD_ADDR").env_remove("WORLD_DB").env_remove("WORLD_STORE");
    cmd.envs(vars.iter().copied()).output().unwrap()
}

#[test]
fn a_daemon_and_its_store_are_named_once_for_a_shell_by_the_environment_and_a_flag_overrides_it() {
    let store = TempStore::new();
    let mut d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let g = genesis("g");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    let head = format!("{}\n", g.world.world_ref);
    let db = db_str(&store);
    // The store names its daemon: the address it recorded beside it.
    let recorded = std::fs::read_to_string(format!("{db}.addr")).unwrap();
    assert_eq!(recorded, format!("{}\n", d.base_url()));
    for vars in [vec![("WORLD_ADDR", d.base_url())], vec![("WORLD_DB", db.to_string())]] {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let o = worldd_with(&["head"], &vars);
        assert_eq!((stdout(&o), o.status.code()), (head.clone(), Some(0)), "{vars:?}: {}", stderr(&o));
    }
    let o = worldd_with(&["session", "list"], &[("WORLD_DB", db)]);
    assert!(stdout(&o).ends_with("1 session credential(s)\n"), "{}", stderr(&o));
    // A flag wins over the variable.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let nowhere = format!("http://127.0.0.1:{port}");
    let o = worldd_with(&["head", "--addr", &nowhere], &[("WORLD_ADDR", &d.base_url())]);
    assert!(
        stderr(&o).starts_with(&format!("worldd: cannot reach the daemon at {nowhere} (--addr)")),
        "{}",
        stderr(&o)
    );
    let o = worldd_with(&["head"], &[("WORLD_ADDR", &nowhere)]);
    assert!(
        stderr(&o).starts_with(&format!("worldd: cannot reach the daemon at {nowhere} (WORLD_ADDR)")),
        "{}",
        stderr(&o)
    );
    // Stopped, the daemon takes its address away with it.
    d.signal_and_wait("TERM");
    assert!(!std::path::Path::new(&format!("{db}.addr")).exists());
}

#[test]
fn serve_workers_sets_the_connection_lanes_and_one_lane_serves_concurrent_callers_to_the_end() {
    let store = TempStore::new();
    for bad in ["0", "257", "lots"] {
        let o = worldd(&["serve", "--db", db_str(&store), "--workers", bad]);
        assert_eq!(o.status.code(), Some(1), "--workers {bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--workers"), "--workers {bad}: {}", stderr(&o));
    }
    let lanes = |d: &Daemon| {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", d.pid())).unwrap();
        let names = tasks.flatten().filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok());
        let mut lanes: Vec<String> =
            names.map(|n| n.trim().to_string()).filter(|n| n.starts_with("worldd-lane-")).collect();
        lanes.sort();
        lanes
    };
    assert_eq!(
        lanes(&Daemon::start_with(&TempStore::new().db, &["--workers", "3"])),
        ["worldd-lane-0", "worldd-lane-1", "worldd-lane-2"]
    );
    let d = Daemon::start_with(&store.db, &["--workers", "1"]);
    assert_eq!(lanes(&d), ["worldd-lane-0"]);
    assert_eq!(d.commit(&genesis("g").bytes(), Some(&mint(&store.db))).status, 200);
    let published = worldd(&["publish", "--db", db_str(&store), "--builtin"]);
    assert!(published.status.success(), "{}", stderr(&published));
    let agent = crate::episodes::mint(db_str(&store), "one-worker", &["world.apply=world:100"], None).token;
    // Eight callers at once on the one lane: each call waits on the store's
    // writer without holding the thread the others need.
    std::thread::scope(|s| {
        for caller in 0..8 {
            let (d, agent) = (&d, &agent);
            s.spawn(move || {
                for i in 0..4 {
                    let r = crate::episodes::mcp(d, agent, "tools_decho", json!({"caller": caller, "i": i}));
                    let echoed = &r["result"]["structuredContent"]["echo"];
                    assert_eq!(echoed, &json!({"caller": caller, "i": i}), "caller {caller}, call {i}: {r}");
                }
            });
        }
    });
    let summary = d.get("/v1/episodes/one-worker").ok_json();
    assert_eq!(summary["calls"], 32, "{summary}");
    assert_eq!(summary["states"], json!({"committed": 32}), "{summary}");
}
