//! What `GET /metrics` serves: the daemon's counters, gauges and histograms
//! in the OpenMetrics text format, for Prometheus and its kin. Every label is
//! bounded (surface, outcome class, tool id capped by `TOOL_LABELS_MAX`,
//! effect name, status, denial label): never an episode, task, invocation or
//! credential, which belong to the store's own answers.
//!
//! The store keeps its writer's histograms itself (it depends on no metrics
//! crate); a scrape reads them (`Scrape::writer`) and a collector encodes
//! that reading as Prometheus histograms.
//!
//! `serve --no-metrics` builds `Metrics::off`: nothing is counted on a
//! call's path and `/metrics` is not served (the benchmark's baseline).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use world_store::WriterHistograms;
use world_store::histogram::Snapshot;

/// Distinct tool ids kept as labels; calls of any further tool count as `other`.
pub const TOOL_LABELS_MAX: usize = 64;
/// Effect names kept as labels; further ones count as `other`.
pub const EFFECT_LABELS_MAX: usize = 32;
/// The content type of the answer, and of the classic text format older scrapers ask for.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const CONTENT_TYPE_CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub surface: String,
    pub tool: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DurationLabels {
    pub surface: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EffectLabels {
    pub effect: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DenialLabels {
    pub effect: String,
    pub label: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    pub effect: String,
    pub scope: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    pub kind: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IndexLabels {
    index: String,
}

/// `working` or `waiting_for_sync`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriterStateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IndexPartLabels {
    index: String,
    part: String,
}

/// What a scrape reads of the store and the daemon as it happens.
pub struct Scrape {
    pub degraded: bool,
    pub store: world_store::StoreStatus,
    /// The store writer's histograms (`WorldStore::stats`).
    pub writer: WriterHistograms,
    pub callbacks_in_use: u64,
    /// Commands running as tasks on this daemon.
    pub tasks_running: u64,
}

/// How a task its client followed ended: `completed`, `cancelled`, `failed`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    engine: String,
}

/// The daemon's metrics, registered once.
pub struct Metrics {
    /// `false`: nothing is counted (`Metrics::off`).
    on: bool,
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<DurationLabels, Histogram>,
    effects: Family<EffectLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    cost: Family<CostLabels, Counter>,
    in_flight: Gauge,
    store_degraded: Gauge,
    store_bytes: Family<KindLabels, Gauge>,
    store_free_bytes: Gauge,
    store_batches: Counter,
    store_requests: Counter,
    store_checkpoints: Counter,
    /// The writer's working and durability-waiting seconds.
    writer_seconds: Family<WriterStateLabels, Counter<f64, AtomicU64>>,
    index_rows: Family<IndexPartLabels, Gauge>,
    index_runs: Family<IndexLabels, Gauge>,
    /// The store's own running totals as last seen, so that the counters move by their growth.
    store_seen: Mutex<StoreSeen>,
    callbacks_in_use: Gauge,
    tasks_running: Gauge,
    tasks: Family<TaskLabels, Counter>,
    runs: Family<RunLabels, Counter>,
    run_seconds: Family<KindLabels, Histogram>,
    /// The writer's histograms as the last scrape read them, which `StoreHistograms` encodes.
    writer: Arc<Mutex<Option<WriterHistograms>>>,
    /// The tool ids and effect names seen so far, up to their caps.
    tools: Mutex<HashSet<String>>,
    effect_names: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    pub fn new(version: &str, engine: &str) -> Metrics {
        let mut registry = Registry::with_prefix("worldd");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register("calls", "Agent calls by surface, tool and how they ended", calls.clone());
        let call_seconds = Family::<DurationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "call_duration_seconds",
            "How long agent calls took, by surface and outcome",
            call_seconds.clone(),
        );
        let effects = Family::<EffectLabels, Counter>::default();
        registry.register("effects", "Brokered effects by name and status", effects.clone());
        let denials = Family::<DenialLabels, Counter>::default();
        registry.register("effect_denials", "Effects the broker denied, by name and denial label", denials.clone());
        let cost = Family::<CostLabels, Counter>::default();
        registry.register("effect_cost", "Budget units debited, by effect and scope", cost.clone());
        let in_flight = Gauge::default();
        registry.register("calls_in_flight", "Agent calls being served now", in_flight.clone());
        let store_degraded = Gauge::default();
        registry.register(
            "store_degraded",
            "1 while the store refuses writes (full disk, failed sync)",
            store_degraded.clone(),
        );
        let store_bytes = Family::<KindLabels, Gauge>::default();
        registry.register(
            "store_bytes",
            "The store's files: database length, its allocated disk, the log, the payload file",
            store_bytes.clone(),
        );
        let store_free_bytes = Gauge::default();
        registry.register(
            "store_free_bytes",
            "Free space beside the store this process may use",
            store_free_bytes.clone(),
        );
        let (store_batches, store_requests, store_checkpoints) =
            (Counter::default(), Counter::default(), Counter::default());
        registry.register("store_batches", "Write batches (group commits) since start", store_batches.clone());
        registry.register("store_requests", "Write requests the batches carried since start", store_requests.clone());
        registry.register("store_checkpoints", "Checkpoints since start", store_checkpoints.clone());
        let writer_seconds = Family::<WriterStateLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "store_writer_seconds",
            "Seconds the store's single writer thread was occupied, by state: working (write batches and their \
             answers, checkpoints, index passes; PostgreSQL: lease renewals, sweeps, retries and reconnects) or \
             waiting_for_sync (a batch applied, its durability point not reached: what remains of the log's write \
             and fdatasync, which began beside the apply; PostgreSQL: each COMMIT round trip). Their rates summing \
             near 1 mean the writer bounds the write rate",
            writer_seconds.clone(),
        );
        let index_rows = Family::<IndexPartLabels, Gauge>::default();
        registry.register(
            "store_index_rows",
            "Rows of the store's tiered indexes: the young table, the complete runs, and the merge in progress's \
             inputs and output so far",
            index_rows.clone(),
        );
        let index_runs = Family::<IndexLabels, Gauge>::default();
        registry.register(
            "store_index_runs",
            "Runs of each tiered index (they pile up when merges fall behind)",
            index_runs.clone(),
        );
        let writer = Arc::new(Mutex::new(None));
        registry.register_collector(Box::new(StoreHistograms(writer.clone())));
        let callbacks_in_use = Gauge::default();
        registry.register("callback_slots_in_use", "MCP host callbacks running now", callbacks_in_use.clone());
        let tasks_running = Gauge::default();
        registry.register("tasks_running", "Commands running as tasks on this daemon now", tasks_running.clone());
        let tasks = Family::<TaskLabels, Counter>::default();
        registry.register("tasks", "Tasks whose calls ended on this daemon, by how they ended", tasks.clone());
        let runs = Family::<RunLabels, Counter>::default();
        registry.register("confined_runs", "Confined runs by kind (pure, exec) and how they ended", runs.clone());
        let run_seconds = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        registry.register("confined_run_duration_seconds", "How long confined runs took, by kind", run_seconds.clone());
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: version.into(), engine: engine.into() }).set(1);
        registry.register("build_info", "The daemon's version and store engine", build);
        Metrics {
            on: true,
            registry,
            calls,
            call_seconds,
            effects,
            denials,
            cost,
            in_flight,
            store_degraded,
            store_bytes,
            store_free_bytes,
            store_batches,
            store_requests,
            store_checkpoints,
            writer_seconds,
            index_rows,
            index_runs,
            store_seen: Mutex::default(),
            callbacks_in_use,
            tasks_running,
            tasks,
            runs,
            run_seconds,
            writer,
            tools: Mutex::default(),
            effect_names: Mutex::default(),
        }
    }

    /// Metrics that count nothing: the callers' paths touch no counter.
    pub fn off(version: &str, engine: &str) -> Metrics {
        Metrics { on: false, ..Metrics::new(version, engine) }
    }

    /// Whether anything is counted (and `/metrics` served).
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// One agent call ended: `outcome` is a bounded class (`committed`, or an error's kind).
    pub fn call(&self, surface: &str, tool: &str, outcome: &str, seconds: f64) {
        if !self.on {
            return;
        }
        let tool = bounded(&self.tools, TOOL_LABELS_MAX, tool);
        let labels = CallLabels { surface: surface.into(), tool, outcome: outcome.into() };
        self.calls.get_or_create(&labels).inc();
        let labels = DurationLabels { surface: surface.into(), outcome: outcome.into() };
        self.call_seconds.get_or_create(&labels).observe(seconds);
    }

    /// An effect the broker decided: ran (`ok`, `failed`, debited `cost`),
    /// `denied` under `label`, or `skipped` (not run after an earlier one of
    /// its plan was denied or failed; `cost` 0).
    pub fn effect(&self, effect: &str, scope: &str, status: &str, cost: u64, denial: Option<&str>) {
        if !self.on {
            return;
        }
        let effect = bounded(&self.effect_names, EFFECT_LABELS_MAX, effect);
        self.effects.get_or_create(&EffectLabels { effect: effect.clone(), status: status.into() }).inc();
        if let Some(label) = denial {
            self.denials.get_or_create(&DenialLabels { effect, label: label.into() }).inc();
        } else if cost > 0 {
            self.cost.get_or_create(&CostLabels { effect, scope: scope.into() }).inc_by(cost);
        }
    }

    /// A task's call ended on this daemon: `completed`, `cancelled` or `failed`.
    pub fn task_ended(&self, status: &'static str) {
        if self.on {
            self.tasks.get_or_create(&TaskLabels { status: status.into() }).inc();
        }
    }

    /// A confined run ended: its kind (`pure`, `exec`) and outcome class.
    pub fn run(&self, kind: &str, outcome: &str, seconds: f64) {
        if !self.on {
            return;
        }
        self.runs.get_or_create(&RunLabels { kind: kind.into(), outcome: outcome.into() }).inc();
        self.run_seconds.get_or_create(&KindLabels { kind: kind.into() }).observe(seconds);
    }

    /// A call started; the guard counts it in flight until dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        if !self.on {
            return InFlight(None);
        }
        self.in_flight.inc();
        InFlight(Some(&self.in_flight))
    }

    /// Reads the store's state and the daemon's slots into the gauges.
    pub fn observe(&self, now: &Scrape) {
        self.store_degraded.set(i64::from(now.degraded));
        self.callbacks_in_use.set(i64::try_from(now.callbacks_in_use).unwrap_or(i64::MAX));
        self.tasks_running.set(i64::try_from(now.tasks_running).unwrap_or(i64::MAX));
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        if let Some(f) = &now.store.footprint {
            let files = &f.files;
            for (kind, bytes) in [
                ("file", files.file_bytes),
                ("allocated", files.allocated_bytes),
                ("wal", files.wal_bytes),
                ("payloads", files.payload_bytes),
                ("payloads_allocated", files.payload_allocated_bytes),
            ] {
                self.store_bytes.get_or_create(&KindLabels { kind: kind.into() }).set(gauge(bytes));
            }
            if let Some(free) = f.free_bytes {
                self.store_free_bytes.set(gauge(free));
            }
        }
        for index in &now.store.indexes {
            let parts = [
                ("young", index.young_rows),
                ("runs", index.run_rows),
                ("merge_input", index.merge_input_rows),
                ("merge_output", index.merge_output_rows),
            ];
            for (part, rows) in parts {
                let labels = IndexPartLabels { index: index.index.into(), part: part.into() };
                self.index_rows.get_or_create(&labels).set(gauge(rows));
            }
            self.index_runs.get_or_create(&IndexLabels { index: index.index.into() }).set(gauge(index.runs));
        }
        let mut guard = self.store_seen.lock().unwrap_or_else(|p| p.into_inner());
        let (seen, s) = (&mut *guard, &now.store);
        self.store_batches.inc_by(grown(&mut seen.batches, s.batches));
        self.store_requests.inc_by(grown(&mut seen.requests, s.requests));
        self.store_checkpoints.inc_by(grown(&mut seen.checkpoints, s.checkpoints));
        for (state, seen, total_ns) in [
            ("working", &mut seen.work_ns, s.writer_work_ns),
            ("waiting_for_sync", &mut seen.sync_wait_ns, s.writer_sync_wait_ns),
        ] {
            let counter = self.writer_seconds.get_or_create(&WriterStateLabels { state: state.into() });
            counter.inc_by(grown(seen, total_ns) as f64 / 1e9);
        }
        // Two scrapes at once may store their readings in either order: keep
        // the later one (every count only grows), so that none goes back.
        let total = |h: &WriterHistograms| {
            h.commit_ns.count() + h.batch_requests.count() + h.log_sync_ns.count() + h.checkpoint_ns.count()
        };
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if writer.as_ref().is_none_or(|w| total(w) <= total(&now.writer)) {
            *writer = Some(now.writer.clone());
        }
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding the metrics");
        }
        out
    }
}

