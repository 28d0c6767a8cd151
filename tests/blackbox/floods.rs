//! What no client can exhaust: a body is read only once its request is
//! authenticated and within the route's cap, bodies in flight share one
//! budget, and idle connections neither hold their slots for long nor keep
//! other clients out at the connection cap.
//!
//! Counts stay small (a test-sized connection cap through the hidden
//! `--connections-max` flag) and everything stays on loopback.

use crate::harness::*;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Well inside the 30 s the daemon gives a client to send a body (and, until
/// idle connections were bounded, to send a head): an answer or a close
/// within it did not wait for what never came. Only a bound, never a
/// measure of speed.
const SOON: Duration = Duration::from_secs(15);
/// `world_protocol::mcp::MCP_BODY_MAX`, `a2a::A2A_BODY_MAX` and `/v1/commit`'s cap.
const MCP_MAX: usize = 4 << 20;
const A2A_MAX: usize = 1 << 20;
const COMMIT_MAX: usize = 8 << 20;
const PING: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
const MCP_HEAD: &str = "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";

fn daemon(extra: &[&str]) -> (TempStore, Daemon, String) {
    let store = TempStore::new();
    let d = Daemon::start_with(&store.db, extra);
    let token = mint(&store.db);
    (store, d, token)
}

/// A connection whose reads give up at `SOON`.
fn connect(addr: &str) -> Raw {
    let conn = Raw::connect(addr);
    conn.stream.set_read_timeout(Some(SOON)).unwrap();
    conn
}

/// Sends a POST head declaring `length` bytes, then `sent` of them, and reads the answer.
fn post_partly(addr: &str, path: &str, extra: &str, length: usize, sent: &[u8]) -> (Raw, Reply) {
    let mut conn = connect(addr);
    let head = format!("{extra}Content-Length: {length}\r\n");
    let mut request = raw_head("POST", addr, path, head.as_bytes());
    request.extend_from_slice(sent);
    conn.send(&request);
    let r = conn.read_reply();
    (conn, r)
}

fn text(r: &Reply) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

#[test]
fn an_unauthenticated_post_is_refused_before_its_body_arrives() {
    let (_store, d, _) = daemon(&[]);
    let part = vec![b' '; 1 << 10];
    let unknown = format!("Authorization: Bearer {}\r\n", crate::fixture::random_token());
    // An MCP body of 4 MiB is within its cap: only the missing session refuses it.
    for (auth, expected) in [
        ("", "session credential is absent: send Authorization: Bearer <session-credential>\n"),
        (unknown.as_str(), "unknown session credential\n"),
    ] {
        let (mut conn, r) = post_partly(&d.addr, "/mcp/", &format!("{MCP_HEAD}{auth}"), MCP_MAX, &part);
        assert_eq!((r.status, text(&r).as_str()), (401, expected));
        assert_eq!(r.header("connection"), Some("close"), "{:?}", r.headers);
        assert!(conn.read_to_close().is_empty(), "the daemon closes without waiting for the rest");
    }
    let (_, r) = post_partly(&d.addr, "/a2a/", "Content-Type: application/json\r\n", A2A_MAX, &part);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], -32001, "A2A's session denial: {v}");
    let (_, r) = post_partly(&d.addr, "/v1/commit", "", COMMIT_MAX, &part);
    assert_error(&r, 401, "SessionAbsent", None);
}

#[test]
fn a_declared_length_over_the_cap_is_refused_on_every_route_with_no_byte_read() {
    let (_store, d, token) = daemon(&[]);
    let auth = format!("Authorization: Bearer {token}\r\n");
    // MCP refuses the size before the session, as the seed does; the others after it.
    for auth in ["", auth.as_str()] {
        let (_, r) = post_partly(&d.addr, "/mcp/", &format!("{MCP_HEAD}{auth}"), MCP_MAX + 1, b"");
        assert_eq!(r.status, 200, "{}", text(&r));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"]["message"], "invalid MCP request body", "{v}");
        assert_eq!(v["id"], serde_json::Value::Null, "{v}");
    }
    let (_, r) = post_partly(&d.addr, "/a2a/", &format!("Content-Type: application/json\r\n{auth}"), A2A_MAX + 1, b"");
    assert_eq!(r.status, 200, "{}", text(&r));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], -32600, "{v}");
    let (_, r) = post_partly(&d.addr, "/v1/commit", &auth, COMMIT_MAX + 1, b"");
    crate::openapi::check("POST", "/v1/commit", &r);
    assert_error(&r, 413, "PayloadTooLarge", Some("commit body exceeds 8388608 bytes"));
}

/// Reads from `conn` until the daemon closes it; fails if it is still open at `SOON`.
fn wait_closed(conn: &mut TcpStream) {
    conn.set_read_timeout(Some(SOON)).unwrap();
    let mut sink = [0u8; 1024];
    loop {
        match conn.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
            Err(e) => panic!("the daemon did not close the connection: {e}"),
        }
    }
}

