//! One pool driven through the real scheduling core with a virtual clock.
//!
//! Events (arrivals, ends, the end of a victim's stop grace) are processed in
//! time order; after each batch at one timestamp the core runs one `cycle(now)`
//! and its decisions are carried out as the Scheduler actor and the task actor
//! do live: `Place` starts the task (it ends after its remaining work),
//! `Preempt` stops the victim after the stop grace, releases its allocation and
//! enqueues it again with `attempt + 1` to resume from its last checkpoint,
//! `Pending` only informs.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use caldera_spec::{Allocation, NodeInventory};

use super::workload::{Class, SimTask, GPU_MB};
use caldera_scheduling::placement::PolicyName;
use caldera_scheduling::queue::core::{Core, CoreConfig, Decision, TenantLimits, WaitingTask};

/// What one pool replays.
pub struct PoolInput<'a> {
    pub name: String,
    pub nodes: Vec<(String, NodeInventory)>,
    pub tasks: Vec<&'a SimTask>,
    pub limits: Vec<(String, TenantLimits)>,
}

/// Knobs of the replay loop.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    pub policy: PolicyName,
    pub seed: u64,
    pub core: CoreConfig,
    /// Training saves a checkpoint every this many ms of run time.
    pub checkpoint_every_ms: u64,
    /// Utilisation is measured over `[window.0, window.1)`.
    pub window: (u64, u64),
    /// Nothing is processed after this time (a guard against endless preemption loops).
    pub stop_at_ms: u64,
}

/// What became of one task.
#[derive(Debug, Clone)]
pub struct TaskOutcome {
    pub first_start_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub preemptions: u32,
    /// Run time thrown away by preemptions (since the last checkpoint, grace included), ms.
    pub lost_ms: u64,
}

/// What one pool did.
#[derive(Debug, Clone, Default)]
pub struct PoolOutcome {
    pub name: String,
    pub nodes: usize,
    pub gpus: u32,
    /// Allocated GPU x ms inside the window.
    pub gpu_ms: f64,
    /// Allocated GPU x ms inside the window that was later thrown away.
    pub lost_gpu_ms: f64,
    pub preemptions: u64,
    /// GPUs held by preemption victims, and GPUs asked by the tasks they made room for.
    pub victim_gpus: f64,
    pub preemptor_gpus: f64,
    /// Preemptions whose victim held at least four times the GPUs its preemptor asked.
    pub oversized_victims: u64,
    /// Pending decisions that were a task's last word in a pass and whose
    /// estimated start was already in the past.
    pub past_estimates: u64,
    /// Pending decisions that were a task's last word in a pass.
    pub pendings: u64,
    /// Each task's first start estimate, while it has not started yet.
    pub first_estimates: HashMap<String, u64>,
    /// At each task's first start: start minus its first estimate, ms
    /// (what the live control plane records as `estimate_error_ms`).
    pub estimate_errors_ms: Vec<i64>,
    /// Tasks no node of the pool can hold even when empty.
    pub infeasible: Vec<String>,
    /// Outcomes by task id.
    pub tasks: HashMap<String, TaskOutcome>,
    /// Over-allocations seen (GPU memory, CPU or memory of a node past its capacity).
    pub violations: Vec<String>,
    /// Peak allocated GPUs.
    pub peak_gpus: f64,
    pub max_queue: usize,
    pub cycles: u64,
    pub cycle_time: Duration,
    /// Time of the last event processed, ms.
    pub last_event_ms: u64,
    /// The loop stopped at `stop_at_ms` with events left.
    pub cut_off: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The allocation's work is done.
    End(String),
    /// A victim's stop grace is over: release and requeue.
    Stopped(String),
    /// Task (index into the pool's tasks) arrives.
    Arrive(usize),
}

struct Running {
    task: usize,
    start_ms: u64,
    checkpoint_ms: u64,
    gpus: Vec<(u32, u64)>,
    node: String,
    cpu_milli: u64,
    memory_mb: u64,
}

