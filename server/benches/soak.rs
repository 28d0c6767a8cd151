//! Soak: minutes of durable MCP `tools/call` at 8 clients, pure (`tools_decho`)
//! and effectful (`ailang-read`, one effect each) over four episodes, printing
//! at every interval what the daemon holds in memory, what the store grows
//! by per call, how long its checkpoints held the writer, how occupied the
//! single writer was (and how much of that waiting for syncs; work is
//! counted when each batch or checkpoint ends, so a long one at an
//! interval's edge may lift that interval a little past 100%), the CPU per
//! call of the daemon and of this process (the clients) with the machine's
//! busy share; at the end,
//! `verify`'s account of the logical bytes against the file. Figures, never
//! assertions: `cargo bench -p world-server --bench soak`.
//!
//! `SOAK_SECS` (default 120) in intervals of `SOAK_INTERVAL_SECS` (default 10);
//! `SOAK_SERVE_ARGS` adds `serve` flags (e.g. `--cache-mib 16`); `SOAK_PURE=1`
//! sends only `tools_decho`; `SOAK_CLIENTS` sets the clients (default 8);
//! `BENCH_KEEP_STORE=1` leaves the store's directory behind for a look (its
//! path is printed first).

mod support;

use serde_json::Value;
use support::*;

/// Clients by default (`SOAK_CLIENTS` sets another count).
const CLIENTS: usize = 8;
const EPISODES: usize = 4;

fn main() {
    if !invoked_as_bench("soak") {
        return;
    }
    let (total, interval) = (env_or("SOAK_SECS", 120.0), env_or("SOAK_INTERVAL_SECS", 10.0));
    let serve_args = std::env::var("SOAK_SERVE_ARGS").unwrap_or_default();
    let clients = env_or("SOAK_CLIENTS", CLIENTS).max(1);
    let pure = std::env::var("SOAK_PURE").is_ok_and(|v| v == "1");
    let setup = Setup::new(EPISODES);
    let daemon = setup.start(&serve_args.split_whitespace().collect::<Vec<_>>());
    setup.publish_builtin();
    let tokens: Vec<String> = setup.episodes.iter().map(|ep| setup.mint(ep)).collect();
    genesis(&daemon.addr, &tokens[0]);
    let file_len = || {
        let files = world_store::FileSizes::of(&setup.db);
        files.file_bytes + files.payload_bytes
    };
    let on_disk = || world_store::FileSizes::of(&setup.db).on_disk();
    eprintln!(
        "soak: {} ({total} s in {interval} s intervals, {clients} clients over {EPISODES} episodes, {}, serve {serve_args:?}), store {}",
        setup.worldd.display(),
        if pure { "tools_decho only" } else { "tools_decho and ailang-read" },
        setup.db.display()
    );

    println!(
        "| s | calls | calls/s | errors | p50 ms | p99 ms | RSS MiB | files MiB | on disk MiB | on-disk growth B/call | written KiB/call (daemon / device) | checkpoints (ms per s) | writer occupied (waiting for sync) | CPU us/call (daemon / clients) | busy |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (start_disk, start_rss) = (on_disk(), daemon.resident_bytes());
    let (mut calls, mut peak_rss, mut elapsed) = (0usize, start_rss, 0.0);
    while elapsed < total {
        let s = soak(&daemon, &setup.db, &tokens, clients, interval, pure);
        let us_per_call = |secs: f64| 1e6 * secs / s.row.calls.max(1) as f64;
        peak_rss = peak_rss.max(s.peak_rss);
        calls += s.row.calls;
        elapsed += interval;
        let (occupied, waiting) = s.writer.occupied_percent(s.row.secs);
        println!(
            "| {elapsed:.0} | {calls} | {:.0} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {:.0} ({:.0}) | {occupied:.0}% ({waiting:.0}%) | {:.0} / {:.0} | {:.0}% |",
            s.row.rate(),
            s.row.errors,
            s.row.p50(),
            s.row.p99(),
            mib(s.rss),
            mib(file_len()),
            mib(on_disk()),
            s.disk_per_call(),
            s.written.per(s.row.calls),
            s.writer.checkpoints,
            s.writer.checkpoint_ms_per_s(s.row.secs),
            us_per_call(s.cpu_secs),
            us_per_call(s.row.load.own_secs),
            100.0 * s.row.load.busy()
        );
    }

    let report: Value = serde_json::from_str(&setup.cli(&["verify", "--db", setup.db.to_str().unwrap(), "--json"]))
        .expect("verify --json");
    let bytes = |k: &str| report[k].as_u64().unwrap_or(0);
    let per_call = |b: u64| b as f64 / calls.max(1) as f64;
    println!();
    println!(
        "after {calls} calls: resident memory {:.1} MiB at start, {:.1} MiB at most; the file took {:.0} B of disk per call",
        mib(start_rss),
        mib(peak_rss),
        per_call(on_disk().saturating_sub(start_disk))
    );
    println!(
        "verify ({} faults): {:.1} MiB logical (rows and payloads) = {:.0} B per call, in {:.1} MiB of table pages ({:.1} MiB on disk in a {:.1} MiB file) and a {:.1} MiB payload file ({:.2}x the logical bytes)",
        bytes("faultCount"),
        mib(bytes("logicalBytes")),
        per_call(bytes("logicalBytes")),
        mib(bytes("pageBytes")),
        mib(bytes("allocatedBytes")),
        mib(bytes("fileBytes")),
        mib(bytes("payloadFileBytes")),
        (bytes("allocatedBytes") + bytes("payloadFileBytes")) as f64 / bytes("logicalBytes").max(1) as f64
    );
    println!("| table | rows | stored MiB | in pages MiB | fill |");
    println!("|---|---:|---:|---:|---:|");
    for t in report["tables"].as_array().into_iter().flatten().take(12) {
        let b = |k: &str| t[k].as_u64().unwrap_or(0);
        let pages = b("storedBytes") + b("metadataBytes") + b("fragmentedBytes");
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.0}% |",
            t["table"].as_str().unwrap_or("?"),
            b("rows"),
            mib(b("storedBytes")),
            mib(pages),
            100.0 * b("storedBytes") as f64 / pages.max(1) as f64
        );
    }
}