/// Whether the daemon still holds `conn` open (nothing to read, no close).
fn still_open(conn: &TcpStream) -> bool {
    conn.set_nonblocking(true).unwrap();
    let open = matches!(conn.peek(&mut [0u8; 1]), Err(e) if e.kind() == ErrorKind::WouldBlock);
    conn.set_nonblocking(false).unwrap();
    open
}

#[test]
fn a_connection_that_sends_no_complete_request_head_is_closed() {
    let (_store, d, _) = daemon(&[]);
    let mut silent = TcpStream::connect(&d.addr).unwrap();
    let mut halfway = TcpStream::connect(&d.addr).unwrap();
    halfway.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    wait_closed(&mut silent);
    wait_closed(&mut halfway);
    assert_eq!(d.get("/v1/health").status, 200);
}

const CAP: usize = 8;

fn health_on(conn: &mut Raw, addr: &str) -> Reply {
    conn.send(&raw_head("GET", addr, "/v1/health", b""));
    conn.read_reply()
}

#[test]
fn at_the_connection_cap_the_oldest_silent_connection_makes_room() {
    let (_store, d, _) = daemon(&["--connections-max", &CAP.to_string()]);
    let mut silent: Vec<TcpStream> = (0..CAP).map(|_| TcpStream::connect(&d.addr).unwrap()).collect();
    let mut probe = connect(&d.addr);
    assert_eq!(health_on(&mut probe, &d.addr).status, 200);
    assert!(still_open(&silent[CAP - 1]), "the newest silent connection was not the one closed");
    wait_closed(&mut silent[0]);
    // Again and again: each newcomer displaces the oldest of those still silent.
    for _ in 0..CAP {
        let mut probe = connect(&d.addr);
        assert_eq!(health_on(&mut probe, &d.addr).status, 200);
    }
}

#[test]
fn at_the_connection_cap_the_oldest_idle_keep_alive_connection_makes_room() {
    let (_store, d, _) = daemon(&["--connections-max", &CAP.to_string()]);
    // Each has had its answer and waits, open, for a next request that never comes.
    let mut idle: Vec<Raw> = (0..CAP)
        .map(|_| {
            let mut conn = connect(&d.addr);
            assert_eq!(health_on(&mut conn, &d.addr).status, 200);
            conn
        })
        .collect();
    let mut probe = connect(&d.addr);
    assert_eq!(health_on(&mut probe, &d.addr).status, 200);
    wait_closed(&mut idle[0].stream);
    // The rest are still served on their own connections.
    for conn in &mut idle[1..] {
        assert_eq!(health_on(conn, &d.addr).status, 200);
    }
}

#[test]
fn request_bodies_in_flight_share_one_budget_and_past_it_a_request_is_refused_as_busy() {
    let (_store, d, token) = daemon(&[]);
    let auth = format!("Authorization: Bearer {token}\r\n");
    // Sixteen bodies of 4 MiB less a byte fill the 64 MiB budget; each waits for its last byte.
    let holders: Vec<Raw> = (0..16)
        .map(|_| {
            let mut conn = connect(&d.addr);
            let head = format!("{MCP_HEAD}{auth}Content-Length: {MCP_MAX}\r\n");
            let mut request = raw_head("POST", &d.addr, "/mcp/", head.as_bytes());
            request.resize(request.len() + MCP_MAX - 1, b' ');
            conn.send(&request);
            conn
        })
        .collect();
    // Each probe's body (1 KiB) is more than the 16 bytes the holders leave.
    let mut padded = PING.to_vec();
    padded.resize(1 << 10, b' ');
    let ping = |auth: &str| {
        let (_, r) = post_partly(&d.addr, "/mcp/", &format!("{MCP_HEAD}{auth}"), padded.len(), &padded);
        r
    };
    let mut object = b"{}".to_vec();
    object.resize(1 << 10, b' ');
    // The daemon reads the holders' bytes as they come; once it holds them all, a ping is busy.
    let deadline = Instant::now() + SOON;
    let busy = loop {
        let r = ping(&auth);
        if r.body.starts_with(b"{") {
            break r;
        }
        assert!(Instant::now() < deadline, "never refused as busy: {}", text(&r));
    };
    let v: serde_json::Value = serde_json::from_slice(&busy.body).unwrap();
    assert_eq!(v["error"]["message"], "host callback capacity exceeded", "{v}");
    let (_, r) = post_partly(&d.addr, "/v1/commit", &auth, object.len(), &object);
    crate::openapi::check("POST", "/v1/commit", &r);
    let err = assert_error(&r, 503, "Timeout", None);
    assert!(err["message"].as_str().unwrap().contains("resend shortly"), "{err}");
    let a2a = format!("Content-Type: application/json\r\n{auth}");
    let (_, r) = post_partly(&d.addr, "/a2a/", &a2a, object.len(), &object);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], -32603, "{v}");
    // Without a session nothing is read, so the budget does not matter.
    assert_eq!(ping("").status, 401);
    // The holders go away, and their share with them.
    drop(holders);
    let deadline = Instant::now() + SOON;
    while !ping(&auth).body.starts_with(b"event: message") {
        assert!(Instant::now() < deadline, "the budget was never given back");
    }
}
