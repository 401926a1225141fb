//! The lifecycle table, row by row. Each row: the task as it is, the stop
//! being awaited, what happened, and what must follow — with why.
use super::*;
use crate::fixtures;
use caldera_spec::TaskSpec;

pub(super) fn spec(extra: &str) -> TaskSpec {
    let body = format!(
        r#"{{"task_id":"t1","task_type":"training","resources":{{"gpu":{{"count":1}},"cpu":{{"cores":1}}}}{extra}}}"#
    );
    caldera_spec::parse_task_spec(body.as_bytes()).expect("test spec parses")
}

pub(super) fn alloc(id: &str, node: &str) -> Allocation {
    fixtures::allocation(id, "t1", node)
}

/// A training task `t1` running `train` in `state`, first attempt; from
/// Scheduled on (and while Released) it holds allocation `a1` on node `n1`.
pub(super) fn task(state: TaskState) -> TaskRecord {
    let mut r = TaskRecord::new(spec(r#","command":["train"]"#), "acme".into(), 0, 1);
    r.state = state;
    if state.holds_allocation() || state == TaskState::Released {
        r.allocation = Some(alloc("a1", "n1"));
        r.attempts = 1;
    }
    r
}

pub(super) fn with(mut r: TaskRecord, f: impl FnOnce(&mut TaskRecord)) -> TaskRecord {
    f(&mut r);
    r
}

/// Inputs borrow for the table's lifetime.
pub(super) fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

pub(super) fn news(kind: WorkloadEventKind) -> Input<'static> {
    Input::Workload {
        allocation_id: "a1",
        kind: leak(kind),
        node_address: "10.0.0.5",
    }
}

pub(super) fn exit(code: Option<i32>, signal: Option<i32>) -> Input<'static> {
    news(WorkloadEventKind::Exited(ExitStatus {
        code,
        signal,
        stopped: false,
        oom_killed: false,
    }))
}

fn preempt() -> Input<'static> {
    Input::Preempt {
        allocation_id: "a1",
        by: "svc.r0",
        reason: "room for inference",
        stop_grace_ms: 10_000,
    }
}

fn reclaim() -> Input<'static> {
    Input::Reclaim {
        allocation_id: "a1",
        reason: "idle for 30 min",
    }
}

pub(super) fn preempting() -> Option<Stopping> {
    Some(Stopping::Preempted {
        by: "svc.r0".into(),
        reason: "room for inference".into(),
    })
}

fn reclaiming() -> Option<Stopping> {
    Some(Stopping::Reclaimed {
        reason: "idle for 30 min".into(),
    })
}

pub(super) fn s(v: Vec<Step>) -> Outcome {
    Outcome::Steps(v)
}

pub(super) fn to(state: TaskState, reason: &str) -> Step {
    enter(state, reason)
}

pub(super) fn fin(reason: &str) -> Step {
    finish(reason)
}

pub(super) fn free(reason: &str) -> Step {
    Step::Free {
        reason: reason.into(),
    }
}

pub(super) fn stop(reason: &str) -> Step {
    Step::StopWorkload {
        reason: reason.into(),
    }
}

pub(super) fn failure(why: &str) -> Step {
    Step::RecordFailure(why.into())
}

/// The preemption's way back to the queue, as every row that takes it expects it.
fn back_to_queue(reason: &str, resume: &str) -> Vec<Step> {
    vec![
        free("preempted by svc.r0"),
        Step::CountPreemption,
        Step::Unbind,
        to(
            TaskState::Preempted,
            &format!("preempted by svc.r0: {reason}"),
        ),
        to(TaskState::Queued, resume),
        Step::Enqueue,
    ]
}

const STARTS_OVER: &str = "requeued; no checkpoint was saved, it starts over";

fn announce_preemption() -> Step {
    Step::Announce(vec![
        (
            EventKind::Preempted,
            "task t1 preempted by svc.r0: room for inference".into(),
        ),
        (
            EventKind::CheckpointRequested,
            "checkpoint requested from t1: SIGTERM, then 10000 ms to save before SIGKILL".into(),
        ),
    ])
}

