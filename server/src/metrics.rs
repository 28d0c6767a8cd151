//! What `GET /metrics` serves: the daemon's counters, gauges and histograms
//! in the OpenMetrics text format, for Prometheus and its kin. Every label is
//! bounded (surface, outcome class, tool id capped by `TOOL_LABELS_MAX`,
//! effect name, status, denial label): never an episode, task, invocation or
//! credential, which belong to the store's own answers.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::sync::Mutex;

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

/// What a scrape reads of the store and the daemon as it happens.
pub struct Scrape {
    pub degraded: bool,
    pub store: world_store::StoreStatus,
    pub callbacks_in_use: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    engine: String,
}

/// The daemon's metrics, registered once.
pub struct Metrics {
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
    /// The store's own running totals as last seen, so that the counters move by their growth.
    store_seen: Mutex<(u64, u64, u64)>,
    callbacks_in_use: Gauge,
    runs: Family<RunLabels, Counter>,
    run_seconds: Family<KindLabels, Histogram>,
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
            "The store's files: database length, its allocated disk, the log",
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
        let callbacks_in_use = Gauge::default();
        registry.register("callback_slots_in_use", "MCP host callbacks running now", callbacks_in_use.clone());
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
            store_seen: Mutex::default(),
            callbacks_in_use,
            runs,
            run_seconds,
            tools: Mutex::default(),
            effect_names: Mutex::default(),
        }
    }

    /// One agent call ended: `outcome` is a bounded class (`committed`, or an error's kind).
    pub fn call(&self, surface: &str, tool: &str, outcome: &str, seconds: f64) {
        let tool = bounded(&self.tools, TOOL_LABELS_MAX, tool);
        let labels = CallLabels { surface: surface.into(), tool, outcome: outcome.into() };
        self.calls.get_or_create(&labels).inc();
        let labels = DurationLabels { surface: surface.into(), outcome: outcome.into() };
        self.call_seconds.get_or_create(&labels).observe(seconds);
    }

    /// An effect the broker decided: ran (`ok`, `failed`, debited `cost`) or
    /// `denied` under `label`.
    pub fn effect(&self, effect: &str, scope: &str, status: &str, cost: u64, denial: Option<&str>) {
        let effect = bounded(&self.effect_names, EFFECT_LABELS_MAX, effect);
        self.effects.get_or_create(&EffectLabels { effect: effect.clone(), status: status.into() }).inc();
        if let Some(label) = denial {
            self.denials.get_or_create(&DenialLabels { effect, label: label.into() }).inc();
        } else if cost > 0 {
            self.cost.get_or_create(&CostLabels { effect, scope: scope.into() }).inc_by(cost);
        }
    }

    /// A confined run ended: its kind (`pure`, `exec`) and outcome class.
    pub fn run(&self, kind: &str, outcome: &str, seconds: f64) {
        self.runs.get_or_create(&RunLabels { kind: kind.into(), outcome: outcome.into() }).inc();
        self.run_seconds.get_or_create(&KindLabels { kind: kind.into() }).observe(seconds);
    }

    /// A call started; the guard counts it in flight until dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// Reads the store's state and the daemon's slots into the gauges.
    pub fn observe(&self, now: &Scrape) {
        self.store_degraded.set(i64::from(now.degraded));
        self.callbacks_in_use.set(i64::try_from(now.callbacks_in_use).unwrap_or(i64::MAX));
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        if let Some(f) = &now.store.footprint {
            for (kind, bytes) in
                [("file", f.files.file_bytes), ("allocated", f.files.allocated_bytes), ("wal", f.files.wal_bytes)]
            {
                self.store_bytes.get_or_create(&KindLabels { kind: kind.into() }).set(gauge(bytes));
            }
            if let Some(free) = f.free_bytes {
                self.store_free_bytes.set(gauge(free));
            }
        }
        let mut seen = self.store_seen.lock().unwrap_or_else(|p| p.into_inner());
        let (b, r, c) = (now.store.batches, now.store.requests, now.store.checkpoints);
        self.store_batches.inc_by(b.saturating_sub(seen.0));
        self.store_requests.inc_by(r.saturating_sub(seen.1));
        self.store_checkpoints.inc_by(c.saturating_sub(seen.2));
        *seen = (seen.0.max(b), seen.1.max(r), seen.2.max(c));
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

/// A call in flight: counted down when dropped, however the call ends.
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
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
        assert!(text.contains("worldd_build_info{version=\"0.1.0\",engine=\"embedded\"} 1"), "{text}");
        assert!(text.ends_with("# EOF\n"));
        let classic = classic(&text);
        assert!(classic.contains("# TYPE worldd_calls_total counter\n") && !classic.contains("# EOF"), "{classic}");
        assert!(classic.contains("# TYPE worldd_calls_in_flight gauge\n"), "{classic}");
        let _guard = m.in_flight();
        assert!(m.encode().contains("worldd_calls_in_flight 1"));
    }
}
