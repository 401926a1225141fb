//! `/metrics`: the OpenMetrics text exposition, encoded by prometheus-client.
//! Two registries make one answer:
//! - the event measures, registered once at start ([`Exposition::new`]): the
//!   control plane's histograms and counters (`caldera_actors::metrics`) and
//!   the HTTP ones ([`http`]);
//! - the state of the pool, built afresh from one [`Scrape`] on each scrape
//!   ([`state`], [`nodes`], [`tenants`]), so a node or tenant that is gone
//!   leaves no stale series behind.
//!
//! Every family and its labels are listed in `docs/reference/metrics.md`,
//! generated from [`example`]'s exposition; `docs/grafana/caldera.json` is a
//! dashboard over them.
pub mod example;
pub mod http;
mod nodes;
mod state;
mod tenants;

use caldera_actors::control_plane::estimates::EstimateAccuracy;
use caldera_actors::control_plane::scrape::Scrape;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

/// The Content-Type of the answer (OpenMetrics 1.0; Prometheus accepts it).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A family of float gauges.
pub(crate) type Gauges<L> = Family<L, Gauge<f64, AtomicU64>>;

/// What `/metrics` serves: the registry of event measures, and the HTTP
/// handles the middleware records into.
#[derive(Debug)]
pub struct Exposition {
    events: Registry,
    pub http: http::HttpMetrics,
}

impl Exposition {
    /// Registers the control plane's event measures and the HTTP ones.
    pub fn new(control_plane: &caldera_actors::metrics::Metrics) -> Exposition {
        let http = http::HttpMetrics::default();
        let mut events = Registry::default();
        control_plane.register(&mut events);
        http.register(&mut events);
        Exposition { events, http }
    }

    /// The whole exposition: the event measures, then the state `s` (with
    /// the start-estimate accuracy `a`), then `# EOF`.
    pub fn render(&self, s: &Scrape, a: &EstimateAccuracy) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(64 * 1024);
        encode_registry(&mut out, &self.events)?;
        encode_registry(&mut out, &state_registry(s, a))?;
        encode_eof(&mut out)?;
        Ok(out)
    }
}

/// Every family of the pool's state, filled from `s`.
fn state_registry(s: &Scrape, a: &EstimateAccuracy) -> Registry {
    let mut r = Registry::default();
    state::counts(&mut r, s);
    state::estimates(&mut r, a);
    state::pool(&mut r, &s.pool);
    state::queue(&mut r, &s.pool);
    nodes::nodes(&mut r, &s.nodes);
    nodes::caches(&mut r, &s.caches);
    tenants::tenants(&mut r, s);
    r
}

/// Registers a new gauge family `name` (with `unit` appended, if any).
pub(crate) fn gauges<L>(r: &mut Registry, name: &str, help: &str, unit: Option<Unit>) -> Gauges<L>
where
    L: prometheus_client::encoding::EncodeLabelSet
        + Clone
        + std::hash::Hash
        + Eq
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let f = Gauges::<L>::default();
    match unit {
        Some(u) => r.register_with_unit(name, help, u, f.clone()),
        None => r.register(name, help, f.clone()),
    }
    f
}

/// Bytes in `mib` MiB (the control plane counts memory in MiB).
pub(crate) fn mib_bytes(mib: f64) -> f64 {
    mib * 1024.0 * 1024.0
}

/// Bytes in `gib` GiB (quotas are in GiB: `memory_gb` is MiB / 1024).
pub(crate) fn gib_bytes(gib: f64) -> f64 {
    gib * 1024.0 * 1024.0 * 1024.0
}

/// The five dimensions of the resource model as `(resource label, value)`,
/// from a [`caldera_actors::views::Dims`] and which figure of each to take.
pub(crate) fn by_resource(
    d: &caldera_actors::views::Dims,
    pick: fn(&caldera_actors::views::Dim) -> f64,
) -> [(&'static str, f64); 5] {
    [
        ("gpus", pick(&d.gpus)),
        ("gpu_memory_bytes", mib_bytes(pick(&d.gpu_memory_mb))),
        ("cpu", pick(&d.cpu_cores)),
        ("memory_bytes", mib_bytes(pick(&d.memory_mb))),
        ("disk_bytes", mib_bytes(pick(&d.disk_mb))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_actors::control_plane::PoolStats;

    /// What a control plane with no node, tenant or task renders.
    fn empty() -> Scrape {
        Scrape {
            stats: PoolStats {
                queued: 0,
                allocations: 0,
                healthy_nodes: 0,
                live_tasks: 0,
            },
            pool: Default::default(),
            nodes: Vec::new(),
            tenants: Vec::new(),
            caches: Default::default(),
            refusals: vec![("n1".into(), "stale_epoch", 2)],
            rebuilds: vec![("scheduler", 1)],
        }
    }

    #[test]
    fn an_empty_control_plane_renders_a_valid_exposition() {
        let x = Exposition::new(&caldera_actors::metrics::Metrics::default());
        let text = x.render(&empty(), &EstimateAccuracy::default()).unwrap();
        let e = caldera_chaos_tests::exposition::parse(&text)
            .unwrap_or_else(|err| panic!("{err}\n{text}"));
        assert!(text.ends_with("# EOF\n"));
        // The families that exist before anything happened, at zero.
        assert_eq!(
            e.value("caldera_queue_depth", &[("priority", "high")]),
            Some(0.0)
        );
        assert_eq!(e.value("caldera_preemptions_total", &[]), Some(0.0));
        assert_eq!(
            e.value("caldera_pool_capacity", &[("resource", "gpus")]),
            Some(0.0)
        );
        assert_eq!(
            e.value(
                "caldera_node_reports_refused_total",
                &[("node", "n1"), ("reason", "stale_epoch")]
            ),
            Some(2.0)
        );
        assert_eq!(
            e.value("caldera_actor_rebuilds_total", &[("kind", "scheduler")]),
            Some(1.0)
        );
        assert_eq!(
            e.families["caldera_storage_flush_seconds"].kind,
            "histogram"
        );
    }
}
