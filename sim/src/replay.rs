//! Replaying a trace through the placement engine exactly as the FGD paper's
//! experiment does: shuffle per seed, inflate to 130% of GPU capacity by sampling
//! with replacement, place one task at a time (no departures), and record GPU
//! allocation against GPU arrival. Placement goes through the same `Pool` and
//! `Placer` the Scheduler actor uses.
use std::collections::BTreeMap;

use serde::Serialize;

use super::tally::Tally;
use super::trace::{TraceNode, TraceTask};
use super::waste::{GpuContents, WasteLine};
use caldera_scheduling::placement::rng::SplitMix64;
use caldera_scheduling::placement::{GpuUnit, Placer, PolicyName, Pool, WorkloadMix};

/// A loaded trace: nodes and tasks.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Short name (e.g. `default`).
    pub name: String,
    /// Nodes.
    pub nodes: Vec<TraceNode>,
    /// Tasks in trace order.
    pub tasks: Vec<TraceTask>,
}

impl Trace {
    /// Summed GPU capacity, milli-GPUs.
    pub fn capacity_milli(&self) -> u64 {
        self.nodes.iter().map(|n| n.gpus as u64 * 1000).sum()
    }

    /// The typical mix of the trace's tasks (95% coverage, as in the paper).
    pub fn mix(&self) -> WorkloadMix {
        let demands: Vec<_> = self.tasks.iter().map(TraceTask::demand).collect();
        WorkloadMix::from_demands(
            &demands,
            caldera_scheduling::placement::mix::DEFAULT_COVERAGE,
        )
    }
}

/// Outcome of one seed.
#[derive(Debug, Clone, Serialize)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// GPU allocation (% of capacity) when arrivals first reach 100%.
    pub alloc_pct_at_100: f64,
    /// GPU allocation (% of capacity) after the last task.
    pub alloc_pct_at_end: f64,
    /// GPU arrivals (% of capacity) after the last task.
    pub arrived_pct_at_end: f64,
    /// Unallocated GPUs after the last task.
    pub unallocated_gpus_at_end: f64,
    /// Tasks replayed.
    pub tasks: usize,
    /// Tasks placed.
    pub placed: usize,
    /// Failed tasks by the reason that rejected the most nodes.
    pub failed_by_reason: BTreeMap<String, u32>,
    /// (arrived %, allocated %) sampled every 1% of arrivals.
    #[serde(skip)]
    pub curve: Vec<(f64, f64)>,
    /// Unallocated GPUs at the end, by what the GPU holds.
    #[serde(skip)]
    pub waste: Vec<WasteLine>,
}

/// Task order of one seed: the trace shuffled, then inflated to `inflate` x the
/// GPU capacity by appending uniform draws with replacement (stopping at the
/// first draw that would pass the target), or trimmed by dropping random tasks
/// when the trace already asks for more.
pub fn workload(tasks: &[TraceTask], capacity_milli: u64, inflate: f64, seed: u64) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed);
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    rng.shuffle(&mut order);
    if tasks.is_empty() || inflate <= 0.0 {
        return order;
    }
    let target = (capacity_milli as f64 * inflate).round() as u64;
    let mut total: u64 = order.iter().map(|&i| tasks[i].gpu_request_milli()).sum();
    if total < target {
        loop {
            let i = rng.below(tasks.len() as u64) as usize;
            let next = total + tasks[i].gpu_request_milli();
            if next > target {
                break;
            }
            total = next;
            order.push(i);
        }
    } else {
        while total > target && !order.is_empty() {
            let k = rng.below(order.len() as u64) as usize;
            total -= tasks[order[k]].gpu_request_milli();
            order.remove(k);
        }
    }
    order
}

/// Replay one seed of `trace` under `policy`.
pub fn replay(
    trace: &Trace,
    mix: &WorkloadMix,
    policy: PolicyName,
    seed: u64,
    inflate: f64,
) -> SeedRun {
    replay_bounded(
        trace,
        mix,
        policy,
        seed,
        inflate,
        caldera_scheduling::placement::placer::DEFAULT_SEARCH_LIMIT,
    )
}