pub(super) struct Row {
    why: &'static str,
    rec: TaskRecord,
    stopping: Option<Stopping>,
    input: Input<'static>,
    want: Outcome,
}

pub(super) fn row(why: &'static str, rec: TaskRecord, input: Input<'static>, want: Outcome) -> Row {
    Row {
        why,
        rec,
        stopping: None,
        input,
        want,
    }
}

pub(super) fn stopping_row(
    why: &'static str,
    rec: TaskRecord,
    stopping: Option<Stopping>,
    input: Input<'static>,
    want: Outcome,
) -> Row {
    Row {
        why,
        rec,
        stopping,
        input,
        want,
    }
}

pub(super) fn check(rows: Vec<Row>) {
    let n = rows.len();
    let mut failed = Vec::new();
    for r in rows {
        let got = decide(&r.rec, r.stopping.as_ref(), r.input);
        if got != r.want {
            failed.push(format!(
                "{}\n  state {:?}, input {:?}\n  want {:?}\n  got  {:?}",
                r.why, r.rec.state, r.input, r.want, got
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {n} rows differ:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

use TaskState::*;

#[test]
fn placement_and_waiting() {
    let a2 = leak(alloc("a2", "n2"));
    check(vec![
        row(
            "queued + placed -> scheduled: take the grant (recorded in the Scheduler's batch), then send the start command",
            task(Queued),
            Input::Placed {
                allocation: a2,
                note: None,
            },
            s(vec![
                Step::Grant {
                    allocation: a2.clone(),
                    reason: "placed on n2".into(),
                },
                Step::Dispatch,
            ]),
        ),
        row(
            "queued + placed where its weights are cached -> the grant's reason says so",
            task(Queued),
            Input::Placed {
                allocation: a2,
                note: Some("weights cached"),
            },
            s(vec![
                Step::Grant {
                    allocation: a2.clone(),
                    reason: "placed on n2: weights cached".into(),
                },
                Step::Dispatch,
            ]),
        ),
        row(
            "preempted + placed -> scheduled: a preempted task waits like a queued one",
            task(Preempted),
            Input::Placed {
                allocation: a2,
                note: None,
            },
            s(vec![
                Step::Grant {
                    allocation: a2.clone(),
                    reason: "placed on n2".into(),
                },
                Step::Dispatch,
            ]),
        ),
        row(
            "running + placed -> hand the second grant back: one allocation per task",
            task(Running),
            Input::Placed {
                allocation: a2,
                note: None,
            },
            s(vec![Step::Decline {
                allocation_id: "a2".into(),
                reason: "task no longer waiting".into(),
            }]),
        ),
        row(
            "released + placed -> hand it back: the user let go",
            task(Released),
            Input::Placed {
                allocation: a2,
                note: None,
            },
            s(vec![Step::Decline {
                allocation_id: "a2".into(),
                reason: "task no longer waiting".into(),
            }]),
        ),
        row(
            "cancelled + placed -> hand it back: a grant that crossed the cancel (leaked before)",
            task(Cancelled),
            Input::Placed {
                allocation: a2,
                note: None,
            },
            s(vec![Step::Decline {
                allocation_id: "a2".into(),
                reason: "task no longer waiting".into(),
            }]),
        ),
        row(
            "finished + placed -> hand it back: an ended task holds no room",
            task(Finished),
            Input::Placed {
                allocation: a2,
                note: None,
            },
            s(vec![Step::Decline {
                allocation_id: "a2".into(),
                reason: "task no longer waiting".into(),
            }]),
        ),
        row(
            "queued + pending -> note why it waits and when it should start",
            task(Queued),
            Input::Pending {
                reason: "quota: gpu 4 of 4 used",
                estimated_start_ms: Some(60_000),
            },
            s(vec![Step::NotePending {
                reason: "quota: gpu 4 of 4 used".into(),
                estimated_start_ms: Some(60_000),
            }]),
        ),
        row(
            "scheduled + pending -> ignored: a stale note from the pass before the grant",
            task(Scheduled),
            Input::Pending {
                reason: "no room",
                estimated_start_ms: None,
            },
            Outcome::Ignored("no longer waiting"),
        ),
    ]);
}

#[test]
fn workload_progress() {
    check(vec![
        row(
            "running + news of allocation a0 -> ignored: an older attempt's workload",
            task(Running),
            Input::Workload {
                allocation_id: "a0",
                kind: leak(WorkloadEventKind::Preparing),
                node_address: "10.0.0.5",
            },
            Outcome::Ignored("an older attempt's news"),
        ),
        row(
            "scheduled + preparing -> preparing",
            task(Scheduled),
            news(WorkloadEventKind::Preparing),
            s(vec![Step::Enter {
                state: Preparing,
                reason: None,
            }]),
        ),
        row(
            "running + preparing -> ignored: never backwards",
            task(Running),
            news(WorkloadEventKind::Preparing),
            Outcome::Ignored("already past that stage"),
        ),
        row(
            "preparing + ready -> ready, saying which isolation the node applied",
            task(Preparing),
            news(WorkloadEventKind::Ready {
                isolation: "cgroup-v2".into(),
            }),
            s(vec![to(Ready, "isolation: cgroup-v2")]),
        ),
        row(
            "scheduled + ready -> ready: the preparing event may be skipped",
            task(Scheduled),
            news(WorkloadEventKind::Ready {
                isolation: "none".into(),
            }),
            s(vec![to(Ready, "isolation: none")]),
        ),
        row(
            "running + ready -> ignored: never backwards",
            task(Running),
            news(WorkloadEventKind::Ready {
                isolation: "none".into(),
            }),
            Outcome::Ignored("already past that stage"),
        ),
        row(
            "ready + started(pid 42) -> running",
            task(Ready),
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(42),
                port: None,
            }),
            s(vec![to(Running, "pid 42")]),
        ),
        row(
            "scheduled + started(no pid) -> running: a reservation holds its slot",
            with(task(Scheduled), |r| r.spec.command.clear()),
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: None,
                port: None,
            }),
            s(vec![to(Running, "reservation held (no command)")]),
        ),
        row(
            "scheduled + started(no pid) of a command -> running, never called a reservation",
            task(Scheduled),
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: None,
                port: None,
            }),
            s(vec![to(Running, "started (its pid not reported yet)")]),
        ),
        row(
            "running + started -> ignored: already running",
            task(Running),
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(42),
                port: None,
            }),
            Outcome::Ignored("already past that stage"),
        ),
        row(
            "released + started -> ignored: released stays released",
            task(Released),
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(42),
                port: None,
            }),
            Outcome::Ignored("already past that stage"),
        ),
        row(
            "running + checkpoint saved -> remember it (no transition)",
            task(Running),
            news(WorkloadEventKind::CheckpointSaved {
                path: "/ck/step-3".into(),
            }),
            s(vec![Step::SaveCheckpoint {
                path: "/ck/step-3".into(),
            }]),
        ),
        row(
            "released + checkpoint saved -> still remembered: a stopping workload saves last",
            task(Released),
            news(WorkloadEventKind::CheckpointSaved {
                path: "/ck/step-4".into(),
            }),
            s(vec![Step::SaveCheckpoint {
                path: "/ck/step-4".into(),
            }]),
        ),
        row(
            "preparing + start failed -> failed, free the allocation",
            task(Preparing),
            news(WorkloadEventKind::StartFailed {
                code: 0,
                reason: "command not found: train".into(),
            }),
            s(vec![
                failure("command not found: train"),
                to(Failed, "command not found: train"),
                fin("command not found: train"),
            ]),
        ),
        row(
            "released + start failed -> finish the release: nothing ran",
            task(Released),
            news(WorkloadEventKind::StartFailed {
                code: 0,
                reason: "stopped".into(),
            }),
            s(vec![fin("released")]),
        ),
    ]);
}

