//! The rules for work that must leave its node: a lost node (requeued at
//! once, or fenced until the node's lease has run out), a drained node (a
//! planned stop), and the requeue of a planned stop, which never spends the
//! retry budget.
use super::{enter, finish, holds, requeue, steps, Outcome, Step, Stopping, RELEASING};
use caldera_spec::{EventKind, TaskRecord, TaskState};

/// A lost node: a `replace` task (or one whose lease is over already) is
/// requeued at once; a `fence` task waits until the node's lease plus the
/// stop grace has run out, so its old copy has stopped before a new one
/// starts. Its room goes back at once (the node is out of the pool anyway,
/// and if it returns meanwhile it is told to kill what it no longer owns).
pub(super) fn node_lost(rec: &TaskRecord, node: &str, fence_wait_ms: u64, now_ms: u64) -> Outcome {
    if rec.allocation.as_ref().map(|a| a.node.as_str()) != Some(node) {
        return Outcome::Ignored("the task holds nothing on that node");
    }
    if rec.state == TaskState::Released {
        // No exit will ever be reported: free the room now.
        return steps(vec![finish("released; node lost")]);
    }
    if rec.fenced_until_ms.is_some() {
        return Outcome::Ignored("already waiting for the fence");
    }
    let fenced = rec.spec.node_loss_policy() == caldera_spec::OnNodeLoss::Fence;
    if !fenced || fence_wait_ms == 0 {
        return requeue(rec, format!("node {node} lost"), true);
    }
    let why = fence_notice(node, fence_wait_ms);
    steps(vec![
        Step::ForgetStop,
        Step::Free {
            reason: format!("node {node} lost"),
        },
        Step::Fence {
            until_ms: now_ms.saturating_add(fence_wait_ms),
        },
        Step::NotePending {
            reason: why.clone(),
            estimated_start_ms: Some(now_ms.saturating_add(fence_wait_ms)),
        },
        Step::Record {
            kind: EventKind::NodeFenced,
            message: why,
        },
    ])
}

/// What a fenced task's event and pending reason say.
pub fn fence_notice(node: &str, wait_ms: u64) -> String {
    format!(
        "node {node} lost; waiting {:.1} s for its lease to run out before starting elsewhere",
        wait_ms as f64 / 1000.0
    )
}

/// The fence is over: the old copy has stopped by itself; requeue.
pub(super) fn fence_over(rec: &TaskRecord, allocation_id: &str) -> Outcome {
    if rec.fenced_until_ms.is_none() || !holds(rec, allocation_id) {
        return Outcome::Ignored("no fence of this allocation");
    }
    if rec.state == TaskState::Released {
        return steps(vec![Step::Unfence, finish("released; node lost")]);
    }
    let node = rec.allocation.as_ref().map_or("", |a| a.node.as_str());
    let Outcome::Steps(rest) = requeue(rec, format!("node {node} lost; its lease ran out"), true)
    else {
        return Outcome::Ignored("nothing to requeue");
    };
    let mut s = vec![Step::Unfence];
    s.extend(rest);
    steps(s)
}

/// The node is drained: a planned stop, so no retry is spent. A running
/// workload is asked to checkpoint (SIGTERM, the stop grace) and requeued
/// once it exits, to resume from its checkpoint; a reservation, or a task
/// not running yet, has nothing to save and is requeued at once.
pub(super) fn drain(
    rec: &TaskRecord,
    stopping: Option<&Stopping>,
    allocation_id: &str,
    node: &str,
    stop_grace_ms: u64,
) -> Outcome {
    if rec.state == TaskState::Released {
        return Outcome::Ignored(RELEASING);
    }
    if !holds(rec, allocation_id) || stopping.is_some() || rec.fenced_until_ms.is_some() {
        return Outcome::Ignored("not this allocation, or a stop is already under way");
    }
    let why = format!("node {node} drained");
    if rec.spec.is_reservation() || rec.state != TaskState::Running {
        let mut s = vec![Step::StopWorkload {
            reason: why.clone(),
        }];
        s.extend(requeue_planned(rec, &why));
        return steps(s);
    }
    let id = &rec.spec.task_id;
    steps(vec![
        Step::Announce(vec![(
            EventKind::CheckpointRequested,
            format!(
                "node {node} is draining: checkpoint requested from {id}: SIGTERM, then {stop_grace_ms} ms to save before SIGKILL"
            ),
        )]),
        Step::StopWorkload { reason: why },
        Step::AwaitStop(Stopping::Drained {
            node: node.to_string(),
        }),
    ])
}

/// Back to the queue after a planned stop (a drain, an agent shutting
/// down): no retry spent, resuming from the latest checkpoint.
pub(super) fn requeue_planned(rec: &TaskRecord, why: &str) -> Vec<Step> {
    let resume = match &rec.checkpoint {
        Some(c) => {
            format!("{why}; requeued (planned, no retry spent); resumes from checkpoint {c}")
        }
        None => format!("{why}; requeued (planned, no retry spent)"),
    };
    vec![
        Step::Free {
            reason: why.to_string(),
        },
        Step::Unbind,
        enter(TaskState::Queued, resume),
        Step::Enqueue,
    ]
}

#[cfg(test)]
mod tests;
