//! Private reads (`serve --private-reads`), seen from outside: without a
//! credential every read but `/v1/health` is refused; a session reads its own
//! episode (and the commit's tip) and nothing another episode did; the
//! operator token the daemon writes beside the store reads everything, the
//! workbench through a browser's `Basic` credentials too; the client verbs
//! read with a token file or find the operator token by the store; and
//! without the flag every read is as open as it was.

use crate::episodes::{a2a, mint};
use crate::fixture::{self, SEMANTIC_ID};
use crate::harness::*;
use base64::Engine;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A daemon on a store where episodes `one` and `two` each made a call.
struct Served {
    store: TempStore,
    daemon: Daemon,
    /// Session tokens of episodes `one` and `two`.
    one: String,
    two: String,
    /// The genesis world and its object.
    world: String,
    object: String,
}

fn operator_token_file(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}.operator-token", db.display()))
}

fn serve(extra: &[&str]) -> Served {
    let store = TempStore::new();
    let daemon = Daemon::start_with(&store.db, extra);
    let db = store.db.to_str().unwrap();
    let o = worldd(&["publish", "--db", db, "--builtin"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let one = mint(db, "one", &["world.apply=world:10", "World.Commit=log:10"], None).token;
    let two = mint(db, "two", &["world.apply=world:10"], None).token;
    let genesis = fixture::genesis("private reads");
    assert_eq!(daemon.commit(&genesis.bytes(), Some(&one)).status, 200, "a commit checks its own session");
    for (token, episode) in [(&one, "one"), (&two, "two")] {
        let r = a2a(&daemon, token, "first", "tools.echo", json!({"episode": episode}));
        assert!(r.get("result").is_some(), "{r}");
    }
    let (world, object) = (genesis.world.world_ref.to_string(), genesis.object.hash.to_string());
    Served { store, daemon, one, two, world, object }
}

impl Served {
    fn operator(&self) -> String {
        std::fs::read_to_string(operator_token_file(&self.store.db)).unwrap().trim().to_string()
    }

    fn get_as(&self, path: &str, authorization: &str) -> Reply {
        self.daemon.request("GET", path, &[("Authorization", authorization)], None)
    }

    /// Every read only the operator may make.
    fn operator_reads(&self) -> Vec<String> {
        let (w, o) = (&self.world, &self.object);
        [
            format!("/v1/objects/{o}"),
            format!("/v1/objects/{o}?payload=true"),
            format!("/v1/objects/{o}/referrers"),
            format!("/v1/objects/{o}/journal"),
            format!("/v1/objects/by-semantic-id/{SEMANTIC_ID}"),
            "/v1/log/0".into(),
            "/v1/log".into(),
            "/v1/registry/world/transition-registry/v1".into(),
            "/v1/store".into(),
            "/v1/episodes".into(),
            "/metrics".into(),
            "/workbench".into(),
            format!("/workbench?world={w}"),
            format!("/workbench?object={o}&payload=1"),
            "/workbench/episodes".into(),
            "/workbench/episodes/one".into(),
        ]
        .into()
    }

    /// The reads any live session may make: the commit's tip and receipts.
    fn session_reads(&self) -> Vec<String> {
        vec!["/v1/head".into(), format!("/v1/worlds/{}", self.world), "/v1/receipts/rest:none".into()]
    }

    fn episode_reads(episode: &str) -> Vec<String> {
        vec![format!("/v1/episodes/{episode}"), format!("/v1/episodes/{episode}/calls")]
    }

    fn closed_reads(&self) -> Vec<String> {
        let mut all = self.operator_reads();
        all.extend(self.session_reads());
        all.extend(Served::episode_reads("one"));
        all
    }
}

/// What a read the caller may make answers: the genesis object is no effect
/// record, so no journal item carries it.
fn answered(path: &str) -> u16 {
    if path.ends_with("/journal") { 404 } else { 200 }
}

fn basic(token: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("operator:{token}")))
}

fn challenges(r: &Reply) -> Vec<&str> {
    r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate")).map(|(_, v)| v.as_str()).collect()
}