struct Sim<'a> {
    cfg: &'a LoopConfig,
    input: &'a PoolInput<'a>,
    core: Core,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    next_seq: u64,
    by_id: HashMap<String, usize>,
    remaining_ms: Vec<u64>,
    attempts: Vec<u32>,
    running: HashMap<String, Running>,
    /// Per node: GPU index -> MiB held, CPU milli, memory MiB.
    held: HashMap<String, (HashMap<u32, u64>, u64, u64)>,
    allocated_gpus: f64,
    out: PoolOutcome,
}

impl<'a> Sim<'a> {
    fn push(&mut self, at: u64, ev: Ev) {
        self.next_seq += 1;
        self.events.push(Reverse((at, self.next_seq, ev)));
    }

    fn task(&self, i: usize) -> &'a SimTask {
        self.input.tasks[i]
    }

    fn outcome(&mut self, i: usize) -> &mut TaskOutcome {
        let id = &self.input.tasks[i].id;
        self.out
            .tasks
            .get_mut(id)
            .expect("every task has an outcome")
    }

    fn enqueue(&mut self, i: usize) {
        let t = self.task(i);
        self.core.enqueue(WaitingTask {
            task_id: t.id.clone(),
            tenant: t.tenant.clone(),
            spec: t.spec.clone(),
            seq: i as u64,
            attempt: self.attempts[i] + 1,
            queued_ms: t.arrival_ms,
        });
    }

    /// Accumulates allocated GPU-time up to `t` (clipped to the window).
    fn advance(&mut self, from: u64, to: u64) {
        let (w0, w1) = self.cfg.window;
        let (a, b) = (from.max(w0), to.min(w1));
        if b > a {
            self.out.gpu_ms += self.allocated_gpus * (b - a) as f64;
        }
    }

    fn window_overlap(&self, a: u64, b: u64) -> u64 {
        let (w0, w1) = self.cfg.window;
        b.min(w1).saturating_sub(a.max(w0))
    }

    fn place(&mut self, a: Allocation, now: u64) {
        let Some(&i) = self.by_id.get(&a.task_id) else {
            self.out
                .violations
                .push(format!("placement of unknown task {}", a.task_id));
            return;
        };
        let inv = self
            .input
            .nodes
            .iter()
            .find(|(n, _)| *n == a.node)
            .map(|(_, inv)| inv);
        let (cpu_cap, mem_cap) = inv.map_or((0, 0), |inv| {
            (inv.cpu_cores as u64 * 1000, inv.memory_total_mb)
        });
        let h = self.held.entry(a.node.clone()).or_default();
        for g in &a.gpus {
            let used = h.0.entry(g.index).or_default();
            *used += g.memory_mb;
            if *used > GPU_MB {
                let msg = format!(
                    "t={now}: GPU {}#{} holds {} MiB of {GPU_MB}",
                    a.node, g.index, used
                );
                self.out.violations.push(msg);
            }
        }
        h.1 += a.cpu_milli;
        h.2 += a.memory_mb;
        if h.1 > cpu_cap || h.2 > mem_cap {
            let msg = format!(
                "t={now}: node {} holds cpu {}/{cpu_cap} m, memory {}/{mem_cap} MiB",
                a.node, h.1, h.2
            );
            self.out.violations.push(msg);
        }
        self.attempts[i] += 1;
        let gpus = self.task(i).gpus;
        self.allocated_gpus += gpus;
        self.out.peak_gpus = self.out.peak_gpus.max(self.allocated_gpus);
        let o = self.outcome(i);
        let first_start = o.first_start_ms.is_none();
        o.first_start_ms.get_or_insert(now);
        if first_start {
            if let Some(e) = self.out.first_estimates.remove(&a.task_id) {
                self.out.estimate_errors_ms.push(now as i64 - e as i64);
            }
        }
        let end = now + self.remaining_ms[i];
        self.running.insert(
            a.allocation_id.clone(),
            Running {
                task: i,
                start_ms: now,
                checkpoint_ms: now,
                gpus: a.gpus.iter().map(|g| (g.index, g.memory_mb)).collect(),
                node: a.node.clone(),
                cpu_milli: a.cpu_milli,
                memory_mb: a.memory_mb,
            },
        );
        self.push(end, Ev::End(a.allocation_id));
    }

    /// The allocation leaves the core and the books; `None` if it already had.
    fn free(&mut self, allocation_id: &str) -> Option<Running> {
        self.core.release(allocation_id)?;
        let r = self.running.remove(allocation_id)?;
        if let Some(h) = self.held.get_mut(&r.node) {
            for (idx, mb) in &r.gpus {
                if let Some(u) = h.0.get_mut(idx) {
                    *u = u.saturating_sub(*mb);
                }
            }
            h.1 = h.1.saturating_sub(r.cpu_milli);
            h.2 = h.2.saturating_sub(r.memory_mb);
        }
        self.allocated_gpus -= self.task(r.task).gpus;
        if self.allocated_gpus.abs() < 1e-9 {
            self.allocated_gpus = 0.0;
        }
        Some(r)
    }

    fn end(&mut self, allocation_id: &str, now: u64) {
        if let Some(r) = self.free(allocation_id) {
            self.remaining_ms[r.task] = 0;
            self.outcome(r.task).finished_ms = Some(now);
        }
    }

    /// A victim's grace is over: what it saved survives, the rest is lost.
    fn stopped(&mut self, allocation_id: &str, now: u64) {
        let Some(r) = self.free(allocation_id) else {
            return;
        };
        let i = r.task;
        let ran = now - r.start_ms;
        let saved = match self.task(i).class {
            // Replicas are stateless: the service's remaining lifetime simply continues.
            Class::Inference => ran,
            Class::Training => ran / self.cfg.checkpoint_every_ms * self.cfg.checkpoint_every_ms,
        }
        .min(self.remaining_ms[i]);
        let lost = ran - saved;
        self.remaining_ms[i] -= saved;
        let lost_in_window = self.window_overlap(now - lost, now);
        self.out.lost_gpu_ms += self.task(i).gpus * lost_in_window as f64;
        let done = self.remaining_ms[i] == 0;
        let o = self.outcome(i);
        o.preemptions += 1;
        o.lost_ms += lost;
        if done {
            o.finished_ms = Some(now);
        } else {
            self.enqueue(i);
        }
    }

    /// Tells the core about checkpoints taken since the last pass (training
    /// every `checkpoint_every_ms` of run time; replicas have nothing to lose).
    fn report_checkpoints(&mut self, now: u64) {
        let every = self.cfg.checkpoint_every_ms;
        for (id, r) in self.running.iter_mut() {
            let cp = match self.input.tasks[r.task].class {
                Class::Inference => now,
                Class::Training => r.start_ms + (now - r.start_ms) / every * every,
            };
            if cp > r.checkpoint_ms {
                r.checkpoint_ms = cp;
                self.core.checkpointed(id, cp);
            }
        }
    }

    fn apply(&mut self, d: Decision, now: u64) {
        match d {
            Decision::Place { allocation, .. } => self.place(allocation, now),
            Decision::Preempt {
                victim, for_task, ..
            } => {
                self.out.preemptions += 1;
                let gpus = |id: &str| self.by_id.get(id).map_or(0.0, |&i| self.task(i).gpus);
                let (v, f) = (gpus(&victim.task_id), gpus(&for_task));
                self.out.victim_gpus += v;
                self.out.preemptor_gpus += f;
                if f > 0.0 && v >= 4.0 * f {
                    self.out.oversized_victims += 1;
                }
                let at = now + self.cfg.core.stop_grace_ms;
                self.push(at, Ev::Stopped(victim.allocation_id));
            }
            Decision::Pending { .. } => {}
        }
    }

    fn run(mut self) -> PoolOutcome {
        let mut last = self.cfg.window.0;
        while let Some(Reverse((t, _, _))) = self.events.peek() {
            let t = *t;
            if t > self.cfg.stop_at_ms {
                self.out.cut_off = true;
                break;
            }
            self.advance(last, t);
            last = t;
            while let Some(Reverse((at, _, _))) = self.events.peek() {
                if *at != t {
                    break;
                }
                let Some(Reverse((_, _, ev))) = self.events.pop() else {
                    break;
                };
                match ev {
                    Ev::Arrive(i) => self.enqueue(i),
                    Ev::End(id) => self.end(&id, t),
                    Ev::Stopped(id) => self.stopped(&id, t),
                }
            }
            self.out.last_event_ms = t;
            let queued = self.core.queued();
            self.out.max_queue = self.out.max_queue.max(queued);
            if queued == 0 {
                continue;
            }
            self.report_checkpoints(t);
            let started = Instant::now();
            let decisions = self.core.cycle(t);
            self.out.cycle_time += started.elapsed();
            self.out.cycles += 1;
            let mut last_word: HashMap<&str, Option<u64>> = HashMap::new();
            for d in &decisions {
                if let Decision::Pending {
                    task_id,
                    estimated_start_ms,
                    ..
                } = d
                {
                    last_word.insert(task_id, *estimated_start_ms);
                }
            }
            self.out.pendings += last_word.len() as u64;
            for (task, e) in &last_word {
                let never_started = self
                    .by_id
                    .get(*task)
                    .is_some_and(|&i| self.attempts[i] == 0);
                if let (Some(e), true) = (e, never_started) {
                    self.out
                        .first_estimates
                        .entry(task.to_string())
                        .or_insert(*e);
                }
            }
            self.out.past_estimates += last_word
                .values()
                .filter(|e| e.is_some_and(|e| e < t))
                .count() as u64;
            for d in decisions {
                self.apply(d, t);
            }
        }
        self.advance(last, self.cfg.window.1.max(last));
        self.out
    }
}

