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
/// The content type of the answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

    /// A call started; the guard counts it in flight until dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    pub fn store_degraded(&self, degraded: bool) {
        self.store_degraded.set(i64::from(degraded));
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
        let _guard = m.in_flight();
        assert!(m.encode().contains("worldd_calls_in_flight 1"));
    }
}