/// [`replay`] with the placer's search bounded to `search_limit` node classes
/// per decision (to measure what Nomad-style bounded search costs in quality).
pub fn replay_bounded(
    trace: &Trace,
    mix: &WorkloadMix,
    policy: PolicyName,
    seed: u64,
    inflate: f64,
    search_limit: usize,
) -> SeedRun {
    let mut pool = Pool::new(GpuUnit::Milli);
    for n in &trace.nodes {
        pool.upsert_node(n.view());
    }
    let order = workload(&trace.tasks, trace.capacity_milli(), inflate, seed);
    let mut placer =
        Placer::new(policy, mix.clone(), tie_break_seed(seed)).with_search_limit(search_limit);
    let mut tally = Tally::new(trace.capacity_milli());
    let mut contents = GpuContents::default();
    for &i in &order {
        let task = &trace.tasks[i];
        let request = task.gpu_request_milli();
        if let Some(p) = tally.place(&mut placer, &mut pool, &task.demand(), request) {
            contents.record(&p, request);
        }
    }
    let t = tally.finish();
    SeedRun {
        seed,
        alloc_pct_at_100: t.alloc_pct_at_100,
        alloc_pct_at_end: t.alloc_pct_at_end,
        arrived_pct_at_end: t.arrived_pct_at_end,
        unallocated_gpus_at_end: t.unallocated_gpus_at_end,
        tasks: order.len(),
        placed: t.placed,
        failed_by_reason: t.failed_by_reason,
        curve: t.curve,
        waste: contents.summarise(&pool),
    }
}

/// The seed of a replay's tie-breaks: their own stream, so every policy sees
/// the same task order.
pub fn tie_break_seed(seed: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9).wrapping_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(gpus: u32, milli: u32) -> TraceTask {
        TraceTask {
            name: "t".into(),
            cpu_milli: 1000,
            memory_mib: 1,
            num_gpu: gpus,
            gpu_milli: milli,
            gpu_spec: vec![],
        }
    }

    #[test]
    fn every_unallocated_gpu_is_on_a_waste_line() {
        // 3 nodes x 4 GPUs, a mix of 0.81, 0.47, 0.32 and whole tasks.
        let nodes = TraceNode::alike(3, 4, 32_000, 65_536);
        let tasks = [(1, 810), (1, 470), (1, 320), (1, 1000), (2, 1000), (0, 0)]
            .iter()
            .map(|&(n, m)| task(n, m))
            .collect();
        let trace = Trace {
            name: "t".into(),
            nodes,
            tasks,
        };
        let mix = trace.mix();
        for policy in [PolicyName::Caldera, PolicyName::Fgd, PolicyName::Random] {
            let run = replay(&trace, &mix, policy, 7, 1.3);
            let lines: f64 = run.waste.iter().map(|l| l.unallocated_gpus).sum();
            assert!(
                (lines - run.unallocated_gpus_at_end).abs() < 1e-9,
                "{policy}: lines {lines} vs {}",
                run.unallocated_gpus_at_end
            );
            assert!(
                run.unallocated_gpus_at_end > 0.0,
                "{policy}: {:?}",
                run.waste
            );
            // Same seed, same outcome.
            let again = replay(&trace, &mix, policy, 7, 1.3);
            assert_eq!(run.waste, again.waste);
            assert_eq!(run.placed, again.placed);
        }
    }

    #[test]
    fn inflation_stops_below_the_target() {
        let tasks = vec![task(1, 1000), task(1, 500), task(0, 0)];
        let order = workload(&tasks, 10_000, 1.3, 42);
        let total: u64 = order.iter().map(|&i| tasks[i].gpu_request_milli()).sum();
        assert!(total <= 13_000 && total > 13_000 - 1000, "{total}");
        assert_eq!(order, workload(&tasks, 10_000, 1.3, 42));
        // Over-asking traces are trimmed to the target.
        let big = vec![task(8, 1000); 20];
        let order = workload(&big, 10_000, 1.3, 1);
        assert_eq!(order.len(), 1);
    }
}
