//! From trace rows to what the scheduling core sees: task specs (class,
//! priority, tenant, declared duration), node inventories, tenant quotas, the
//! sampled cluster and its static split into a training and an inference pool.
use std::collections::BTreeMap;

use caldera_spec::{
    CpuRequest, GpuInfo, GpuRequest, NodeInventory, Priority, Quota, ResourceRequest, SizeRequest,
    TaskSpec, TaskType,
};

use super::trace::{Pod, TraceNode};
use super::DynamicConfig;
use caldera_scheduling::placement::rng::SplitMix64;
use caldera_scheduling::queue::core::TenantLimits;

/// GPU memory given to every simulated GPU, MiB: a `gpu_milli` share maps to
/// `ceil(16384 * milli / 1000)` MiB of one GPU.
pub const GPU_MB: u64 = 16 * 1024;

/// The four tenants and the share of each pool's GPUs they are guaranteed.
pub const TENANTS: [(&str, f64); 4] = [
    ("tenant-a", 0.4),
    ("tenant-b", 0.3),
    ("tenant-c", 0.2),
    ("tenant-d", 0.1),
];

/// Training or inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Inference,
    Training,
}

/// One task of the replay.
#[derive(Debug, Clone)]
pub struct SimTask {
    /// Trace pod name (= task id).
    pub id: String,
    pub tenant: String,
    pub class: Class,
    pub priority: Priority,
    /// Arrival, ms of trace time.
    pub arrival_ms: u64,
    /// Work to do, ms (deletion - creation, at least 1 s).
    pub work_ms: u64,
    /// GPUs requested (a share as its fraction).
    pub gpus: f64,
    /// The spec handed to the core.
    pub spec: TaskSpec,
}

/// `HH:MM:SS` for a declared duration (at least one second).
pub fn hms(secs: u64) -> String {
    let s = secs.max(1);
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

fn spec_of(pod: &Pod, class: Class, priority: Priority, work_s: u64) -> TaskSpec {
    let gpu = if pod.gpus() == 0.0 {
        None
    } else {
        let model = (!pod.gpu_spec.is_empty()).then(|| pod.gpu_spec.clone());
        Some(if pod.is_sharing() {
            GpuRequest {
                count: 1,
                memory_gb: None,
                share: Some(pod.gpu_milli as f64 / 1000.0),
                model,
            }
        } else {
            GpuRequest {
                count: pod.num_gpu,
                memory_gb: None,
                share: None,
                model,
            }
        })
    };
    TaskSpec {
        task_id: pod.name.clone(),
        // Inference pods become what a service enqueues for each replica: an
        // ordinary task of type inference without `replicas` (the core treats
        // it like any other task; its priority is what makes it preempt).
        task_type: match class {
            Class::Inference => TaskType::Inference,
            Class::Training => TaskType::Training,
        },
        priority,
        resources: ResourceRequest {
            gpu,
            cpu: Some(CpuRequest {
                cores: pod.cpu_milli as f64 / 1000.0,
            }),
            memory: Some(SizeRequest {
                size_gb: pod.memory_mib as f64 / 1024.0,
            }),
            disk: None,
            exclusive: false,
        },
        duration: Some(hms(work_s)),
        image: None,
        runtime: None,
        pull_policy: None,
        prepare_timeout: None,
        volumes: Vec::new(),
        command: Vec::new(),
        env: BTreeMap::new(),
        labels: BTreeMap::new(),
        checkpoint_dir: None,
        model: None,
        replicas: None,
        max_retries: None,
        // No utilisation samples in the trace: the idle inspector is not
        // modelled, every task is exempt from it.
        idle_exempt: true,
        min_replicas: None,
        on_node_loss: None,
        readiness: None,
        max_replicas_per_node: None,
    }
}

/// What the class assignment achieved.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Mix {
    pub tasks: usize,
    pub inference_tasks: usize,
    /// Sharing pods of at most half a GPU (the only ones that may be inference).
    pub inference_eligible: usize,
    /// GPU-hours of work per class.
    pub inference_gpu_hours: f64,
    pub training_gpu_hours: f64,
}