#[test]
fn workload_exits() {
    check(vec![
        row(
            "running + exited(0) -> finished, free the allocation",
            task(Running),
            exit(Some(0), None),
            s(vec![
                Step::RecordExitCode(Some(0)),
                to(Finished, "exited with code 0"),
                fin("exited with code 0"),
            ]),
        ),
        row(
            "running + exited(3) -> failed with the code, free the allocation",
            task(Running),
            exit(Some(3), None),
            s(vec![
                Step::RecordExitCode(Some(3)),
                failure("exited with code 3"),
                to(Failed, "exited with code 3"),
                fin("exited with code 3"),
            ]),
        ),
        row(
            "running + killed by signal 9 -> failed; no exit code to record",
            task(Running),
            exit(None, Some(9)),
            s(vec![
                Step::RecordExitCode(None),
                failure("killed by signal 9"),
                to(Failed, "killed by signal 9"),
                fin("killed by signal 9"),
            ]),
        ),
        row(
            "running + killed at its memory limit -> failed oom_killed, not a plain signal",
            task(Running),
            news(WorkloadEventKind::Exited(ExitStatus {
                code: Some(137),
                signal: None,
                stopped: false,
                oom_killed: true,
            })),
            s(vec![
                Step::RecordExitCode(Some(137)),
                failure(OOM_KILLED_REASON),
                to(Failed, OOM_KILLED_REASON),
                fin(OOM_KILLED_REASON),
            ]),
        ),
        row(
            "running + ended with neither code nor signal -> failed, saying so",
            task(Running),
            exit(None, None),
            s(vec![
                Step::RecordExitCode(None),
                failure("ended without an exit status"),
                to(Failed, "ended without an exit status"),
                fin("ended without an exit status"),
            ]),
        ),
        row(
            "scheduled + exited(0) -> finished: a short command may beat its own events",
            task(Scheduled),
            exit(Some(0), None),
            s(vec![
                Step::RecordExitCode(Some(0)),
                to(Finished, "exited with code 0"),
                fin("exited with code 0"),
            ]),
        ),
        row(
            "released + exited -> the stop is confirmed: free the room, no new state",
            task(Released),
            exit(None, Some(15)),
            s(vec![fin("released")]),
        ),
        stopping_row(
            "running, preemption stop awaited + exited(SIGTERM) -> preempted -> queued, resuming from the checkpoint",
            with(task(Running), |r| r.checkpoint = Some("/ck/step-3".into())),
            preempting(),
            exit(None, Some(15)),
            s([
                vec![Step::ForgetStop],
                back_to_queue(
                    "room for inference",
                    "requeued; resumes from checkpoint /ck/step-3",
                ),
            ]
            .concat()),
        ),
        stopping_row(
            "running, reclaim stop awaited + exited -> released for good, free the allocation",
            task(Running),
            reclaiming(),
            exit(Some(0), None),
            s(vec![
                Step::ForgetStop,
                to(Released, "idle for 30 min"),
                fin("idle for 30 min"),
            ]),
        ),
        stopping_row(
            "released while a preemption stop was awaited + exited -> the release wins",
            task(Released),
            preempting(),
            exit(None, Some(15)),
            s(vec![fin("released")]),
        ),
        row(
            "finished + exited -> ignored: terminal (its actor has stopped)",
            task(Finished),
            exit(Some(0), None),
            Outcome::Ignored("the task has ended"),
        ),
        row(
            "failed + started -> ignored: terminal",
            with(task(Failed), |r| r.allocation = Some(alloc("a1", "n1"))),
            news(WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(1),
                port: None
            }),
            Outcome::Ignored("the task has ended"),
        ),
        row(
            "cancelled + released -> ignored: terminal",
            task(Cancelled),
            Input::ReleaseRequested {
                by: "alice",
                node_connected: true,
            },
            Outcome::Ignored("the task has ended"),
        ),
    ]);
}

