//! Figures of a dynamic replay: time-weighted GPU utilisation, queueing delay
//! per priority, preemptions and work lost, tasks never started.
use std::time::Duration;

use serde::Serialize;

use super::engine::{LoopConfig, PoolOutcome};
use super::workload::{Mix, SimTask};

/// One pool of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct PoolSummary {
    pub name: String,
    pub nodes: usize,
    pub gpus: u32,
    pub tasks: usize,
    /// Allocated GPU share of this pool over the window, %.
    pub gpu_util_pct: f64,
    pub peak_gpus: f64,
    pub max_queue: usize,
    pub cycles: u64,
    /// Seconds spent inside `Core::cycle`.
    pub cycle_s: f64,
}

/// Queueing delay (arrival to first start) of one priority.
#[derive(Debug, Clone, Serialize)]
pub struct DelayRow {
    pub priority: String,
    pub tasks: usize,
    pub started: usize,
    pub mean_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
}

/// One scenario's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub scenario: String,
    pub gpus: u32,
    pub pools: Vec<PoolSummary>,
    /// Load offered: the GPU-time the tasks would hold inside the window had
    /// each started on arrival, as % of capacity.
    pub offered_pct: f64,
    /// Time-weighted allocated GPUs / capacity over the window, %.
    pub gpu_util_pct: f64,
    /// The same, less GPU-time later thrown away by preemptions, %.
    pub useful_util_pct: f64,
    pub delay: Vec<DelayRow>,
    pub preemptions: u64,
    /// Tasks preempted at least once.
    pub preempted_tasks: usize,
    /// GPU-hours of work thrown away by preemptions (since the last checkpoint, grace included).
    pub lost_gpu_hours: f64,
    pub never_started: usize,
    /// Of those, tasks no node of their pool could hold even empty.
    pub infeasible: usize,
    /// GPUs held by preemption victims / GPUs asked by their preemptors.
    pub victim_gpus: f64,
    pub preemptor_gpus: f64,
    /// Preemptions whose victim held at least 4x the GPUs its preemptor asked.
    pub oversized_victims: u64,
    /// Pending decisions (a task's last word in a pass) / those with an estimated start already past.
    pub pendings: u64,
    pub past_estimates: u64,
    /// How close first start estimates came to the starts (the live
    /// control plane's `GET /v1/stats/estimates`, for the replay).
    pub estimates: caldera_scheduling::queue::estimate_accuracy::EstimateAccuracy,
    /// Started but not finished when the replay stopped.
    pub unfinished: usize,
    /// When the last task finished, seconds of trace time.
    pub last_finish_s: u64,
    pub violations: Vec<String>,
    pub cut_off: bool,
    pub wall_s: f64,
}

/// A whole replay.
#[derive(Debug, Clone, Serialize)]
pub struct DynamicReport {
    pub trace: String,
    pub policy: String,
    pub seed: u64,
    pub nodes: usize,
    pub gpus: u32,
    /// Utilisation window, seconds of trace time.
    pub window_s: (u64, u64),
    pub checkpoint_every_s: u64,
    pub stop_grace_s: u64,
    pub borrow: f64,
    pub mix: Mix,
    pub scenarios: Vec<ScenarioReport>,
}