/// Builds the replay's tasks from the pods in `[from_s, until_s)`: a pod alive
/// at `from_s` arrives at `from_s`; work past `until_s` is cut. Seeded: which
/// pods are inference, training priorities, tenants.
pub fn build_tasks(pods: &[Pod], cfg: &DynamicConfig) -> (Vec<SimTask>, Mix) {
    let until = cfg.until_s.unwrap_or(u64::MAX);
    let kept: Vec<(&Pod, u64, u64)> = pods
        .iter()
        .filter(|p| p.deletion_s > cfg.from_s && p.creation_s < until)
        .map(|p| {
            let start = p.creation_s.max(cfg.from_s);
            let end = p.deletion_s.min(until);
            (p, start, (end - start).max(1))
        })
        .collect();
    let mut rng = SplitMix64::new(cfg.seed);
    // Inference: a seeded draw of `inference_share` of all tasks among the
    // eligible ones (the replica cap: at most half of one GPU).
    let eligible: Vec<usize> = kept
        .iter()
        .enumerate()
        .filter(|(_, (p, _, _))| p.is_sharing() && p.gpu_milli <= 500)
        .map(|(i, _)| i)
        .collect();
    let want = ((kept.len() as f64) * cfg.inference_share).round() as usize;
    let mut order = eligible.clone();
    shuffle(&mut order, &mut rng);
    let mut inference = vec![false; kept.len()];
    for &i in order.iter().take(want.min(order.len())) {
        inference[i] = true;
    }
    let mut mix = Mix {
        tasks: kept.len(),
        inference_eligible: eligible.len(),
        ..Mix::default()
    };
    let tasks = kept
        .iter()
        .zip(inference)
        .map(|(&(pod, start, work_s), inf)| {
            let class = if inf {
                Class::Inference
            } else {
                Class::Training
            };
            let priority = match class {
                Class::Inference => Priority::HIGH,
                Class::Training if rng.below(2) == 0 => Priority::MEDIUM,
                Class::Training => Priority::LOW,
            };
            let tenant = TENANTS[rng.below(TENANTS.len() as u64) as usize].0;
            let gpu_hours = pod.gpus() * work_s as f64 / 3600.0;
            match class {
                Class::Inference => {
                    mix.inference_tasks += 1;
                    mix.inference_gpu_hours += gpu_hours;
                }
                Class::Training => mix.training_gpu_hours += gpu_hours,
            }
            SimTask {
                id: pod.name.clone(),
                tenant: tenant.to_string(),
                class,
                priority,
                arrival_ms: start * 1000,
                work_ms: work_s * 1000,
                gpus: pod.gpus(),
                spec: spec_of(pod, class, priority, work_s),
            }
        })
        .collect();
    (tasks, mix)
}

fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// A node's inventory as an agent would report it: every GPU `GPU_MB`, simulated.
pub fn inventory(n: &TraceNode) -> NodeInventory {
    NodeInventory {
        runtimes: Vec::new(),
        hostname: n.name.clone(),
        gpus: (0..n.gpus)
            .map(|i| GpuInfo {
                index: i,
                uuid: format!("{}-gpu{i}", n.name),
                model: n.model.clone(),
                memory_total_mb: GPU_MB,
                memory_used_mb: 0,
                utilization_pct: 0,
                simulated: true,
            })
            .collect(),
        cpu_cores: (n.cpu_milli / 1000) as u32,
        memory_total_mb: n.memory_mib,
        disks: Vec::new(),
        disk_offered_mb: 0,
        labels: BTreeMap::new(),
        simulated_host: true,
        isolation: "none (simulated)".into(),
        gpu_source: "simulated".into(),
    }
}

