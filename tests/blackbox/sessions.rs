//! The session authority: minting, listing and revoking (offline and live), and
//! how `POST /v1/commit` treats each kind of credential.

use crate::episodes::utc;
use crate::fixture::{self, genesis, now, with_store};
use crate::harness::*;
use serde_json::{Value, json};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use world_store::Ref;

const GRANT: &str = "world.apply=world:10";

fn db_str(store: &TempStore) -> &str {
    store.db.to_str().unwrap()
}

/// A created, closed store.
fn created() -> TempStore {
    let store = TempStore::new();
    with_store(&store.db, |_| ());
    store
}

fn list_json(store: &TempStore) -> Vec<Value> {
    let o = worldd(&["session", "list", "--db", db_str(store), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str::<Value>(&stdout(&o)).expect("list --json is JSON").as_array().unwrap().clone()
}

fn is_token(t: &str) -> bool {
    t.len() == 64 && t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_token_minted_offline_goes_to_stdout_once_and_only_its_hash_is_stored() {
    let store = created();
    let o = worldd(&["session", "mint", "--db", db_str(&store), "--episode", "bb", "--grant", GRANT, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let token = out.strip_suffix('\n').expect("one line");
    assert!(is_token(token), "{out:?}");
    let id = Ref::of(token.as_bytes());
    let rows = list_json(&store);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["credentialId"], id.hex());
    let expires = rows[0]["expiresAt"].as_u64().unwrap();
    assert_eq!(expires - rows[0]["createdAt"].as_u64().unwrap(), 3600, "the default ttl");
    assert_eq!(
        stderr(&o),
        format!(
            "worldd session mint: credential_id={} (episode bb, 1 grant(s), expires {} UTC)\n",
            id.hex(),
            utc(expires)
        )
    );
    let file = std::fs::read(&store.db).unwrap();
    assert!(contains(&file, &id.0), "the credential id is the stored key");
    assert!(!contains(&file, token.as_bytes()), "the token text is not stored");
    assert!(!contains(&file, &hex::decode(token).unwrap()), "the token bytes are not stored");
}

#[test]
fn mint_with_out_writes_the_token_at_mode_0600_and_prints_one_confirmation_line() {
    let store = created();
    let out_file = store.dir.path().join("token");
    // An existing, readable file is tightened, not left as it was.
    std::fs::write(&out_file, "old").unwrap();
    std::fs::set_permissions(&out_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = out_file.to_str().unwrap();
    let args = ["session", "mint", "--db", db_str(&store), "--episode", "ep-2", "--grant", GRANT];
    let o = worldd(&[&args[..], &["--grant", "Net.Call=host:127.0.0.1:80:3", "--out", path, "--yes"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(mode(&out_file), 0o600);
    let token = std::fs::read_to_string(&out_file).unwrap();
    let token = token.trim_end();
    assert!(is_token(token), "{token:?}");
    let rows = list_json(&store);
    let expires = rows[0]["expiresAt"].as_u64().unwrap();
    assert_eq!(
        stdout(&o),
        format!(
            "minted session credential for episode ep-2: 2 grant(s), expires {} UTC, written to {path}\n",
            utc(expires)
        )
    );
    assert!(!stdout(&o).contains(token) && !stderr(&o).contains(token), "the token is only in the file");
    assert!(
        stderr(&o).starts_with(&format!("worldd session mint: credential_id={} ", Ref::of(token.as_bytes()).hex()))
    );
    assert_eq!(
        rows[0]["grants"],
        json!([
            {"effect": "world.apply", "scope": "world", "budget": 10},
            {"effect": "Net.Call", "scope": "host:127.0.0.1:80", "budget": 3}
        ])
    );
}

#[test]
fn mint_without_yes_and_without_a_terminal_refuses() {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").is_ok() {
        // The child would share this terminal and could be answered; nothing to assert here.
        println!("note: a controlling terminal is present; the no-terminal refusal is not asserted");
        return;
    }
    let store = created();
    let o = worldd(&["session", "mint", "--db", db_str(&store), "--episode", "bb", "--grant", GRANT]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("worldd: session mint: refusing: no controlling terminal (open /dev/tty: "), "{err}");
    assert!(list_json(&store).is_empty(), "nothing was minted");
}

#[test]
fn mint_refuses_a_store_that_does_not_exist_and_does_not_create_it() {
    let store = TempStore::new();
    let o = worldd(&["session", "mint", "--db", db_str(&store), "--episode", "bb", "--grant", GRANT, "--yes"]);
    assert_eq!(o.status.code(), Some(1));
    let db = db_str(&store);
    assert_eq!(stderr(&o), format!("worldd: store {db} does not exist; create it with worldd serve --db {db} first\n"));
    assert!(!store.db.exists());
}

#[test]
fn mint_refuses_malformed_grants_episodes_and_ttls_with_one_line() {
    let store = created();
    let db = db_str(&store);
    let cases: [(&[&str], &str); 4] = [
        (&["--episode", "bb", "--grant", "world.apply=world"], "EFFECT=SCOPE:BUDGET"),
        (&["--episode", "bb", "--grant", "world.apply=world:-1"], "EFFECT=SCOPE:BUDGET"),
        (&["--episode", "Bad_Episode", "--grant", GRANT], "^[a-z0-9][a-z0-9-]{0,63}$"),
        (&["--episode", "bb", "--grant", GRANT, "--ttl", "0"], "--ttl must be"),
    ];
    for (args, needle) in cases {
        let o = worldd(&[&["session", "mint", "--db", db][..], args, &["--yes"]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("worldd: session mint: ") && err.contains(needle), "{args:?}: {err}");
        assert_eq!(stdout(&o), "");
    }
    assert!(list_json(&store).is_empty());
}

#[test]
fn list_shows_live_and_expired_sessions_and_never_a_token() {
    let store = TempStore::new();
    let expired = fixture::random_token();
    let t = now();
    with_store(&store.db, |s| fixture::put_session(s, &expired, t - 100, t - 10));
    let db = db_str(&store);
    let o =
        worldd(&["session", "mint", "--db", db, "--episode", "live-one", "--grant", GRANT, "--ttl", "120", "--yes"]);
    assert!(o.status.success());
    let live = stdout(&o).trim_end().to_string();
    let rows = list_json(&store);
    assert_eq!(rows.len(), 2);
    let row = |token: &str| rows.iter().find(|r| r["credentialId"] == Ref::of(token.as_bytes()).hex()).unwrap().clone();
    let (l, e) = (row(&live), row(&expired));
    let mut keys: Vec<&String> = l.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["createdAt", "credentialId", "episode", "expiresAt", "grants", "live"]);
    assert_eq!((l["live"].clone(), l["episode"].clone()), (json!(true), json!("live-one")));
    assert_eq!(l["expiresAt"].as_u64().unwrap() - l["createdAt"].as_u64().unwrap(), 120);
    assert_eq!(e["live"], false);
    assert_eq!(e["expiresAt"], t - 10);
    let text = worldd(&["session", "list", "--db", db]);
    let out = stdout(&text);
    assert!(!out.contains(&live) && !out.contains(&expired), "tokens never listed");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[2], "2 session credential(s)");
    let line_of = |token: &str| *lines.iter().find(|l| l.starts_with(&Ref::of(token.as_bytes()).hex())).unwrap();
    assert!(line_of(&live).contains(" live-one live expires ") && line_of(&live).ends_with(" world.apply=world:10"));
    assert!(line_of(&expired).contains(" bb expired expires "), "{}", line_of(&expired));
    // A person reads when: the date in UTC, not Unix seconds.
    for row in list_json(&store) {
        let id = row["credentialId"].as_str().unwrap();
        let line = lines.iter().find(|l| l.starts_with(id)).unwrap();
        let when = format!(" expires {} UTC ", utc(row["expiresAt"].as_u64().unwrap()));
        assert!(line.contains(&when), "{line} has {when}");
    }
}

#[test]
fn revoking_offline_makes_the_token_unknown_and_a_second_revoke_refuses() {
    let store = created();
    let token = mint(&store.db);
    let id = Ref::of(token.as_bytes()).hex();
    let db = db_str(&store);
    let o = worldd(&["session", "revoke", "--db", db, &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("revoked session credential {id}\n"));
    assert!(list_json(&store).is_empty());
    let again = worldd(&["session", "revoke", "--db", db, &id]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        stderr(&again),
        format!(
            "worldd: session revoke: refusing: no session credential {id} in {db} (already revoked, or minted in another store); nothing was revoked\n"
        )
    );
    let bad = worldd(&["session", "revoke", "--db", db, "xyz"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(stderr(&bad), "worldd: session revoke: credential id \"xyz\" must be 64 lowercase hex\n");
    let d = Daemon::start(&store.db);
    let r = d.commit(&genesis("g").bytes(), Some(&token));
    assert_error(&r, 401, "SessionUnknown", Some("unknown session credential"));
}

#[test]
fn with_a_daemon_running_mint_list_and_revoke_go_through_the_admin_socket() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let socket = store.socket();
    let meta = std::fs::metadata(&socket).expect("the admin socket exists while the daemon runs");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The daemon holds the writer lock, so the verbs cannot have opened the store themselves.
    match world_store::Store::open(&store.db, now()) {
        Err(world_store::OpenError::Locked { .. }) => {}
        other => panic!("expected the daemon to hold the lock, got {:?}", other.map(|_| ())),
    }
    let db = db_str(&store);
    let commits = "World.Commit=log:10";
    let o = worldd(&["session", "mint", "--db", db, "--episode", "bb", "--grant", GRANT, "--grant", commits, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let token = stdout(&o).strip_suffix('\n').expect("one line").to_string();
    assert!(is_token(&token));
    let err = stderr(&o);
    let prefix = format!(
        "worldd session mint: credential_id={} (episode bb, 2 grant(s), expires ",
        Ref::of(token.as_bytes()).hex()
    );
    assert!(err.starts_with(&prefix) && err.lines().count() == 1, "{err}");
    let g = genesis("g");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).ok_json()["selectedHead"], g.world.world_ref.to_string());

    let out_file = store.dir.path().join("live-token");
    let path = out_file.to_str().unwrap();
    let o = worldd(&[
        "session",
        "mint",
        "--db",
        db,
        "--episode",
        "bb",
        "--grant",
        GRANT,
        "--grant",
        commits,
        "--out",
        path,
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(mode(&out_file), 0o600);
    assert!(stdout(&o).starts_with("minted session credential for episode bb: 2 grant(s), expires "));
    assert_eq!(stdout(&o).lines().count(), 1);
    assert!(stderr(&o).starts_with("worldd session mint: credential_id="));
    let second = std::fs::read_to_string(&out_file).unwrap().trim_end().to_string();

    let rows = list_json(&store);
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["live"] == true));
    let text = worldd(&["session", "list", "--db", db]);
    assert!(stdout(&text).ends_with("2 session credential(s)\n"));

    let id = Ref::of(token.as_bytes()).hex();
    let o = worldd(&["session", "revoke", "--db", db, &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("revoked session credential {id}\n"));
    let n = fixture::next(&g.world, "n");
    assert_error(&d.commit(&n.bytes(), Some(&token)), 401, "SessionUnknown", Some("unknown session credential"));
    assert_eq!(d.commit(&n.bytes(), Some(&second)).ok_json()["selectedHead"], n.world.world_ref.to_string());
    let again = worldd(&["session", "revoke", "--db", db, &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).starts_with("worldd: session revoke: refusing: no session credential "));
    assert_eq!(list_json(&store).len(), 1);
}

#[test]
fn an_expired_session_is_refused_as_expired() {
    let store = TempStore::new();
    let token = fixture::random_token();
    let t = now();
    with_store(&store.db, |s| fixture::put_session(s, &token, t - 100, t - 1));
    let d = Daemon::start(&store.db);
    let r = d.commit(&genesis("g").bytes(), Some(&token));
    assert_error(&r, 401, "SessionExpired", Some("session credential has expired"));
    assert_error(&d.get("/v1/head"), 404, "NotFound", None);
}

#[test]
fn bearer_parsing_maps_absent_malformed_and_unknown_each_to_its_class() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let body = genesis("g").bytes();
    let with = |value: &str| d.request("POST", "/v1/commit", &[("Authorization", value)], Some(&body));
    let absent = "a session credential is required: no Authorization Bearer header was present";
    assert_error(&d.commit(&body, None), 401, "SessionAbsent", Some(absent));
    assert_error(&with(""), 401, "SessionAbsent", Some(absent));
    let hex = fixture::random_token();
    let malformed = [
        format!("bearer  {hex}"),
        format!("Bearer  {hex}"),
        format!("Bearer {}", hex.to_uppercase()),
        format!("Bearer {}", &hex[..63]),
        format!("Bearer {hex}0"),
        format!("Bearer {}g", &hex[..63]),
        format!("Basic {hex}"),
        format!("Bearer\t{hex}"),
        hex.clone(),
        "Bearer".to_string(),
    ];
    let message = "malformed Authorization header: expected Bearer <64-hex-credential>";
    for value in &malformed {
        assert_error(&with(value), 400, "InvalidSession", Some(message));
    }
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let r = with(&format!("{scheme} {hex}"));
        assert_error(&r, 401, "SessionUnknown", Some("unknown session credential"));
    }
    // Bytes that are not UTF-8 are malformed, too.
    let mut conn = Raw::connect(&d.addr);
    let mut head = b"Authorization: Bearer ".to_vec();
    head.extend_from_slice(&[0xff; 64]);
    head.extend_from_slice(format!("\r\nContent-Length: {}\r\n", body.len()).as_bytes());
    let mut request = raw_head("POST", &d.addr, "/v1/commit", &head);
    request.extend_from_slice(&body);
    conn.send(&request);
    let r = conn.read_reply();
    assert_error(&r, 400, "InvalidSession", Some(message));
    assert_error(&d.get("/v1/head"), 404, "NotFound", None);
}

#[test]
fn the_bearer_scheme_is_read_in_any_letter_case_on_every_surface() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for scheme in ["bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} {token}");
        let json = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        let mcp = [json[0], json[1], ("Accept", "application/json, text/event-stream")];
        let r = d.request("POST", "/mcp/", &mcp, Some(ping));
        assert_eq!(r.status, 200, "MCP with {scheme:?}: {}", r.text());
        assert!(r.text().contains(r#""result":{}"#), "MCP ping with {scheme:?}: {}", r.text());
        // A2A has no ping: the method is unknown, which it says only to a session it knows.
        let r = d.request("POST", "/a2a/", &json, Some(ping));
        assert_eq!(r.json()["error"]["code"], -32601, "A2A with {scheme:?}: {}", r.text());
        let r = d.request("GET", "/.well-known/agent.json", &json[..1], None);
        assert_eq!(r.status, 200, "the card with {scheme:?}: {}", r.text());
    }
}

#[test]
fn a_refusal_sent_before_the_body_arrived_closes_the_connection_and_one_after_it_keeps_it() {
    let store = TempStore::new();
    let token = fixture::random_token();
    let t = now();
    with_store(&store.db, |s| fixture::put_session(s, &token, t, t + 3600));
    let d = Daemon::start(&store.db);
    // The session is refused before the body is read, and the rest of this body
    // never comes (by length, or a chunk cut short): the reply must say the
    // connection ends, or a client would send its next request on a connection
    // the daemon is closing.
    let unfinished: [(&[u8], &[u8]); 2] = [
        (b"Authorization: Bearer x\r\nContent-Length: 100\r\n", b""),
        (b"Authorization: Bearer x\r\nTransfer-Encoding: chunked\r\n", b"5\r\nab"),
    ];
    for (head, body) in unfinished {
        let mut conn = Raw::connect(&d.addr);
        let mut request = raw_head("POST", &d.addr, "/v1/commit", head);
        request.extend_from_slice(body);
        conn.send(&request);
        let r = conn.read_reply();
        assert_error(&r, 400, "InvalidSession", None);
        assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
        let rest = conn.read_to_close();
        assert!(rest.is_empty(), "nothing after the refusal: {:?}", String::from_utf8_lossy(&rest));
    }
    // A refusal after the body was read leaves the connection open for the next request.
    let mut conn = Raw::connect(&d.addr);
    let body = b"{not json";
    let auth = format!("Authorization: Bearer {token}\r\nContent-Length: {}\r\n", body.len());
    let mut request = raw_head("POST", &d.addr, "/v1/commit", auth.as_bytes());
    request.extend_from_slice(body);
    conn.send(&request);
    let r = conn.read_reply();
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("connection"), None, "{:?}", r.headers);
    conn.send(&raw_head("GET", &d.addr, "/v1/head", b""));
    assert_error(&conn.read_reply(), 404, "NotFound", None);
}

#[test]
fn a_token_minted_for_another_store_is_unknown() {
    let other = created();
    let token = mint(&other.db);
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let r = d.commit(&genesis("g").bytes(), Some(&token));
    assert_error(&r, 401, "SessionUnknown", Some("unknown session credential"));
}

#[test]
fn authorization_is_checked_before_anything_else_about_the_request() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let token = mint(&store.db);
    let garbage = b"this is { not json";
    assert_error(&d.commit(garbage, None), 401, "SessionAbsent", None);
    assert_error(
        &d.request("POST", "/v1/commit", &[("Authorization", "Bearer x")], Some(garbage)),
        400,
        "InvalidSession",
        None,
    );
    assert_error(&d.commit(garbage, Some(&fixture::random_token())), 401, "SessionUnknown", None);
    // An oversized declared body without a session is a session refusal; the daemon
    // answers without waiting for a body that never comes.
    let declared = format!("Content-Length: {}\r\n", (8 << 20) + 1);
    let ask = |auth: &str| {
        let mut conn = Raw::connect(&d.addr);
        conn.send(&raw_head("POST", &d.addr, "/v1/commit", format!("{auth}{declared}").as_bytes()));
        let r = conn.read_reply();
        crate::openapi::check("POST", "/v1/commit", &r);
        r
    };
    assert_error(&ask(""), 401, "SessionAbsent", None);
    assert_error(&ask(&format!("Authorization: Bearer {}\r\n", fixture::random_token())), 401, "SessionUnknown", None);
    // With a session, a client that waits for `100 Continue` is refused on the declared
    // length alone: no continue, no body read.
    let mut conn = Raw::connect(&d.addr);
    let head = format!("Authorization: Bearer {token}\r\nExpect: 100-continue\r\n{declared}");
    conn.send(&raw_head("POST", &d.addr, "/v1/commit", head.as_bytes()));
    let r = conn.read_reply_after_continue(false);
    crate::openapi::check("POST", "/v1/commit", &r);
    assert_error(&r, 413, "PayloadTooLarge", Some("commit body exceeds 8388608 bytes"));
}

#[test]
fn the_session_verbs_find_the_daemon_through_a_symlinked_store_path() {
    let store = TempStore::new();
    let d = Daemon::start(&store.db);
    let link = store.dir.path().join("link.db");
    std::os::unix::fs::symlink(&store.db, &link).unwrap();
    let token = mint(&link);
    let g = genesis("g");
    assert_eq!(d.commit(&g.bytes(), Some(&token)).status, 200);
    let o = worldd(&["session", "list", "--db", link.to_str().unwrap()]);
    assert!(stdout(&o).ends_with("1 session credential(s)\n"), "{}", stdout(&o));
}

#[test]
fn mint_out_writes_a_new_private_file_and_refuses_a_link_or_another_user_s_file() {
    let store = created();
    let db = db_str(&store);
    let mint_to = |path: &Path| {
        worldd(&[
            "session",
            "mint",
            "--db",
            db,
            "--episode",
            "bb",
            "--grant",
            GRANT,
            "--out",
            path.to_str().unwrap(),
            "--yes",
        ])
    };
    // Over an existing file of the user's own, looser one: replaced, at 0600.
    let out = store.dir.path().join("token");
    std::fs::write(&out, "old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = mint_to(&out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(mode(&out), 0o600);
    assert_eq!(std::fs::read_to_string(&out).unwrap().trim().len(), 64);
    // A link planted where the token goes is refused, and its target untouched.
    let target = store.dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = store.dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = mint_to(&link);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is a symbolic link: refused"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    // So is a link planted at the file written first.
    let partial = store.dir.path().join("fresh.partial");
    std::os::unix::fs::symlink(&target, &partial).unwrap();
    let o = mint_to(&store.dir.path().join("fresh"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep", "the link was unlinked, not followed");
    // A file of another user (only root can make one here).
    if nix::unistd::geteuid().is_root() {
        let theirs = store.dir.path().join("theirs");
        std::fs::write(&theirs, "theirs").unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let o = mint_to(&theirs);
        assert_eq!(o.status.code(), Some(1));
        assert!(stderr(&o).contains("belongs to another user"), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    }
}

#[test]
fn mint_says_who_may_answer_each_grant_that_asks() {
    let store = created();
    let db = db_str(&store);
    let o = worldd(&[
        "session",
        "mint",
        "--db",
        db,
        "--episode",
        "bb",
        "--grant",
        "Workspace.Write=worktree:5",
        "--grant",
        "Workspace.Exec=worktree:5",
        "--ask",
        "Workspace.Write",
        "--ask-operator",
        "Workspace.Exec",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("grant Workspace.Write=worktree asks before each effect: its caller's client may answer"),
        "{err}"
    );
    assert!(err.contains("not an agent that holds its own token: use --ask-operator for that"), "{err}");
    assert!(
        err.contains("grant Workspace.Exec=worktree asks before each effect: only the operator may answer"),
        "{err}"
    );
}