fn pct(x: f64, of: f64) -> f64 {
    if of > 0.0 {
        100.0 * x / of
    } else {
        0.0
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Summarises one scenario's pools.
pub fn summarize(
    name: &str,
    tasks: &[SimTask],
    pools: &[PoolOutcome],
    cfg: &LoopConfig,
    wall: Duration,
) -> ScenarioReport {
    let (w0, w1) = cfg.window;
    let span = w1.saturating_sub(w0) as f64;
    let gpus: u32 = pools.iter().map(|p| p.gpus).sum();
    let cap = gpus as f64 * span;
    let offered: f64 = tasks
        .iter()
        .map(|t| {
            let (a, b) = (t.arrival_ms.max(w0), (t.arrival_ms + t.work_ms).min(w1));
            t.gpus * b.saturating_sub(a) as f64
        })
        .sum();
    let gpu_ms: f64 = pools.iter().map(|p| p.gpu_ms).sum();
    let lost_gpu_ms: f64 = pools.iter().map(|p| p.lost_gpu_ms).sum();
    let outcome = |id: &str| pools.iter().find_map(|p| p.tasks.get(id));
    let mut delay = Vec::new();
    for prio in [
        caldera_spec::Priority::HIGH,
        caldera_spec::Priority::MEDIUM,
        caldera_spec::Priority::LOW,
    ] {
        let mine: Vec<&SimTask> = tasks.iter().filter(|t| t.priority == prio).collect();
        let mut waits: Vec<u64> = mine
            .iter()
            .filter_map(|t| {
                outcome(&t.id)
                    .and_then(|o| o.first_start_ms)
                    .map(|s| s - t.arrival_ms)
            })
            .collect();
        waits.sort_unstable();
        let mean = if waits.is_empty() {
            0.0
        } else {
            waits.iter().sum::<u64>() as f64 / waits.len() as f64 / 1000.0
        };
        delay.push(DelayRow {
            priority: prio.label(),
            tasks: mine.len(),
            started: waits.len(),
            mean_s: mean,
            p95_s: percentile(&waits, 0.95) as f64 / 1000.0,
            max_s: waits.last().copied().unwrap_or(0) as f64 / 1000.0,
        });
    }
    let all: Vec<_> = tasks.iter().filter_map(|t| outcome(&t.id)).collect();
    let lost_gpu_ms_total: f64 = tasks
        .iter()
        .filter_map(|t| outcome(&t.id).map(|o| t.gpus * o.lost_ms as f64))
        .sum();
    ScenarioReport {
        scenario: name.to_string(),
        gpus,
        pools: pools
            .iter()
            .map(|p| PoolSummary {
                name: p.name.clone(),
                nodes: p.nodes,
                gpus: p.gpus,
                tasks: p.tasks.len(),
                gpu_util_pct: pct(p.gpu_ms, p.gpus as f64 * span),
                peak_gpus: p.peak_gpus,
                max_queue: p.max_queue,
                cycles: p.cycles,
                cycle_s: p.cycle_time.as_secs_f64(),
            })
            .collect(),
        offered_pct: pct(offered, cap),
        gpu_util_pct: pct(gpu_ms, cap),
        useful_util_pct: pct(gpu_ms - lost_gpu_ms, cap),
        delay,
        preemptions: pools.iter().map(|p| p.preemptions).sum(),
        preempted_tasks: all.iter().filter(|o| o.preemptions > 0).count(),
        lost_gpu_hours: lost_gpu_ms_total / 3_600_000.0,
        never_started: tasks.len() - all.iter().filter(|o| o.first_start_ms.is_some()).count(),
        infeasible: pools.iter().map(|p| p.infeasible.len()).sum(),
        victim_gpus: pools.iter().map(|p| p.victim_gpus).sum(),
        preemptor_gpus: pools.iter().map(|p| p.preemptor_gpus).sum(),
        oversized_victims: pools.iter().map(|p| p.oversized_victims).sum(),
        pendings: pools.iter().map(|p| p.pendings).sum(),
        past_estimates: pools.iter().map(|p| p.past_estimates).sum(),
        estimates: caldera_scheduling::queue::estimate_accuracy::summarise(
            pools
                .iter()
                .flat_map(|p| p.estimate_errors_ms.iter().copied())
                .collect(),
            pools.iter().map(|p| p.first_estimates.len() as u64).sum(),
        ),
        unfinished: all
            .iter()
            .filter(|o| o.first_start_ms.is_some() && o.finished_ms.is_none())
            .count(),
        last_finish_s: all.iter().filter_map(|o| o.finished_ms).max().unwrap_or(0) / 1000,
        violations: pools.iter().flat_map(|p| p.violations.clone()).collect(),
        cut_off: pools.iter().any(|p| p.cut_off),
        wall_s: wall.as_secs_f64(),
    }
}

fn hours(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

impl DynamicReport {
    /// The comparison as a text table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "trace {} | {} nodes, {} GPUs | window {}..{} s | policy {} seed {} | checkpoint every {} s, grace {} s, borrow {:.0}%\n",
            self.trace,
            self.nodes,
            self.gpus,
            self.window_s.0,
            self.window_s.1,
            self.policy,
            self.seed,
            self.checkpoint_every_s,
            self.stop_grace_s,
            self.borrow * 100.0
        ));
        let m = &self.mix;
        s.push_str(&format!(
            "tasks {} | inference {} ({:.1}% of tasks, {} eligible: sharing <= 0.5 GPU) | GPU-hours: inference {:.0}, training {:.0}\n\n",
            m.tasks,
            m.inference_tasks,
            pct(m.inference_tasks as f64, m.tasks as f64),
            m.inference_eligible,
            m.inference_gpu_hours,
            m.training_gpu_hours
        ));
        s.push_str(&format!(
            "{:<13} {:>7} {:>8} {:>7} {:>7} | {:>15} {:>15} {:>15} | {:>7} {:>9} {:>6} {:>6}\n",
            "scenario",
            "offered",
            "GPU util",
            "useful",
            "pools",
            "high mean/p95",
            "medium mean/p95",
            "low mean/p95",
            "preempt",
            "lost GPUh",
            "never",
            "wall"
        ));
        for r in &self.scenarios {
            let d = |i: usize| {
                r.delay
                    .get(i)
                    .map(|d| format!("{}/{}", hours(d.mean_s), hours(d.p95_s)))
                    .unwrap_or_default()
            };
            let pools: Vec<String> = r.pools.iter().map(|p| p.gpus.to_string()).collect();
            s.push_str(&format!(
                "{:<13} {:>6.1}% {:>7.2}% {:>6.2}% {:>7} | {:>15} {:>15} {:>15} | {:>7} {:>9.1} {:>6} {:>5.1}s\n",
                r.scenario,
                r.offered_pct,
                r.gpu_util_pct,
                r.useful_util_pct,
                pools.join("+"),
                d(0),
                d(1),
                d(2),
                r.preemptions,
                r.lost_gpu_hours,
                r.never_started,
                r.wall_s
            ));
        }
        for r in &self.scenarios {
            for p in &r.pools {
                s.push_str(&format!(
                    "  {:<13} pool {:<9} {:>3} nodes {:>4} GPUs {:>5} tasks: util {:>6.2}%, peak {:>6.1} GPUs, max queue {:>5}, {} cycles in {:.2}s\n",
                    r.scenario,
                    p.name,
                    p.nodes,
                    p.gpus,
                    p.tasks,
                    p.gpu_util_pct,
                    p.peak_gpus,
                    p.max_queue,
                    p.cycles,
                    p.cycle_s
                ));
            }
            s.push_str(&format!(
                "  {:<13} {} preempted tasks, victims held {:.1} GPUs for preemptors asking {:.1} ({} victims >= 4x their preemptor); never started {} ({} fit no node of their pool); {} unfinished; cut off: {}; over-allocations: {}; {} of {} pending decisions gave an estimated start already past; first start estimates of {} tasks: {:.1}% within 1 min, {:.1}% within 10 min, median error {:.0} s\n",
                r.scenario,
                r.preempted_tasks,
                r.victim_gpus,
                r.preemptor_gpus,
                r.oversized_victims,
                r.never_started,
                r.infeasible,
                r.unfinished,
                r.cut_off,
                r.violations.len(),
                r.past_estimates,
                r.pendings,
                r.estimates.tasks,
                r.estimates.within_1m * 100.0,
                r.estimates.within_10m * 100.0,
                r.estimates.median_abs_error_s
            ));
        }
        if let [a, b] = &self.scenarios[..] {
            s.push_str(&format!(
                "\nshared vs static split: GPU utilisation {:+.1}% relative ({:.2}% -> {:.2}%)\n",
                pct(b.gpu_util_pct - a.gpu_util_pct, a.gpu_util_pct),
                a.gpu_util_pct,
                b.gpu_util_pct
            ));
        }
        s
    }
}
