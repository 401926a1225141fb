//! The difference between what a node holds and what the books give it, and
//! what each side must hear to agree again. A workload both know is kept,
//! and its task hears what the node says of it: its exit, or that it runs
//! (with its port) and its last readiness; one the books no longer give the
//! node is killed (it was fenced, or its task ended); and, on a hello, an
//! allocation the node did not report has lost its workload (its task
//! decides: dispatch again, requeue, or finish a release).
//!
//! Pure: no actix, no clock, no I/O.
use caldera_spec::wire::{ExitStatus, WorkloadEventKind, WorkloadReport};
use caldera_spec::Allocation;
use std::collections::HashSet;

#[cfg(test)]
mod tests;

/// Why the two sides compare what they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    /// A hello opened a new epoch: the node's report is complete, nothing
    /// is in flight, so an owned allocation it left out has no workload.
    Hello,
    /// A digest within a session: a start may still be on its way to the
    /// node (or held back for a pull slot), so what the node does not report
    /// is not taken as missing; the task's own timeouts cover a lost start.
    Digest,
}

/// The outcome of one comparison, in the order the node reported its workloads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Allocation ids the node still owns: it keeps (adopts) them.
    pub keep: Vec<String>,
    /// Allocation ids it no longer owns: it kills them now.
    pub kill: Vec<String>,
    /// Allocations the node owns but did not report (hello only).
    pub missing: Vec<MissingWorkload>,
    /// What the tasks of kept workloads hear: at most one exit per
    /// allocation; for one that runs, its start and its last readiness.
    pub news: Vec<TaskNews>,
}

/// An owned allocation whose workload the node no longer has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingWorkload {
    pub task_id: String,
    pub allocation_id: String,
}

/// What a task hears of its workload, as the node holds it. A task that
/// already has it ignores it; one that missed the event catches up.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskNews {
    /// The task as the node names it (the task checks the allocation is its own).
    pub task_id: String,
    pub allocation_id: String,
    pub kind: WorkloadEventKind,
}

impl TaskNews {
    /// Whether this is an exit (forwarded once per session).
    pub fn is_exit(&self) -> bool {
        matches!(self.kind, WorkloadEventKind::Exited(_))
    }
}

/// Compares what the books say a node owns with what the node holds.
/// A workload reported twice counts once (its first report is the one told).
pub fn plan(owned: &[Allocation], reported: &[WorkloadReport], occasion: Occasion) -> Plan {
    let owned_ids: HashSet<&str> = owned.iter().map(|a| a.allocation_id.as_str()).collect();
    let reported_ids: HashSet<&str> = reported.iter().map(|w| w.allocation_id.as_str()).collect();
    let mut out = Plan::default();
    let mut seen = HashSet::new();
    for w in reported {
        let id = w.allocation_id.as_str();
        if seen.insert(id) {
            if owned_ids.contains(id) {
                out.keep.push(id.to_string());
            } else {
                out.kill.push(id.to_string());
            }
        }
    }
    for id in &out.keep {
        let of_it = || reported.iter().filter(|w| w.allocation_id == *id);
        // An exit, if any report has one, is what the workload did last.
        let exit = of_it().find_map(|w| w.exit.as_ref().map(|x| (w, x)));
        match (exit, of_it().next()) {
            (Some((w, status)), _) => out.news.push(exit_news(w, status)),
            (None, Some(w)) => out.news.extend(running_news(w)),
            (None, None) => {}
        }
    }
    if occasion == Occasion::Hello {
        let mut told = HashSet::new();
        for a in owned {
            let id = a.allocation_id.as_str();
            if !reported_ids.contains(id) && told.insert(id) {
                out.missing.push(MissingWorkload {
                    task_id: a.task_id.clone(),
                    allocation_id: id.to_string(),
                });
            }
        }
    }
    out
}

fn exit_news(w: &WorkloadReport, status: &ExitStatus) -> TaskNews {
    TaskNews {
        task_id: w.task_id.clone(),
        allocation_id: w.allocation_id.clone(),
        kind: WorkloadEventKind::Exited(status.clone()),
    }
}

/// A running workload's start (with its port: a task that never recorded
/// the start's own event learns its endpoint) and its last readiness. One
/// still warming has started nothing: taken for started, a task with a
/// command would go `running` as if it were a reservation.
fn running_news(w: &WorkloadReport) -> Vec<TaskNews> {
    if w.warming {
        return Vec::new();
    }
    let news = |kind| TaskNews {
        task_id: w.task_id.clone(),
        allocation_id: w.allocation_id.clone(),
        kind,
    };
    let mut out = vec![news(WorkloadEventKind::Started {
        pid: w.pid,
        port: w.port,
        image_digest: None,
    })];
    if let Some(ready) = w.ready {
        out.push(news(WorkloadEventKind::Readiness {
            ready,
            generation: w.generation,
            detail: "as the node holds it (resync)".into(),
        }));
    }
    out
}

impl Plan {
    /// The fencing event's text, when the node is told to kill anything.
    pub fn kill_notice(&self, node: &str) -> Option<String> {
        (!self.kill.is_empty()).then(|| {
            format!(
                "node {node} told to kill workloads it no longer owns: {}",
                self.kill.join(", ")
            )
        })
    }
}