/// A refusal in the route's own form: a workbench page, or the REST envelope.
fn assert_refused(r: &Reply, path: &str, status: u16, class: &str) {
    if path.starts_with("/workbench") {
        assert_eq!(r.status, status, "{path}: {}", r.text());
        assert_eq!(r.content_type(), "text/html; charset=utf-8", "{path}");
    } else {
        let err = assert_error(r, status, class, None);
        assert!(err["message"].as_str().unwrap().contains("private"), "{path}: {err}");
    }
}

#[test]
fn without_a_credential_every_closed_read_is_refused_and_health_is_not() {
    let s = serve(&["--private-reads"]);
    for path in s.closed_reads() {
        let r = s.daemon.get(&path);
        assert_refused(&r, &path, 401, "SessionAbsent");
        assert_eq!(challenges(&r), ["Basic realm=\"worldd\", charset=\"UTF-8\"", "Bearer realm=\"worldd\""], "{path}");
    }
    assert_eq!(s.daemon.get("/v1/health").ok_json()["status"], "ok");
    // The credential is asked for before anything of the request is looked at.
    assert_refused(&s.daemon.get("/v1/log?limit=x"), "/v1/log", 401, "SessionAbsent");
    assert_refused(&s.daemon.get("/v1/objects/not-a-ref"), "/v1/objects", 401, "SessionAbsent");
    let bad = ["Bearer not-hex", "Basic !!", &basic("short"), "Token abc"];
    for auth in bad {
        assert_error(&s.get_as("/v1/log", auth), 400, "InvalidSession", None);
    }
    let stranger = fixture::random_token();
    for auth in [format!("Bearer {stranger}"), basic(&stranger)] {
        assert_error(&s.get_as("/v1/episodes/one", &auth), 401, "SessionUnknown", None);
    }
    let db = s.store.db.to_str().unwrap();
    let short = mint(db, "one", &["world.apply=world:1"], Some(1));
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let expired = s.get_as("/v1/episodes/one", &format!("Bearer {}", short.token));
    assert_error(&expired, 401, "SessionExpired", None);
}

#[test]
fn a_session_reads_its_own_episode_and_the_commit_tip_and_nothing_else() {
    let s = serve(&["--private-reads"]);
    let own = format!("Bearer {}", s.one);
    for auth in [own.clone(), basic(&s.one), format!("bEaReR {}", s.one)] {
        let summary = s.get_as("/v1/episodes/one", &auth).ok_json();
        assert_eq!((&summary["episode"], &summary["calls"]), (&json!("one"), &json!(1)), "{summary}");
    }
    let calls = s.get_as("/v1/episodes/one/calls", &own).ok_json();
    assert_eq!(calls["calls"].as_array().unwrap().len(), 1, "{calls}");
    // The path's episode is compared once decoded, as the route reads it.
    assert_eq!(s.get_as("/v1/episodes/%6Fne", &own).ok_json()["episode"], "one");
    for path in s.session_reads() {
        assert_eq!(s.get_as(&path, &own).status, 200, "{path}");
    }
    for path in Served::episode_reads("two") {
        assert_refused(&s.get_as(&path, &own), &path, 403, "OtherEpisode");
    }
    for path in s.operator_reads() {
        assert_refused(&s.get_as(&path, &own), &path, 403, "OperatorOnly");
    }
    // The other session is told apart the same way.
    let theirs = format!("Bearer {}", s.two);
    assert_eq!(s.get_as("/v1/episodes/two", &theirs).ok_json()["episode"], "two");
    assert_refused(&s.get_as("/v1/episodes/one/calls", &theirs), "/v1/episodes", 403, "OtherEpisode");
}

#[test]
fn the_operator_token_reads_everything_and_the_workbench_through_basic_credentials() {
    let s = serve(&["--private-reads"]);
    let file = operator_token_file(&s.store.db);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(s.daemon.stderr_lines().iter().any(|l| l.contains(&file.display().to_string())), "start names the file");
    let token = s.operator();
    assert!(!s.daemon.stderr_lines().iter().any(|l| l.contains(&token)), "the token is never logged");
    let bearer = format!("Bearer {token}");
    for path in s.closed_reads().iter().chain(&Served::episode_reads("two")) {
        let r = s.get_as(path, &bearer);
        assert_eq!(r.status, answered(path), "{path}: {}", String::from_utf8_lossy(&r.body));
    }
    let page = s.get_as("/workbench/episodes/two", &basic(&token));
    assert_eq!((page.status, page.content_type()), (200, "text/html; charset=utf-8"));
    assert!(page.text().contains("two"), "{}", page.text());
    assert!(s.get_as("/metrics", &basic(&token)).text().contains("worldd_build_info"));
}

