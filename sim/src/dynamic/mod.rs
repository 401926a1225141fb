//! `caldera sim --dynamic`: a dynamic replay of the Alibaba GPU trace through
//! the real scheduling core ([`caldera_scheduling::queue::core::Core`]: queue order,
//! quotas and borrowing, EASY backfill, placement, preemption), with a virtual
//! clock. Pods arrive at `creation_time` and run for `deletion - creation`
//! seconds once started; a share of them is inference (high priority), the
//! rest training (medium or low), spread over four tenants with guarantees of
//! 40/30/20/10% of the pool's GPUs.
//!
//! Two scenarios over the same sampled cluster and the same tasks:
//! - `static-split`: a training pool and an inference pool, two cores, nodes
//!   split in proportion to each class's GPU-hours; nothing crosses pools.
//! - `shared`: one pool, one core, priorities, borrowing and preemption.
pub mod engine;
pub mod report;
pub mod trace;
pub mod workload;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Instant;

use caldera_scheduling::placement::PolicyName;
use caldera_scheduling::queue::core::CoreConfig;

pub use report::{DynamicReport, ScenarioReport};

/// A replay could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DynamicError(pub String);

/// Everything that shapes one replay.
#[derive(Debug, Clone)]
pub struct DynamicConfig {
    pub nodes: PathBuf,
    pub tasks: PathBuf,
    pub policy: PolicyName,
    pub seed: u64,
    /// GPUs of the sampled cluster (0 = every node of the list).
    pub gpus: u32,
    /// Share of all tasks marked inference, drawn among sharing pods of at most
    /// half a GPU (capped by how many there are).
    pub inference_share: f64,
    /// Borrowing limit of each tenant, as a share of its pool's GPUs.
    pub borrow: f64,
    /// Training checkpoints every this many seconds of run time.
    pub checkpoint_every_s: u64,
    /// Stop grace of a preemption victim, seconds of trace time.
    pub stop_grace_s: u64,
    /// Replay only pods alive in `[from_s, until_s)` (seconds of trace time).
    pub from_s: u64,
    pub until_s: Option<u64>,
    /// Give up this long after the window's end if work is still left, seconds.
    pub drain_limit_s: u64,
}

impl Default for DynamicConfig {
    fn default() -> Self {
        DynamicConfig {
            nodes: PathBuf::from("../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"),
            tasks: PathBuf::from("../shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv"),
            policy: PolicyName::Caldera,
            seed: 42,
            gpus: 64,
            inference_share: 0.3,
            borrow: 0.5,
            checkpoint_every_s: 600,
            stop_grace_s: 30,
            from_s: 0,
            until_s: None,
            drain_limit_s: 30 * 86_400,
        }
    }
}

/// Loads the trace and replays both scenarios.
pub fn run(cfg: &DynamicConfig) -> Result<DynamicReport, DynamicError> {
    let pods = trace::load_pods(&cfg.tasks)?;
    let nodes = trace::load_nodes(&cfg.nodes)?;
    run_with(cfg, &pods, &nodes)
}

/// Replays both scenarios over already loaded pods and nodes.
pub fn run_with(
    cfg: &DynamicConfig,
    pods: &[trace::Pod],
    nodes: &[trace::TraceNode],
) -> Result<DynamicReport, DynamicError> {
    let (tasks, mix) = workload::build_tasks(pods, cfg);
    if tasks.is_empty() {
        return Err(DynamicError(
            "no pod of the trace falls in the window".into(),
        ));
    }
    let cluster = workload::sample_nodes(nodes, cfg.gpus, cfg.seed);
    let gpus: u32 = cluster.iter().map(|n| n.gpus).sum();
    if gpus == 0 {
        return Err(DynamicError("the sampled cluster has no GPU".into()));
    }
    let w0 = tasks.iter().map(|t| t.arrival_ms).min().unwrap_or(0);
    let w1 = tasks
        .iter()
        .map(|t| t.arrival_ms + t.work_ms)
        .max()
        .unwrap_or(w0);
    let loop_cfg = engine::LoopConfig {
        policy: cfg.policy,
        seed: cfg.seed,
        core: CoreConfig {
            stop_grace_ms: cfg.stop_grace_s * 1000,
            ..CoreConfig::default()
        },
        checkpoint_every_ms: cfg.checkpoint_every_s.max(1) * 1000,
        window: (w0, w1),
        stop_at_ms: w1 + cfg.drain_limit_s * 1000,
    };
    let pool = |name: &str, ns: &[trace::TraceNode], class: Option<workload::Class>| {
        let pool_gpus: u32 = ns.iter().map(|n| n.gpus).sum();
        engine::PoolInput {
            name: name.to_string(),
            nodes: ns
                .iter()
                .map(|n| (n.name.clone(), workload::inventory(n)))
                .collect(),
            tasks: tasks
                .iter()
                .filter(|t| class.is_none_or(|c| t.class == c))
                .collect(),
            limits: workload::limits(pool_gpus as f64, cfg.borrow),
        }
    };
    let mut scenarios = Vec::new();
    // (a) static split.
    let started = Instant::now();
    let (train_nodes, inf_nodes) = workload::split_nodes(&cluster, &tasks);
    let outcomes = vec![
        engine::simulate(
            &pool("training", &train_nodes, Some(workload::Class::Training)),
            &loop_cfg,
        ),
        engine::simulate(
            &pool("inference", &inf_nodes, Some(workload::Class::Inference)),
            &loop_cfg,
        ),
    ];
    scenarios.push(report::summarize(
        "static-split",
        &tasks,
        &outcomes,
        &loop_cfg,
        started.elapsed(),
    ));
    // (b) one shared pool.
    let started = Instant::now();
    let outcomes = vec![engine::simulate(&pool("shared", &cluster, None), &loop_cfg)];
    scenarios.push(report::summarize(
        "shared",
        &tasks,
        &outcomes,
        &loop_cfg,
        started.elapsed(),
    ));
    Ok(DynamicReport {
        trace: cfg.tasks.display().to_string(),
        policy: cfg.policy.to_string(),
        seed: cfg.seed,
        nodes: cluster.len(),
        gpus,
        window_s: (w0 / 1000, w1 / 1000),
        checkpoint_every_s: cfg.checkpoint_every_s,
        stop_grace_s: cfg.stop_grace_s,
        borrow: cfg.borrow,
        mix,
        scenarios,
    })
}