#[test]
fn release() {
    let released = |last: Step| {
        s(vec![
            to(Released, "released by alice"),
            stop("released"),
            last,
        ])
    };
    let by_alice = Input::ReleaseRequested {
        by: "alice",
        node_connected: true,
    };
    check(vec![
        row(
            "queued + release -> cancelled: leave the queue, nothing to free",
            task(Queued),
            by_alice,
            s(vec![
                Step::Dequeue,
                to(Cancelled, "released by alice before it was placed"),
                Step::Leave,
            ]),
        ),
        row(
            "preempted + release -> cancelled",
            task(Preempted),
            by_alice,
            s(vec![
                Step::Dequeue,
                to(Cancelled, "released by alice before it was placed"),
                Step::Leave,
            ]),
        ),
        row(
            "running + release -> released, stop the workload, free the room when it exits",
            task(Running),
            by_alice,
            released(Step::AwaitRelease),
        ),
        row(
            "running reservation + release -> released and freed now: nothing runs to confirm a stop",
            with(task(Running), |r| r.spec.command.clear()),
            by_alice,
            released(fin("released")),
        ),
        row(
            "running on a node without an actor + release -> freed now: no one would confirm",
            task(Running),
            Input::ReleaseRequested {
                by: "alice",
                node_connected: false,
            },
            released(fin("released")),
        ),
        row(
            "scheduled + release -> freed now: the start command may not have arrived",
            task(Scheduled),
            by_alice,
            released(fin("released")),
        ),
        row(
            "released + release -> ignored: answered with the record as it is",
            task(Released),
            by_alice,
            Outcome::Ignored("already released"),
        ),
        row(
            "released + release deadline -> free the room anyway",
            task(Released),
            Input::ReleaseOverdue,
            s(vec![fin("released; stop not confirmed in time")]),
        ),
    ]);
}

