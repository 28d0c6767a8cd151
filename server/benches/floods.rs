//! Floods: what unauthenticated clients cost the daemon, and whether
//! `/v1/health` stays reachable meanwhile. Three stretches, each printed
//! as one row:
//!
//! - quiet: no flood, the baseline;
//! - bodies: `FLOOD_CONNS` (default 1000) unauthenticated connections each
//!   POST `/mcp/` declaring a 4 MiB body, send all of it but the last byte
//!   and hold on (a connection the daemon closes is not reopened);
//! - idle: `FLOOD_IDLE` (default 1024, the connection cap) sockets that send
//!   nothing, each reopened as soon as the daemon closes it.
//!
//! Each stretch has a daemon of its own.
//!
//! During each, a probe opens a fresh connection for `GET /v1/health` every
//! 50 ms and waits at most `PROBE_TIMEOUT` (then it counts as unanswered;
//! `over 1 s` counts those answered later than that);
//! the daemon's resident memory (`VmRSS`) is sampled every 100 ms. Figures,
//! never assertions: `cargo bench -p world-server --bench floods`
//! (`FLOOD_SECS`, default 15, sets each stretch's length; `WORLDD_BIN` picks
//! another build to compare).

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::*;

const BODY: usize = 4 << 20;
const PROBE_EVERY: Duration = Duration::from_millis(50);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
const RSS_EVERY: Duration = Duration::from_millis(100);

fn main() {
    if !invoked_as_bench("floods") {
        return;
    }
    let (conns, idle, secs) =
        (env_or("FLOOD_CONNS", 1000usize), env_or("FLOOD_IDLE", 1024usize), env_or("FLOOD_SECS", 15.0));
    let setup = Setup::new(1);
    eprintln!("floods: {} ({conns} body connections, {idle} idle sockets, {secs} s a stretch)", setup.worldd.display());
    println!(
        "| stretch | connections | RSS before MiB | RSS peak MiB | growth MiB | probes | unanswered | over 1 s | health p50 ms | health p99 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let window = Duration::from_secs_f64(secs);
    // A daemon of its own for each stretch: none starts with what the last one left.
    let daemon = setup.start(&[]);
    stretch(&daemon, "quiet", 0, window, |_| {});
    drop(daemon);
    let daemon = setup.start(&[]);
    stretch(&daemon, "bodies", conns, window, |stop| bodies(&daemon.addr, conns, stop));
    drop(daemon);
    let daemon = setup.start(&[]);
    stretch(&daemon, "idle", idle, window, |stop| idle_sockets(&daemon.addr, idle, stop));
}

/// Runs `flood` for `window` beside the health probe and the memory sampler, and prints the row.
fn stretch(daemon: &Daemon, label: &str, conns: usize, window: Duration, flood: impl FnOnce(&AtomicBool) + Send) {
    let before = daemon.resident_bytes();
    let stop = AtomicBool::new(false);
    let (latencies, unanswered, peak) = std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || flood(stop));
        let probe = s.spawn(move || probe_health(&daemon.addr, stop));
        let mut peak = before;
        let end = Instant::now() + window;
        while Instant::now() < end {
            peak = peak.max(daemon.resident_bytes());
            std::thread::sleep(RSS_EVERY);
        }
        stop.store(true, Ordering::Relaxed);
        let (latencies, unanswered) = probe.join().unwrap();
        (latencies, unanswered, peak)
    });
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "| {label} | {conns} | {:.0} | {:.0} | {:.0} | {} | {unanswered} | {} | {:.2} | {:.2} |",
        mib(before),
        mib(peak),
        mib(peak.saturating_sub(before)),
        latencies.len() + unanswered,
        latencies.iter().filter(|l| **l > Duration::from_secs(1)).count(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99)
    );
}

/// Health probes until `stop`: the latencies of those answered (sorted), and how many were not.
fn probe_health(addr: &str, stop: &AtomicBool) -> (Vec<Duration>, usize) {
    let (mut latencies, mut unanswered) = (Vec::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        match health(addr) {
            Some(()) => latencies.push(began.elapsed()),
            None => unanswered += 1,
        }
        std::thread::sleep(PROBE_EVERY.saturating_sub(began.elapsed()));
    }
    latencies.sort();
    (latencies, unanswered)
}

/// One `GET /v1/health` on a fresh connection, answered 200 within `PROBE_TIMEOUT`.
fn health(addr: &str) -> Option<()> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, PROBE_TIMEOUT).ok()?;
    s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))).ok()?;
    s.write_all(format!("GET /v1/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).ok()?;
    reply.starts_with(b"HTTP/1.1 200").then_some(())
}

/// `conns` unauthenticated MCP POSTs declaring `BODY` bytes, each sending all
/// but the last byte, then holding on until `stop`.
fn bodies(addr: &str, conns: usize, stop: &AtomicBool) {
    static CHUNK: [u8; 64 << 10] = [b' '; 64 << 10];
    let (refused, held) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        for _ in 0..conns {
            let (refused, held) = (&refused, &held);
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn_scoped(s, move || {
                    let Ok(mut c) = TcpStream::connect(addr) else { return };
                    let _ = c.set_write_timeout(Some(Duration::from_millis(200)));
                    let head = format!(
                        "POST /mcp/ HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {BODY}\r\n\r\n"
                    );
                    if c.write_all(head.as_bytes()).is_err() {
                        refused.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    let mut left = BODY - 1;
                    while left > 0 && !stop.load(Ordering::Relaxed) {
                        match c.write(&CHUNK[..left.min(CHUNK.len())]) {
                            Ok(n) => left -= n,
                            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
                            Err(_) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                        }
                    }
                    held.fetch_add(1, Ordering::Relaxed);
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                })
                .expect("spawn a flood thread");
        }
    });
    eprintln!(
        "  bodies: {} wrote all but the last byte (into the socket's buffers at least), {} were cut off by the daemon",
        held.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
}

/// `count` sockets that send nothing; each one the daemon closes is opened again, until `stop`.
fn idle_sockets(addr: &str, count: usize, stop: &AtomicBool) {
    let target: std::net::SocketAddr = addr.parse().unwrap();
    let open = || TcpStream::connect_timeout(&target, Duration::from_millis(200)).ok();
    let mut socks: Vec<Option<TcpStream>> = (0..count).map(|_| open()).collect();
    let mut reopened = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for slot in socks.iter_mut() {
            let closed = match slot {
                None => true,
                Some(s) => {
                    let _ = s.set_nonblocking(true);
                    !matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == ErrorKind::WouldBlock)
                }
            };
            if closed {
                *slot = open();
                reopened += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("  idle: {reopened} sockets reopened after the daemon closed them");
}