/// The classic text format (0.0.4) of an OpenMetrics text: a counter's
/// family is named with its `_total` suffix, and there is no `# EOF` or
/// `# UNIT` line.
pub fn classic(openmetrics: &str) -> String {
    let counters: HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) { "_total" } else { "" };
                out.push_str(&format!("{prefix}{name}{suffix} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The store's running totals as a scrape last saw them (the writer's
/// times in nanoseconds).
#[derive(Default)]
struct StoreSeen {
    batches: u64,
    requests: u64,
    checkpoints: u64,
    work_ns: u64,
    sync_wait_ns: u64,
}

/// How far a running total grew past what was `seen`, which then holds the
/// larger of the two (a reading older than one seen moves nothing).
fn grown(seen: &mut u64, now: u64) -> u64 {
    let by = now.saturating_sub(*seen);
    *seen = (*seen).max(now);
    by
}

/// A call in flight: counted down when dropped, however the call ends.
pub struct InFlight<'a>(Option<&'a Gauge>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(gauge) = self.0 {
            gauge.dec();
        }
    }
}

/// Encodes the store writer's histograms as the last scrape read them
/// (nothing before the first scrape). Latencies are kept in nanoseconds and
/// exported in seconds, Prometheus's base unit.
#[derive(Debug)]
struct StoreHistograms(Arc<Mutex<Option<WriterHistograms>>>);