/// Replays one pool.
pub fn simulate(input: &PoolInput<'_>, cfg: &LoopConfig) -> PoolOutcome {
    let mut core = Core::new(cfg.policy, cfg.seed, cfg.core.clone());
    for (name, inv) in &input.nodes {
        core.node_up(name, inv.clone());
    }
    for (tenant, l) in &input.limits {
        core.set_limits(tenant, l.clone());
    }
    let gpus = input.nodes.iter().map(|(_, i)| i.gpus.len() as u32).sum();
    let mut sim = Sim {
        cfg,
        input,
        core,
        events: BinaryHeap::new(),
        next_seq: 0,
        by_id: HashMap::new(),
        remaining_ms: input.tasks.iter().map(|t| t.work_ms).collect(),
        attempts: vec![0; input.tasks.len()],
        running: HashMap::new(),
        held: HashMap::new(),
        allocated_gpus: 0.0,
        out: PoolOutcome {
            name: input.name.clone(),
            nodes: input.nodes.len(),
            gpus,
            ..PoolOutcome::default()
        },
    };
    for (i, t) in input.tasks.iter().enumerate() {
        sim.by_id.insert(t.id.clone(), i);
        sim.out.tasks.insert(
            t.id.clone(),
            TaskOutcome {
                first_start_ms: None,
                finished_ms: None,
                preemptions: 0,
                lost_ms: 0,
            },
        );
        sim.push(t.arrival_ms, Ev::Arrive(i));
        if !input
            .nodes
            .iter()
            .any(|(_, n)| super::workload::fits_empty(t, n))
        {
            sim.out.infeasible.push(t.id.clone());
        }
    }
    sim.run()
}