#[test]
fn preemption_and_reclaim() {
    check(vec![
        row(
            "running + preempt -> announce, SIGTERM, await the exit (it saves a checkpoint)",
            task(Running),
            preempt(),
            s(vec![
                announce_preemption(),
                stop("preempted by svc.r0"),
                Step::AwaitStop(preempting().unwrap()),
            ]),
        ),
        row(
            "ready + preempt -> straight back to the queue: nothing ran, nothing to save",
            task(Ready),
            preempt(),
            s([
                vec![announce_preemption(), stop("preempted before it ran")],
                back_to_queue("room for inference", STARTS_OVER),
            ]
            .concat()),
        ),
        stopping_row(
            "running, stop already awaited + preempt -> ignored: one stop at a time",
            task(Running),
            reclaiming(),
            preempt(),
            Outcome::Ignored("not this allocation, or a stop is already under way"),
        ),
        row(
            "running + preempt of allocation a0 -> ignored: an older attempt",
            task(Running),
            Input::Preempt {
                allocation_id: "a0",
                by: "svc.r0",
                reason: "room",
                stop_grace_ms: 10_000,
            },
            Outcome::Ignored("not this allocation, or a stop is already under way"),
        ),
        row(
            // Released keeps its allocation until the stop is confirmed, so the
            // scheduler may still pick it as a victim; requeueing it would bring
            // a released task back (and its release deadline would then stop
            // its actor with the record left Queued).
            "released + preempt -> ignored: its room is already on its way back",
            task(Released),
            preempt(),
            Outcome::Ignored("released: its room is already on its way back"),
        ),
        stopping_row(
            "running, preemption stop overdue -> preempted -> queued anyway",
            task(Running),
            preempting(),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            s([
                vec![Step::ForgetStop],
                back_to_queue("stop not confirmed in time", STARTS_OVER),
            ]
            .concat()),
        ),
        stopping_row(
            // Released while a preemption's stop was awaited: the release's own
            // deadline frees the room; the preemption's must not requeue it.
            "released while a preemption stop was awaited, stop overdue -> ignored",
            task(Released),
            preempting(),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            Outcome::Ignored("released: its room is already on its way back"),
        ),
        stopping_row(
            "released while a reclaim stop was awaited, stop overdue -> ignored: no second Released",
            task(Released),
            reclaiming(),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            Outcome::Ignored("released: its room is already on its way back"),
        ),
        stopping_row(
            "running, reclaim stop overdue -> released anyway, free the allocation",
            task(Running),
            reclaiming(),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            s(vec![
                Step::ForgetStop,
                to(Released, "idle for 30 min; stop not confirmed in time"),
                fin("reclaimed"),
            ]),
        ),
        row(
            "running, no stop awaited, stop deadline -> ignored: the exit came first",
            task(Running),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            Outcome::Ignored("no stop was asked for"),
        ),
        stopping_row(
            "queued again (allocation gone), old stop deadline -> ignored",
            task(Queued),
            preempting(),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            Outcome::Ignored("an older attempt's stop"),
        ),
        row(
            "running + reclaim -> checkpoint requested, SIGTERM, await the exit",
            task(Running),
            reclaim(),
            s(vec![
                Step::Record {
                    kind: EventKind::CheckpointRequested,
                    message: "checkpoint requested from t1: idle for 30 min".into(),
                },
                stop("idle for 30 min"),
                Step::AwaitStop(reclaiming().unwrap()),
            ]),
        ),
        row(
            "running idle-exempt + reclaim -> ignored: a warm standby is never reclaimed",
            with(task(Running), |r| r.spec.idle_exempt = true),
            reclaim(),
            Outcome::Ignored("not reclaimable now"),
        ),
        row(
            "running replica + reclaim -> its service decides (it keeps its minimum)",
            with(task(Running), |r| r.service = Some("svc".into())),
            reclaim(),
            s(vec![Step::AskServiceToScaleIn {
                reason: "idle for 30 min".into(),
            }]),
        ),
        row(
            "released + reclaim -> ignored: it no longer holds an allocation",
            task(Released),
            reclaim(),
            Outcome::Ignored("not reclaimable now"),
        ),
        stopping_row(
            "running, preemption stop awaited + reclaim -> ignored: one stop at a time",
            task(Running),
            preempting(),
            reclaim(),
            Outcome::Ignored("not reclaimable now"),
        ),
    ]);
}