impl Collector for StoreHistograms {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(h) = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone() else { return Ok(()) };
        let series = [
            (
                "store_commit_duration_seconds",
                "How long the store took to make each write batch durable and answer it: apply, log append and sync \
                 (PostgreSQL: the transaction).",
                &h.commit_ns,
                1e9,
            ),
            ("store_batch_requests", "Write requests per batch (group commit).", &h.batch_requests, 1.0),
            (
                "store_log_sync_duration_seconds",
                "How long each batch's durability point took: the log's append and fdatasync (PostgreSQL: the \
                 COMMIT round trip).",
                &h.log_sync_ns,
                1e9,
            ),
            (
                "store_checkpoint_duration_seconds",
                "How long each checkpoint of the embedded store took: the database file's durable commit that lets \
                 the write-ahead log be emptied; write batches wait behind it (PostgreSQL: none).",
                &h.checkpoint_ns,
                1e9,
            ),
        ];
        for (name, help, snapshot, per_unit) in series {
            let buckets = buckets(snapshot, per_unit);
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
            metric.encode_histogram::<NoLabelSet>(snapshot.sum as f64 / per_unit, snapshot.count(), &buckets, None)?;
        }
        Ok(())
    }
}

/// `(upper bound, count in that bucket alone)`, the last one unbounded, in
/// exported units (`per_unit` stored units make one).
fn buckets(snapshot: &Snapshot, per_unit: f64) -> Vec<(f64, u64)> {
    let bounds = snapshot.bounds.iter().map(|&b| b as f64 / per_unit).chain(std::iter::once(f64::INFINITY));
    bounds.zip(snapshot.counts.iter().copied()).collect()
}

