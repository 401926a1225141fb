//! Measured use per allocation: CPU % and RSS of the workload's process tree
//! from /proc, GPU use from NVML per process, or — on simulated GPUs — the
//! tree's CPU % standing in for GPU utilisation (and its RSS, capped at the
//! slice, for GPU memory), labelled as such.
use super::workload::Workload;
use crate::probe::ProcessGpuUse;
use crate::procfs::{self, ProcStat};
use caldera_spec::wire::AllocationUse;
use std::collections::HashMap;
use std::time::Instant;

/// `gpu_source` of a measurement on simulated GPUs.
pub const SIMULATED_SOURCE: &str = "simulated: process-tree CPU";

/// Updates `w.usage` from a /proc snapshot taken now.
pub fn measure(
    w: &mut Workload,
    procs: &[ProcStat],
    gpu_by_pid: &HashMap<u32, ProcessGpuUse>,
    simulated_gpus: bool,
) {
    let Some(leader) = w.pid.filter(|_| w.is_alive()) else {
        return;
    };
    // A container's processes are not the podman client's children: they
    // are the ones in its cgroup, under the workload's.
    let tree = match (&w.container, &w.memory_cgroup) {
        (Some(_), Some(dir)) => {
            let pids = crate::container::cgroups::container_pids(dir);
            procs.iter().filter(|p| pids.contains(&p.pid)).collect()
        }
        _ => procfs::tree(procs, leader),
    };
    let ticks: u64 = tree.iter().map(|p| p.cpu_ticks).sum();
    let rss_mb =
        tree.iter().map(|p| p.rss_pages).sum::<u64>() * procfs::page_size() / (1024 * 1024);
    let now = Instant::now();
    // The first sample has no previous one to difference against: report 0 %.
    let cpu_pct = match w.last_cpu {
        Some((prev, at)) => {
            let secs = now.duration_since(at).as_secs_f64().max(0.001);
            (ticks.saturating_sub(prev) as f64 / procfs::clock_ticks() as f64 / secs * 100.0) as f32
        }
        None => 0.0,
    };
    w.last_cpu = Some((ticks, now));
    let mut usage = AllocationUse {
        cpu_pct,
        memory_mb: rss_mb,
        ..AllocationUse::default()
    };
    if w.gpu_indices.is_empty() {
        usage.gpu_source = String::new();
    } else if simulated_gpus {
        usage.gpu_utilization_pct = cpu_pct.min(100.0 * w.gpu_indices.len() as f32);
        usage.gpu_memory_used_mb = rss_mb.min(w.gpu_memory_mb.max(1) * w.gpu_indices.len() as u64);
        usage.gpu_source = SIMULATED_SOURCE.to_string();
    } else {
        for p in &tree {
            if let Some(g) = gpu_by_pid.get(&p.pid) {
                usage.gpu_memory_used_mb += g.memory_mb;
                usage.gpu_utilization_pct += g.utilization_pct as f32;
            }
        }
        usage.gpu_source = "nvml".to_string();
    }
    w.usage = usage;
}

/// Per simulated GPU index: (utilisation %, memory MiB) its workloads stand for.
/// A workload on n GPUs spreads its figures evenly over them.
pub fn simulated_gpu_use<'a>(
    workloads: impl Iterator<Item = &'a Workload>,
) -> HashMap<u32, (u32, u64)> {
    let mut out: HashMap<u32, (u32, u64)> = HashMap::new();
    for w in workloads.filter(|w| w.is_alive() && !w.gpu_indices.is_empty()) {
        let n = w.gpu_indices.len() as u64;
        for &i in &w.gpu_indices {
            let e = out.entry(i).or_default();
            e.0 =
                e.0.saturating_add((w.usage.gpu_utilization_pct / n as f32) as u32);
            e.1 = e.1.saturating_add(w.usage.gpu_memory_used_mb / n);
        }
    }
    out
}