/// A seeded sample of the node list holding at most `gpus` GPUs (0 = all):
/// nodes in shuffled order, each taken while it still fits the target.
pub fn sample_nodes(nodes: &[TraceNode], gpus: u32, seed: u64) -> Vec<TraceNode> {
    if gpus == 0 {
        return nodes.to_vec();
    }
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    shuffle(&mut order, &mut SplitMix64::new(seed ^ 0x6e6f_6465));
    let mut total = 0;
    let mut out = Vec::new();
    for i in order {
        let n = &nodes[i];
        if n.gpus > 0 && total + n.gpus <= gpus {
            total += n.gpus;
            out.push(n.clone());
        }
        if total == gpus {
            break;
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The static split. The inference pool's GPU target is the inference class's
/// share of the replay's GPU-hours times the cluster's GPUs (at least one
/// node). It takes nodes in order of most CPU cores per GPU, then most memory
/// per GPU (inference pods ask 4-12 cores and 6-47 GiB for half a GPU, so
/// CPU-poor nodes would starve them: this order favours the static split),
/// each while it still fits the target; the training pool gets the rest
/// (and so the 8-GPU nodes its multi-GPU tasks need). Returns
/// `(training, inference)`.
pub fn split_nodes(nodes: &[TraceNode], tasks: &[SimTask]) -> (Vec<TraceNode>, Vec<TraceNode>) {
    let gpu_hours = |c: Class| -> f64 {
        tasks
            .iter()
            .filter(|t| t.class == c)
            .map(|t| t.gpus * t.work_ms as f64)
            .sum()
    };
    let (inf, train) = (gpu_hours(Class::Inference), gpu_hours(Class::Training));
    let share = if inf + train > 0.0 {
        inf / (inf + train)
    } else {
        0.0
    };
    let total: u32 = nodes.iter().map(|n| n.gpus).sum();
    let target = ((total as f64) * share).round().max(1.0) as u32;
    let per_gpu = |x: u64, n: &TraceNode| x as f64 / n.gpus.max(1) as f64;
    let mut order: Vec<&TraceNode> = nodes.iter().collect();
    order.sort_by(|a, b| {
        per_gpu(b.cpu_milli, b)
            .total_cmp(&per_gpu(a.cpu_milli, a))
            .then(per_gpu(b.memory_mib, b).total_cmp(&per_gpu(a.memory_mib, a)))
            .then(a.name.cmp(&b.name))
    });
    let (mut training, mut inference) = (Vec::new(), Vec::new());
    let mut got = 0;
    for n in order {
        let room = nodes.len() - inference.len() > 1;
        if room && (inference.is_empty() || got + n.gpus <= target) {
            got += n.gpus;
            inference.push(n.clone());
        } else {
            training.push(n.clone());
        }
    }
    (training, inference)
}

/// Whether `t` fits on `n` when the node is empty.
pub fn fits_empty(t: &SimTask, n: &NodeInventory) -> bool {
    let r = &t.spec.resources;
    let gpu_ok = match &r.gpu {
        None => true,
        Some(g) => {
            let usable = n
                .gpus
                .iter()
                .filter(|x| {
                    g.model
                        .as_deref()
                        .is_none_or(|m| caldera_spec::gpu_model::matches(m, &x.model))
                })
                .count() as u32;
            usable >= g.count.max(1)
        }
    };
    gpu_ok && r.cpu_milli() <= n.cpu_cores as u64 * 1000 && r.memory_mib() <= n.memory_total_mb
}

/// Tenant limits for a pool of `gpus` GPUs: guarantees 40/30/20/10% of it, each
/// may borrow up to `borrow` of it on top.
pub fn limits(gpus: f64, borrow: f64) -> Vec<(String, TenantLimits)> {
    TENANTS
        .iter()
        .map(|(name, share)| {
            (
                name.to_string(),
                TenantLimits {
                    guaranteed: Quota {
                        gpus: Some(gpus * share),
                        ..Quota::default()
                    },
                    borrowing_limit: Quota {
                        gpus: Some(gpus * borrow),
                        ..Quota::default()
                    },
                },
            )
        })
        .collect()
}