/// `value` while fewer than `cap` distinct values were seen, else `other`.
fn bounded(seen: &Mutex<HashSet<String>>, cap: usize, value: &str) -> String {
    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    if seen.contains(value) || seen.len() < cap && seen.insert(value.to_string()) {
        value.to_string()
    } else {
        "other".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_move_by_exactly_what_happened_and_labels_stay_bounded() {
        let m = Metrics::new("0.1.0", "embedded");
        m.call("mcp", "tools.echo", "committed", 0.002);
        m.call("mcp", "tools.echo", "committed", 0.004);
        m.effect("Workspace.Read", "worktree", "ok", 1, None);
        m.effect("Workspace.Read", "worktree", "denied", 1, Some("denied:budget"));
        m.effect("Workspace.Write", "worktree", "skipped", 0, None);
        for i in 0..TOOL_LABELS_MAX + 5 {
            m.call("a2a", &format!("t{i}"), "committed", 0.001);
        }
        let text = m.encode();
        assert!(
            text.contains("worldd_calls_total{surface=\"mcp\",tool=\"tools.echo\",outcome=\"committed\"} 2"),
            "{text}"
        );
        assert!(text.contains("worldd_calls_total{surface=\"a2a\",tool=\"other\",outcome=\"committed\"} 6"), "{text}");
        assert!(text.contains("worldd_effect_cost_total{effect=\"Workspace.Read\",scope=\"worktree\"} 1"), "{text}");
        assert!(text.contains("worldd_effect_denials_total{effect=\"Workspace.Read\",label=\"denied:budget\"} 1"));
        assert!(text.contains("worldd_effects_total{effect=\"Workspace.Write\",status=\"skipped\"} 1"), "{text}");
        assert!(!text.contains("effect=\"Workspace.Write\",scope="), "a skipped effect debits nothing: {text}");
        assert!(text.contains("worldd_build_info{version=\"0.1.0\",engine=\"embedded\"} 1"), "{text}");
        assert!(text.ends_with("# EOF\n"));
        let classic = classic(&text);
        assert!(classic.contains("# TYPE worldd_calls_total counter\n") && !classic.contains("# EOF"), "{classic}");
        assert!(classic.contains("# TYPE worldd_calls_in_flight gauge\n"), "{classic}");
        let _guard = m.in_flight();
        assert!(m.encode().contains("worldd_calls_in_flight 1"));
    }

    fn scrape(writer: WriterHistograms) -> Scrape {
        scrape_with(writer, (0, 0))
    }

    /// A scrape whose store writer has worked and waited for durability
    /// `(work_ns, sync_wait_ns)` in all.
    fn scrape_with(writer: WriterHistograms, (work_ns, sync_wait_ns): (u64, u64)) -> Scrape {
        let store = world_store::StoreStatus {
            engine: "embedded",
            footprint: None,
            checkpoints: 0,
            batches: 0,
            requests: 0,
            writer_work_ns: work_ns,
            writer_sync_wait_ns: sync_wait_ns,
            indexes: vec![],
        };
        Scrape { degraded: false, store, writer, callbacks_in_use: 0, tasks_running: 0 }
    }

    #[test]
    fn the_writer_s_working_and_waiting_seconds_grow_with_its_totals_and_never_go_back() {
        let m = Metrics::new("0.1.0", "embedded");
        let h = world_store::WriterStats::default().histograms();
        let seconds = |m: &Metrics, state: &str| -> f64 {
            let series = format!("worldd_store_writer_seconds_total{{state=\"{state}\"}}");
            m.encode().lines().find_map(|l| l.strip_prefix(series.as_str())?.strip_prefix(' ')?.parse().ok()).unwrap()
        };
        m.observe(&scrape_with(h.clone(), (1_500_000_000, 250_000_000)));
        assert_eq!((seconds(&m, "working"), seconds(&m, "waiting_for_sync")), (1.5, 0.25));
        // A reading older than one already seen (two scrapes at once) moves nothing.
        m.observe(&scrape_with(h.clone(), (1_000_000_000, 100_000_000)));
        assert_eq!((seconds(&m, "working"), seconds(&m, "waiting_for_sync")), (1.5, 0.25));
        m.observe(&scrape_with(h, (2_000_000_000, 750_000_000)));
        assert_eq!((seconds(&m, "working"), seconds(&m, "waiting_for_sync")), (2.0, 0.75));
        assert!(m.encode().contains("# TYPE worldd_store_writer_seconds counter"), "{}", m.encode());
    }

    #[test]
    fn the_store_histograms_are_exported_as_scraped_in_base_units() {
        let m = Metrics::new("0.1.0", "embedded");
        assert!(!m.encode().contains("worldd_store_commit"), "nothing to say before the first scrape");
        let stats = world_store::WriterStats::default();
        stats.commit_seconds.observe(50_000); // 50 µs: the first bound itself
        stats.commit_seconds.observe(3_000_000);
        stats.batch_requests.observe(1);
        stats.batch_requests.observe(3);
        stats.log_sync_seconds.observe(20_000_000_000); // past every bound
        stats.checkpoint_seconds.observe(250_000_000);
        m.observe(&scrape(stats.histograms()));
        let text = m.encode();
        for line in [
            "# TYPE worldd_store_commit_duration_seconds histogram",
            "worldd_store_commit_duration_seconds_sum 0.00305",
            "worldd_store_commit_duration_seconds_count 2",
            "worldd_store_commit_duration_seconds_bucket{le=\"0.00005\"} 1",
            "worldd_store_commit_duration_seconds_bucket{le=\"0.002\"} 1",
            "worldd_store_commit_duration_seconds_bucket{le=\"0.005\"} 2",
            "worldd_store_commit_duration_seconds_bucket{le=\"+Inf\"} 2",
            "# TYPE worldd_store_batch_requests histogram",
            "worldd_store_batch_requests_sum 4.0",
            "worldd_store_batch_requests_bucket{le=\"1.0\"} 1",
            "worldd_store_batch_requests_bucket{le=\"2.0\"} 1",
            "worldd_store_batch_requests_bucket{le=\"4.0\"} 2",
            "worldd_store_log_sync_duration_seconds_sum 20.0",
            "worldd_store_log_sync_duration_seconds_bucket{le=\"10.0\"} 0",
            "worldd_store_log_sync_duration_seconds_bucket{le=\"+Inf\"} 1",
            "# TYPE worldd_store_checkpoint_duration_seconds histogram",
            "worldd_store_checkpoint_duration_seconds_sum 0.25",
            "worldd_store_checkpoint_duration_seconds_count 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
        // The classic format names histograms as they are.
        assert!(classic(&text).contains("# TYPE worldd_store_commit_duration_seconds histogram\n"));

        // The text says what the last scrape read, never an older reading
        // that a concurrent scrape stored after it.
        let count = |m: &Metrics| sample_of(&m.encode(), "worldd_store_commit_duration_seconds_count");
        stats.commit_seconds.observe(1);
        assert_eq!(count(&m), 2, "read at the scrape, not since");
        let earlier = stats.histograms();
        stats.commit_seconds.observe(1);
        m.observe(&scrape(stats.histograms()));
        m.observe(&scrape(earlier));
        assert_eq!(count(&m), 4);
    }

    fn sample_of(text: &str, series: &str) -> u64 {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap()
    }

    #[test]
    fn metrics_off_count_nothing() {
        let m = Metrics::off("0.1.0", "embedded");
        assert!(!m.is_on());
        m.call("mcp", "tools.echo", "committed", 0.002);
        m.effect("Workspace.Read", "worktree", "ok", 1, None);
        m.effect("Workspace.Read", "worktree", "skipped", 0, None);
        m.run("exec", "exited_zero", 0.1);
        let _guard = m.in_flight();
        let text = m.encode();
        for name in
            ["worldd_calls_total", "worldd_effects_total", "worldd_effect_cost_total", "worldd_confined_runs_total"]
        {
            assert!(!text.lines().any(|l| l.starts_with(name)), "{name} counted:\n{text}");
        }
        assert!(text.contains("worldd_calls_in_flight 0"), "{text}");
        assert!(Metrics::new("0.1.0", "embedded").is_on());
    }
}