#[test]
fn node_loss_and_retry_budget() {
    // Its lease is over already (or it is a `replace` task): requeued at once.
    let n1_lost = Input::NodeLost {
        node: "n1",
        fence_wait_ms: 0,
        now_ms: 1_000,
    };
    let requeued = |why: &str| {
        s(vec![
            Step::ForgetStop,
            free(why),
            Step::CountNodeLoss,
            Step::Unbind,
            to(Queued, &format!("{why}; requeued")),
            Step::Enqueue,
        ])
    };
    let spent = |why: &str, budget: u32| {
        let failed = format!("{why}; retry budget of {budget} spent");
        s(vec![
            Step::ForgetStop,
            free(why),
            Step::CountNodeLoss,
            failure(&failed),
            to(Failed, &failed),
            Step::Leave,
        ])
    };
    check(vec![
        row(
            "running + node lost, first loss of budget 3 -> queued again",
            task(Running),
            n1_lost,
            requeued("node n1 lost"),
        ),
        row(
            "running + node lost, third loss of budget 3 -> queued: the budget allows 3",
            with(task(Running), |r| r.node_losses = 2),
            n1_lost,
            requeued("node n1 lost"),
        ),
        row(
            "running + node lost, fourth loss of budget 3 -> failed, 'retry budget of 3 spent'",
            with(task(Running), |r| r.node_losses = 3),
            n1_lost,
            spent("node n1 lost", 3),
        ),
        row(
            "running with max_retries 0 + node lost -> failed at the first loss",
            with(task(Running), |r| r.spec.max_retries = Some(0)),
            n1_lost,
            spent("node n1 lost", 0),
        ),
        stopping_row(
            "running, preemption stop awaited + node lost -> requeued; the stop is moot",
            task(Running),
            preempting(),
            n1_lost,
            requeued("node n1 lost"),
        ),
        row(
            "running on n1 + node n2 lost -> ignored",
            task(Running),
            Input::NodeLost {
                node: "n2",
                fence_wait_ms: 0,
                now_ms: 1_000,
            },
            Outcome::Ignored("the task holds nothing on that node"),
        ),
        row(
            "queued + node lost -> ignored: it holds nothing",
            task(Queued),
            n1_lost,
            Outcome::Ignored("the task holds nothing on that node"),
        ),
        row(
            "released + node lost -> free the room: no exit will ever come",
            task(Released),
            n1_lost,
            s(vec![fin("released; node lost")]),
        ),
        row(
            "scheduled + workload missing after hello -> dispatch again: it never started",
            task(Scheduled),
            Input::WorkloadMissing { node: "n1" },
            s(vec![Step::Dispatch]),
        ),
        row(
            "running + workload missing after hello (its agent restarted), budget spent -> \
             queued again: an agent restart is not the workload's failure, no retry spent",
            with(task(Running), |r| r.node_losses = 3),
            Input::WorkloadMissing { node: "n1" },
            s(vec![
                Step::ForgetStop,
                free("workload vanished from node n1"),
                Step::Unbind,
                to(Queued, "workload vanished from node n1; requeued"),
                Step::Enqueue,
            ]),
        ),
        row(
            "released + workload missing -> free the room: the workload is gone",
            task(Released),
            Input::WorkloadMissing { node: "n1" },
            s(vec![fin("released")]),
        ),
        row(
            "queued + workload missing -> ignored",
            task(Queued),
            Input::WorkloadMissing { node: "n1" },
            Outcome::Ignored("the task holds no allocation"),
        ),
        row(
            "scheduled + dispatch failed, losses 3 of 3 -> queued: nothing ran, no retry spent",
            with(task(Scheduled), |r| r.node_losses = 3),
            Input::DispatchFailed {
                node: "n1",
                why: "node has no live session",
                retry_in_ms: 500,
            },
            s(vec![
                Step::ForgetStop,
                free("could not dispatch to n1: node has no live session"),
                Step::Unbind,
                to(
                    Queued,
                    "could not dispatch to n1: node has no live session; requeued, asks for room again in 500 ms",
                ),
                Step::EnqueueAfter { delay_ms: 500 },
            ]),
        ),
    ]);
}