#[test]
fn each_start_makes_a_new_operator_token_and_the_last_one_stops_working() {
    let mut s = serve(&["--private-reads"]);
    let before = s.operator();
    assert!(s.daemon.signal_and_wait("TERM").success());
    s.daemon = Daemon::start_with(&s.store.db, &["--private-reads"]);
    let after = s.operator();
    assert_ne!(before, after);
    assert_error(&s.get_as("/v1/log", &format!("Bearer {before}")), 401, "SessionUnknown", None);
    assert_eq!(s.get_as("/v1/log", &format!("Bearer {after}")).status, 200);
}

#[test]
fn the_client_verbs_read_with_a_token_file_or_the_operator_token_beside_the_store() {
    let s = serve(&["--private-reads"]);
    let (addr, db) = (s.daemon.base_url(), s.store.db.to_str().unwrap().to_string());
    let o = worldd(&["head", "--addr", &addr]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.starts_with("worldd: /v1/head returned HTTP 401 SessionAbsent: "), "{err}");
    assert!(err.contains("give --token-file FILE, or --db PATH of its store"), "{err}");
    let object = s.object.clone();
    let verbs: [&[&str]; 7] = [
        &["head"],
        &["log"],
        &["object", &object, "--payload"],
        &["why", "head"],
        &["why", &object],
        &["episodes"],
        &["episode", "two"],
    ];
    for verb in verbs {
        let o = worldd(&[verb, &["--addr", &addr, "--db", &db]].concat());
        assert!(o.status.success(), "{verb:?}: {}", stderr(&o));
        assert!(!stdout(&o).is_empty(), "{verb:?}");
    }
    let head = s.get_as("/v1/head", &format!("Bearer {}", s.operator())).text();
    assert_eq!(stdout(&worldd(&["head", "--addr", &addr, "--db", &db])).trim(), head);
    let session = s.store.dir.path().join("one.token");
    std::fs::write(&session, format!("{}\n", s.one)).unwrap();
    let session = session.to_str().unwrap();
    let o = worldd(&["episode", "one", "--addr", &addr, "--token-file", session]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("episode   one"), "{}", stdout(&o));
    for (verb, class) in [(&["episode", "two"][..], "OtherEpisode"), (&["episodes"][..], "OperatorOnly")] {
        let o = worldd(&[verb, &["--addr", &addr, "--token-file", session]].concat());
        assert_eq!(o.status.code(), Some(1), "{verb:?}");
        assert!(stderr(&o).contains(&format!("HTTP 403 {class}: ")), "{verb:?}: {}", stderr(&o));
    }
    let junk = s.store.dir.path().join("junk");
    std::fs::write(&junk, "not a token").unwrap();
    let o = worldd(&["head", "--addr", &addr, "--token-file", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("worldd: token file {} does not hold a token (64 lowercase hex digits)\n", junk.display())
    );
}

#[test]
fn without_the_flag_every_read_stays_open_and_no_operator_token_is_made() {
    let s = serve(&[]);
    for path in s.closed_reads().iter().chain(&Served::episode_reads("two")) {
        let r = s.daemon.get(path);
        assert_eq!(r.status, answered(path), "{path}: {}", String::from_utf8_lossy(&r.body));
        assert!(challenges(&r).is_empty(), "{path}");
    }
    assert!(!operator_token_file(&s.store.db).exists());
    // The verbs read without a credential where the daemon wrote none.
    let (addr, db) = (s.daemon.base_url(), s.store.db.to_str().unwrap().to_string());
    let o = worldd(&["episodes", "--addr", &addr, "--db", &db]);
    assert!(o.status.success(), "{}", stderr(&o));
}
