//! The exposition of a small example pool in which every family has at
//! least one series: one connected node with one GPU, a weight cache and a
//! process runtime, one tenant with a guarantee and a borrowing limit, one
//! refused report, one actor rebuild, one commit and one HTTP request. A
//! family's label names show only on its series, so the generated reference
//! of metric families reads them here; the test below fails when a family is
//! added that this pool leaves without a series.
use super::Exposition;
use actix_web::http::{Method, StatusCode};
use caldera_actors::commit_site::CommitSite;
use caldera_actors::control_plane::estimates::EstimateAccuracy;
use caldera_actors::control_plane::scrape::Scrape;
use caldera_actors::control_plane::PoolStats;
use caldera_actors::model::fleet::NodeCache;
use caldera_actors::views::{GpuView, NodeView};
use caldera_spec::container::{RuntimeInfo, RuntimeKind};
use caldera_spec::tenant::TenantRecord;
use caldera_spec::Quota;
use std::time::Duration;

/// The whole exposition of the example pool, as `/metrics` would answer it.
pub fn exposition() -> Result<String, std::fmt::Error> {
    let events = caldera_actors::metrics::Metrics::default();
    events.commit_took(CommitSite::TaskSubmit, Duration::from_millis(1));
    events.node_known("node-1");
    let x = Exposition::new(&events);
    x.http
        .record("/v1/tasks", &Method::GET, StatusCode::OK, 0.001);
    x.render(&pool(), &EstimateAccuracy::default())
}

fn pool() -> Scrape {
    let guarantee = Quota {
        gpus: Some(1.0),
        ..Quota::default()
    };
    Scrape {
        stats: PoolStats {
            queued: 0,
            allocations: 0,
            healthy_nodes: 1,
            live_tasks: 0,
        },
        pool: Default::default(),
        nodes: vec![node()],
        tenants: vec![TenantRecord {
            name: "tenant-a".into(),
            token_sha256: String::new(),
            quota: guarantee.clone(),
            borrowing_limit: guarantee,
            created_ms: 0,
        }],
        caches: [("node-1".to_string(), NodeCache::default())].into(),
        refusals: vec![("node-1".into(), "stale_epoch", 1)],
        rebuilds: vec![("scheduler", 1)],
    }
}

fn node() -> NodeView {
    NodeView {
        name: "node-1".into(),
        state: "healthy".into(),
        cordon: None,
        connected: true,
        epoch: 1,
        simulated: true,
        gpu_source: "simulated".into(),
        isolation: "none".into(),
        runtime: "process".into(),
        runtimes: vec![RuntimeInfo {
            kind: RuntimeKind::Process,
            engine: "caldera-shim".into(),
            version: String::new(),
            up: true,
            detail: String::new(),
        }],
        gpus: vec![GpuView {
            index: 0,
            uuid: "GPU-0".into(),
            model: "Simulated".into(),
            memory_total_mb: 1024,
            memory_free_mb: 1024,
            memory_used_mb: 0,
            utilization_pct: 0,
            simulated: true,
            faulted: false,
        }],
        cpu_cores: 1,
        cpu_free_milli: 1000,
        cpu_used_pct: 0.0,
        memory_total_mb: 1024,
        memory_free_mb: 1024,
        memory_used_mb: 0,
        disk_offered_mb: 0,
        disk_free_mb: 0,
        labels: Default::default(),
        last_seen: String::new(),
        allocations: 0,
        cache: None,
        images: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `# TYPE` line is followed by at least one sample of its family.
    #[test]
    fn every_family_has_a_series_in_the_example_pool() {
        let text = exposition().unwrap_or_else(|e| panic!("renders: {e}"));
        let mut family: Option<&str> = None;
        let mut without: Vec<&str> = Vec::new();
        let mut seen = false;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                if let (Some(f), false) = (family, seen) {
                    without.push(f);
                }
                family = rest.split_whitespace().next();
                seen = false;
            } else if !line.starts_with('#') && !line.is_empty() {
                seen = true;
            }
        }
        if let (Some(f), false) = (family, seen) {
            without.push(f);
        }
        assert!(text.matches("# TYPE ").count() > 30, "{text}");
        assert!(
            without.is_empty(),
            "families without a series in the example pool (give them one in example.rs): {without:?}"
        );
    }
}