#[test]
fn preparing_timeout() {
    let why = "stuck in preparing for 300s on node n1 (preparing timeout)";
    check(vec![
        row(
            "preparing past the timeout -> failed, saying where it was stuck",
            task(Preparing),
            Input::PreparingTimeout {
                attempt: 1,
                after_secs: 300,
            },
            s(vec![stop(why), failure(why), to(Failed, why), fin(why)]),
        ),
        row(
            "scheduled past the timeout -> failed: the node never began",
            task(Scheduled),
            Input::PreparingTimeout {
                attempt: 1,
                after_secs: 300,
            },
            s(vec![
                stop("stuck in scheduled for 300s on node n1 (preparing timeout)"),
                failure("stuck in scheduled for 300s on node n1 (preparing timeout)"),
                to(
                    Failed,
                    "stuck in scheduled for 300s on node n1 (preparing timeout)",
                ),
                fin("stuck in scheduled for 300s on node n1 (preparing timeout)"),
            ]),
        ),
        row(
            "running + preparing timer -> ignored: it got past preparing",
            task(Running),
            Input::PreparingTimeout {
                attempt: 1,
                after_secs: 300,
            },
            Outcome::Ignored("past preparing, or a later attempt"),
        ),
        row(
            "preparing attempt 2 + timer of attempt 1 -> ignored: a later attempt has its own",
            with(task(Preparing), |r| r.attempts = 2),
            Input::PreparingTimeout {
                attempt: 1,
                after_secs: 300,
            },
            Outcome::Ignored("past preparing, or a later attempt"),
        ),
    ]);
}

fn time_is_up() -> Input<'static> {
    Input::TimeLimit {
        allocation_id: "a1",
        limit: "00:00:02",
        stop_grace_ms: 10_000,
    }
}

fn over_time() -> Option<Stopping> {
    Some(Stopping::TimeLimit {
        limit: "00:00:02".into(),
    })
}

