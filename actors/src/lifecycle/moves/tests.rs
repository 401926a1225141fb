//! Fences and drains, row by row (the helpers are the lifecycle table's).
use super::super::tests::{
    check, exit, failure, fin, free, leak, preempting, row, s, spec, stop, stopping_row, task, to,
    with,
};
use super::super::*;
use caldera_spec::wire::ExitStatus;
use caldera_spec::OnNodeLoss;
use TaskState::*;

/// Node n1 lost at 1000 ms; its lease plus the stop grace runs out 32 s later.
fn lost_with_lease_left() -> Input<'static> {
    Input::NodeLost {
        node: "n1",
        fence_wait_ms: 32_000,
        now_ms: 1_000,
    }
}

fn fence_over() -> Input<'static> {
    Input::FenceOver {
        allocation_id: "a1",
    }
}

fn drain() -> Input<'static> {
    Input::Drain {
        allocation_id: "a1",
        node: "n1",
        stop_grace_ms: 10_000,
    }
}

fn draining() -> Option<Stopping> {
    Some(Stopping::Drained { node: "n1".into() })
}

fn fenced(r: TaskRecord) -> TaskRecord {
    with(r, |r| r.fenced_until_ms = Some(33_000))
}

/// A reservation (no command) in `state`, holding a1 on n1.
fn reservation(state: TaskState) -> TaskRecord {
    with(task(state), |r| r.spec.command.clear())
}

/// Requeued at once after a loss, one retry spent.
fn requeued_now(why: &str) -> Vec<Step> {
    vec![
        Step::ForgetStop,
        free(why),
        Step::CountNodeLoss,
        Step::Unbind,
        to(Queued, &format!("{why}; requeued")),
        Step::Enqueue,
    ]
}

/// Requeued after a planned stop: no retry counted.
fn planned(why: &str, resume: &str) -> Vec<Step> {
    vec![
        free(why),
        Step::Unbind,
        to(
            Queued,
            &format!("{why}; requeued (planned, no retry spent){resume}"),
        ),
        Step::Enqueue,
    ]
}