#[test]
fn time_limit() {
    let past = "time_limit: ran past its duration of 00:00:02";
    let released = "time limit of 00:00:02 reached: the reservation is released";
    let failed_past = |code| {
        s(vec![
            Step::ForgetStop,
            Step::RecordExitCode(code),
            failure(past),
            to(Failed, past),
            fin(past),
        ])
    };
    check(vec![
        row(
            "running past its limit -> asked to checkpoint (SIGTERM), the stop awaited",
            task(Running),
            time_is_up(),
            s(vec![
                Step::Announce(vec![(
                    EventKind::CheckpointRequested,
                    "time limit of 00:00:02 reached for t1: SIGTERM, then 10000 ms to save before SIGKILL".into(),
                )]),
                stop("time limit of 00:00:02 reached"),
                Step::AwaitStop(Stopping::TimeLimit {
                    limit: "00:00:02".into(),
                }),
            ]),
        ),
        row(
            "a reservation past its limit -> released at once: it runs nothing to save",
            with(task(Running), |r| r.spec.command.clear()),
            time_is_up(),
            s(vec![to(Released, released), stop(released), fin(released)]),
        ),
        stopping_row(
            "stopped for its limit, exits 0 after saving -> still failed: time_limit",
            task(Running),
            over_time(),
            exit(Some(0), None),
            failed_past(Some(0)),
        ),
        stopping_row(
            "stopped for its limit, killed by SIGKILL after the grace -> failed: time_limit",
            task(Running),
            over_time(),
            exit(None, Some(9)),
            failed_past(None),
        ),
        stopping_row(
            "the limit's stop is never confirmed -> failed anyway when its deadline passes",
            task(Running),
            over_time(),
            Input::StopOverdue { allocation_id: "a1" },
            failed_past(None),
        ),
        row(
            "the limit of an earlier run (a2 ran before a requeue) -> ignored",
            task(Running),
            Input::TimeLimit {
                allocation_id: "a2",
                limit: "00:00:02",
                stop_grace_ms: 10_000,
            },
            Outcome::Ignored("not this run, or it is not running"),
        ),
        row(
            "the limit while still preparing -> ignored: the clock starts at running",
            task(Preparing),
            time_is_up(),
            Outcome::Ignored("not this run, or it is not running"),
        ),
        stopping_row(
            "the limit while a preemption's stop is under way -> ignored: that stop decides",
            task(Running),
            preempting(),
            time_is_up(),
            Outcome::Ignored("a stop is already under way"),
        ),
    ]);
}

#[test]
fn record_steps_change_only_the_record() {
    let mut r = with(task(Queued), |r| r.pending_reason = Some("no room".into()));
    r.estimated_start_ms = Some(5);
    crate::lifecycle::bind(&mut r, &alloc("a2", "n2"));
    assert_eq!(r.attempts, 1, "a grant is one more attempt");
    assert_eq!(r.pending_reason, None);
    assert_eq!(r.estimated_start_ms, None);
    assert!(apply_to_record(&mut r, &Step::CountNodeLoss));
    assert!(apply_to_record(&mut r, &Step::Unbind));
    assert_eq!((r.node_losses, r.allocation.is_none()), (1, true));
    // Steps with effects outside the record are the actor's.
    assert!(!apply_to_record(&mut r, &Step::Enqueue));
    assert_eq!(
        r.state, Queued,
        "entering a state is never a record-only step"
    );
}

#[test]
fn final_state_is_the_last_entered() {
    let out = decide(
        &task(Ready),
        None,
        Input::Preempt {
            allocation_id: "a1",
            by: "svc.r0",
            reason: "room",
            stop_grace_ms: 1,
        },
    );
    assert_eq!(out.final_state(), Some(Queued));
    assert_eq!(Outcome::Ignored("x").final_state(), None);
}

#[test]
fn the_first_estimate_is_kept_and_the_first_placement_measures_it() {
    let mut r = task(Queued);
    let note = |ms| Step::NotePending {
        reason: "no room".into(),
        estimated_start_ms: Some(ms),
    };
    assert!(apply_to_record(&mut r, &note(50_000)));
    assert!(apply_to_record(&mut r, &note(70_000)));
    assert_eq!(
        r.first_estimate_ms,
        Some(50_000),
        "later estimates do not replace it"
    );
    let mut a = alloc("a1", "n1");
    a.created_ms = 110_000;
    crate::lifecycle::bind(&mut r, &a);
    assert_eq!(
        r.estimate_error_ms,
        Some(60_000),
        "placed 60 s after the first estimate"
    );
    // A requeue and a second placement do not measure again.
    assert!(apply_to_record(&mut r, &note(200_000)));
    a.created_ms = 900_000;
    crate::lifecycle::bind(&mut r, &a);
    assert_eq!(
        (r.first_estimate_ms, r.estimate_error_ms),
        (Some(50_000), Some(60_000))
    );
}