#[test]
fn a_lost_node_fences_training_and_replaces_inference() {
    let notice = "node n1 lost; waiting 32.0 s for its lease to run out before starting elsewhere";
    let fence = s(vec![
        Step::ForgetStop,
        free("node n1 lost"),
        Step::Fence { until_ms: 33_000 },
        Step::NotePending {
            reason: notice.into(),
            estimated_start_ms: Some(33_000),
        },
        Step::Record {
            kind: EventKind::NodeFenced,
            message: notice.into(),
        },
    ]);
    check(vec![
        row(
            "training (fence by default) + node lost with 32 s of lease left -> waits for the \
             fence: its room goes back, it is requeued only when the old copy has stopped",
            task(Running),
            lost_with_lease_left(),
            fence.clone(),
        ),
        row(
            "a reservation (fence by default) + node lost -> waits for the fence too",
            reservation(Running),
            lost_with_lease_left(),
            fence,
        ),
        row(
            "inference (replace by default) + node lost -> requeued at once, lease or not",
            with(task(Running), |r| {
                r.spec = spec(r#","command":["serve"]"#);
                r.spec.task_type = caldera_spec::TaskType::Inference;
            }),
            lost_with_lease_left(),
            s(requeued_now("node n1 lost")),
        ),
        row(
            "training that asked for on_node_loss replace + node lost -> requeued at once",
            with(task(Running), |r| {
                r.spec.on_node_loss = Some(OnNodeLoss::Replace)
            }),
            lost_with_lease_left(),
            s(requeued_now("node n1 lost")),
        ),
        row(
            "fenced + node lost again -> ignored: one fence at a time",
            fenced(task(Running)),
            lost_with_lease_left(),
            Outcome::Ignored("already waiting for the fence"),
        ),
    ]);
}

#[test]
fn the_fence_ends_in_a_requeue() {
    let why = "node n1 lost; its lease ran out";
    let mut over = vec![Step::Unfence];
    over.extend(requeued_now(why));
    let spent = format!("{why}; retry budget of 3 spent");
    check(vec![
        row(
            "fenced + fence over -> requeued, one retry spent (a lost node is a failure)",
            fenced(task(Running)),
            fence_over(),
            s(over),
        ),
        row(
            "fenced with its budget spent + fence over -> failed",
            with(fenced(task(Running)), |r| r.node_losses = 3),
            fence_over(),
            s(vec![
                Step::Unfence,
                Step::ForgetStop,
                free(why),
                Step::CountNodeLoss,
                failure(&spent),
                to(Failed, &spent),
                Step::Leave,
            ]),
        ),
        row(
            "released while fenced + fence over -> ends: nothing will ever report",
            fenced(task(Released)),
            fence_over(),
            s(vec![Step::Unfence, fin("released; node lost")]),
        ),
        row(
            "not fenced + fence over -> ignored (a timer of an earlier fence)",
            task(Running),
            fence_over(),
            Outcome::Ignored("no fence of this allocation"),
        ),
    ]);
}

#[test]
fn a_drain_is_a_planned_stop_that_spends_no_retry() {
    let why = "node n1 drained";
    let mut at_once = vec![stop(why)];
    at_once.extend(planned(why, ""));
    let mut after_exit = vec![Step::ForgetStop];
    after_exit.extend(planned(why, "; resumes from checkpoint ck/step-9"));
    let overdue = "node n1 drained; stop not confirmed in time";
    let mut after_overdue = vec![Step::ForgetStop];
    after_overdue.extend(planned(overdue, ""));
    check(vec![
        row(
            "running training + drain -> asked to checkpoint (SIGTERM, grace), stop awaited",
            task(Running),
            drain(),
            s(vec![
                Step::Announce(vec![(
                    EventKind::CheckpointRequested,
                    "node n1 is draining: checkpoint requested from t1: SIGTERM, then 10000 ms \
                     to save before SIGKILL"
                        .into(),
                )]),
                stop(why),
                Step::AwaitStop(Stopping::Drained { node: "n1".into() }),
            ]),
        ),
        stopping_row(
            "drained, its budget spent, + killed by SIGTERM -> queued, resuming from its \
             checkpoint: no retry spent",
            with(task(Running), |r| {
                r.node_losses = 3;
                r.checkpoint = Some("ck/step-9".into());
            }),
            draining(),
            exit(None, Some(15)),
            s(after_exit),
        ),
        stopping_row(
            "drained + the stop never confirmed -> queued anyway",
            task(Running),
            draining(),
            Input::StopOverdue {
                allocation_id: "a1",
            },
            s(after_overdue),
        ),
        row(
            "a held reservation + drain -> placed again at once: it runs nothing to save",
            reservation(Running),
            drain(),
            s(at_once.clone()),
        ),
        row(
            "scheduled (not running yet) + drain -> placed again at once",
            task(Scheduled),
            drain(),
            s(at_once),
        ),
        stopping_row(
            "a preemption stop awaited + drain -> ignored: one stop at a time",
            task(Running),
            preempting(),
            drain(),
            Outcome::Ignored("not this allocation, or a stop is already under way"),
        ),
        row(
            "released + drain -> ignored",
            task(Released),
            drain(),
            Outcome::Ignored(RELEASING),
        ),
    ]);
}

#[test]
fn an_agent_that_stops_its_workload_on_shutdown_is_a_planned_stop() {
    let why = "stopped by the agent of node n1 as it shut down";
    let stopped_by_agent = Input::Workload {
        allocation_id: "a1",
        node_address: "10.0.0.5",
        kind: leak(WorkloadEventKind::Exited(ExitStatus {
            code: None,
            signal: Some(15),
            stopped: true,
            oom_killed: false,
        })),
    };
    check(vec![
        row(
            "running, no stop asked + exit 'stopped' by SIGTERM with max_retries 10 -> queued, \
             not 'failed: killed by signal 15'",
            with(task(Running), |r| r.spec.max_retries = Some(10)),
            stopped_by_agent,
            s(planned(why, "")),
        ),
        row(
            "running + killed by a signal nobody asked for -> still failed: a crash",
            task(Running),
            exit(None, Some(9)),
            s(vec![
                Step::RecordExitCode(None),
                failure("killed by signal 9"),
                to(Failed, "killed by signal 9"),
                fin("killed by signal 9"),
            ]),
        ),
    ]);
}
