//! The task lifecycle as one pure table: given a task's record, the stop the
//! control plane is waiting for (if any) and one thing that happened, [`decide`]
//! answers what happens next — the states entered and the actions to take, in
//! order, as data. TaskActor only carries the steps out, so this file is the one
//! place the lifecycle lives (see DESIGN.md, "Task lifecycle").
//!
//! Pure: no actix, no clock, no I/O. Everything a decision depends on is in the
//! record or the input; the texts of the transitions are decided here too,
//! because they are what a user reads in `caldera events`.
//!
//! A TaskActor stops in the same handler that makes its task Finished, Failed or
//! Cancelled (actix handles no message and fires no timer once an actor stops),
//! so those states never see an input; Released is terminal too but its actor
//! lives on until the stop is confirmed or overdue.
use caldera_spec::wire::{ExitStatus, WorkloadEventKind};
use caldera_spec::{Allocation, EventKind, TaskRecord, TaskState};

mod dispatch;
mod moves;
mod preparing;
pub mod replica_moves;
mod serving;
pub mod swap_steps;
#[cfg(test)]
mod tests;
mod warming;

pub use dispatch::dispatch_backoff;
pub use moves::fence_notice;
use moves::{drain, fence_over, node_lost, requeue_planned};
pub use warming::reading;

/// A stop the control plane asked for, and what follows the workload's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopping {
    /// Back to the queue, to resume from the latest checkpoint.
    Preempted { by: String, reason: String },
    /// Idle too long: the room goes back to the pool for good.
    Reclaimed { reason: String },
    /// Ran past its declared `duration` (plus the grace): it fails with
    /// reason `time_limit`, like Slurm's `--time`. `limit` is the duration as
    /// the user wrote it.
    TimeLimit { limit: String },
    /// Its node is being drained (a planned stop): back to the queue to
    /// resume from the latest checkpoint, no retry spent.
    Drained { node: String },
}

/// Something that happened to a task: a message to its actor, an answer to
/// one of its requests, or one of its timers.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// The scheduler granted `allocation`; `note` says what else explains it.
    Placed {
        allocation: &'a Allocation,
        note: Option<&'static str>,
    },
    /// The scheduler says why the task still waits.
    Pending {
        reason: &'a str,
        estimated_start_ms: Option<u64>,
    },
    /// The node reported this about the workload of `allocation_id`.
    Workload {
        allocation_id: &'a str,
        kind: &'a WorkloadEventKind,
        /// Where the reporting node is reached (its replicas' endpoints).
        node_address: &'a str,
    },
    /// A user or the data platform released the task. `node_connected`: the
    /// allocation's node has an actor to carry the stop (else nothing will
    /// ever confirm it).
    ReleaseRequested { by: &'a str, node_connected: bool },
    /// The scheduler chose the allocation as a preemption victim.
    /// `stop_grace_ms` is quoted in the event the workload's owner reads.
    Preempt {
        allocation_id: &'a str,
        by: &'a str,
        reason: &'a str,
        stop_grace_ms: u64,
    },
    /// The idle inspector reclaims the allocation.
    Reclaim {
        allocation_id: &'a str,
        reason: &'a str,
    },
    /// `node` was declared lost. `fence_wait_ms`: how long until the lease
    /// the control plane last renewed there, plus the stop grace, has run out
    /// (0: already); `now_ms` dates the fence.
    NodeLost {
        node: &'a str,
        fence_wait_ms: u64,
        now_ms: u64,
    },
    /// The fence armed when the node of `allocation_id` was lost is over:
    /// the old copy has stopped by itself.
    FenceOver { allocation_id: &'a str },
    /// The node of `allocation_id` is being drained (an operator's drain, or
    /// its agent stopping): move the work away as a planned stop.
    Drain {
        allocation_id: &'a str,
        node: &'a str,
        stop_grace_ms: u64,
    },
    /// `node` said hello again without this task's workload.
    WorkloadMissing { node: &'a str },
    /// The start command could not be handed to `node`; the task asks for
    /// room again in `retry_in_ms` ([`dispatch_backoff`]).
    DispatchFailed {
        node: &'a str,
        why: &'a str,
        retry_in_ms: u64,
    },
    /// The preparing timer armed for `attempt` ran out after `after_secs`.
    PreparingTimeout { attempt: u32, after_secs: u64 },
    /// The warming timer armed for `attempt` ran out after `after_secs`;
    /// `reading` says what it was reading last ([`reading`]).
    WarmingTimeout {
        attempt: u32,
        after_secs: u64,
        reading: &'a str,
    },
    /// The deadline of a requested stop of `allocation_id` passed.
    StopOverdue { allocation_id: &'a str },
    /// The deadline of a release's stop passed.
    ReleaseOverdue,
    /// The time limit (declared `duration` + `scheduling.time-limit-grace-ms`) of the
    /// run of `allocation_id` passed. `limit` is the duration as written.
    TimeLimit {
        allocation_id: &'a str,
        limit: &'a str,
        stop_grace_ms: u64,
    },
}

/// One thing to do, in the order [`decide`] lists them.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Take the granted allocation and enter Scheduled ([`bind`], then the
    /// transition), recorded by the Scheduler in the grant's one batch. The
    /// steps after it run once that is done; none run if it is refused (the
    /// task stays queued, and the Scheduler queues it again).
    Grant {
        allocation: Allocation,
        reason: String,
    },
    /// Hand a grant back unused (the task no longer waits).
    Decline {
        allocation_id: String,
        reason: String,
    },
    /// Persist the new state with an event (and tell a service its replica moved).
    Enter {
        state: TaskState,
        reason: Option<String>,
    },
    /// Send the start command to the allocation's node, once the latest
    /// transition is durable; arms the preparing timer.
    Dispatch,
    /// Ask the scheduler for room.
    Enqueue,
    /// Ask the scheduler for room after `delay_ms`, if the task still waits
    /// then (a failed dispatch backs off).
    EnqueueAfter { delay_ms: u64 },
    /// Leave the scheduler's queue.
    Dequeue,
    /// Return the task's allocation to the pool.
    Free { reason: String },
    /// Forget the allocation: the task waits for a new one.
    Unbind,
    /// Ask the node to stop the workload (SIGTERM, grace, SIGKILL).
    StopWorkload { reason: String },
    /// Remember why the stop was asked for and arm its deadline.
    AwaitStop(Stopping),
    /// The stop that was awaited is over (or moot).
    ForgetStop,
    /// A lost node spent one retry.
    CountNodeLoss,
    /// Wait before requeueing: the lost node may still run the workload
    /// until its lease runs out. Remember `until_ms` and arm a timer for it.
    Fence { until_ms: u64 },
    /// The fence is over (or moot).
    Unfence,
    /// One more preemption in the task's history.
    CountPreemption,
    /// Why the task failed, for the record (a code recorded before is cleared).
    RecordFailure(String),
    /// The failure's number in `caldera_spec::codes` (after its `RecordFailure`).
    RecordFailureCode(u32),
    /// The latest progress of the image's pull while Preparing.
    NotePull(caldera_spec::container::PullProgress),
    /// The digest of the image the container runs, on the allocation.
    RecordImageDigest(String),
    /// The workload's exit code, for the record.
    RecordExitCode(Option<i32>),
    /// Why the task waits, and when it is expected to start.
    NotePending {
        reason: String,
        estimated_start_ms: Option<u64>,
    },
    /// The workload saved a checkpoint: the next start resumes from `path`.
    SaveCheckpoint { path: String },
    /// The running process is reached at `endpoint` (None: it has no
    /// port); not ready until its readiness says so.
    Serve {
        endpoint: Option<caldera_spec::Endpoint>,
    },
    /// The running generation's readiness changed.
    SetReady(bool),
    /// The node swapped the workload in place: `generation` serving `model` runs.
    RecordSwap { generation: u32, model: String },
    /// Append events that do not change the record.
    Announce(Vec<(EventKind, String)>),
    /// Persist the record with one event.
    Record { kind: EventKind, message: String },
    /// A replica is idle: its service decides whether to scale in.
    AskServiceToScaleIn { reason: String },
    /// Arm the deadline after which a release frees the room anyway.
    AwaitRelease,
    /// Terminal: free the room, leave the directory, stop the actor.
    Finish { reason: String },
    /// Terminal without freeing (the room was freed already, or never held):
    /// leave the directory, stop the actor.
    Leave,
}

/// What [`decide`] answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Nothing happens; the text says why.
    Ignored(&'static str),
    /// Carry these out, in order.
    Steps(Vec<Step>),
}

impl Outcome {
    /// The last state entered, if any (what `caldera status` shows afterwards).
    pub fn final_state(&self) -> Option<TaskState> {
        match self {
            Outcome::Ignored(_) => None,
            Outcome::Steps(steps) => steps.iter().rev().find_map(|s| match s {
                Step::Enter { state, .. } => Some(*state),
                Step::Grant { .. } => Some(TaskState::Scheduled),
                _ => None,
            }),
        }
    }
}

/// The next state of a task and the actions to take, for one input.
pub fn decide(rec: &TaskRecord, stopping: Option<&Stopping>, input: Input<'_>) -> Outcome {
    let state = rec.state;
    // A grant can cross a release in the mailboxes (the scheduler placed the
    // task while it was being cancelled): it is handed back even to an ended
    // task, or its room would stay taken for good.
    if let Input::Placed { allocation, note } = input {
        return placed(state, allocation, note);
    }
    if state.is_terminal() && state != TaskState::Released {
        return Outcome::Ignored("the task has ended");
    }
    match input {
        Input::Placed { allocation, note } => placed(state, allocation, note),
        Input::Pending {
            reason,
            estimated_start_ms,
        } => pending(state, reason, estimated_start_ms),
        Input::Workload { allocation_id, .. } if !holds(rec, allocation_id) => {
            Outcome::Ignored("an older attempt's news")
        }
        Input::Workload {
            kind, node_address, ..
        } => workload(rec, stopping, kind, node_address),
        Input::ReleaseRequested { by, node_connected } => release(rec, by, node_connected),
        Input::Preempt {
            allocation_id,
            by,
            reason,
            stop_grace_ms,
        } => preempt(rec, stopping, allocation_id, (by, reason), stop_grace_ms),
        Input::Reclaim {
            allocation_id,
            reason,
        } => reclaim(rec, stopping, allocation_id, reason),
        Input::NodeLost {
            node,
            fence_wait_ms,
            now_ms,
        } => node_lost(rec, node, fence_wait_ms, now_ms),
        Input::FenceOver { allocation_id } => fence_over(rec, allocation_id),
        Input::Drain {
            allocation_id,
            node,
            stop_grace_ms,
        } => drain(rec, stopping, allocation_id, node, stop_grace_ms),
        Input::WorkloadMissing { node } => workload_missing(rec, node),
        Input::DispatchFailed {
            node,
            why,
            retry_in_ms,
        } => dispatch::dispatch_failed(rec, node, why, retry_in_ms),
        Input::PreparingTimeout {
            attempt,
            after_secs,
        } => preparing::timeout(rec, attempt, after_secs),
        Input::WarmingTimeout {
            attempt,
            after_secs,
            reading,
        } => warming::timeout(rec, attempt, after_secs, reading),
        Input::StopOverdue { allocation_id } => stop_overdue(rec, stopping, allocation_id),
        Input::ReleaseOverdue => steps(vec![finish("released; stop not confirmed in time")]),
        Input::TimeLimit {
            allocation_id,
            limit,
            stop_grace_ms,
        } => time_limit(rec, stopping, allocation_id, limit, stop_grace_ms),
    }
}

/// Why a task that ran past its limit failed, as its record says.
fn past_limit(limit: &str) -> String {
    format!("time_limit: ran past its duration of {limit}")
}

/// The time limit of a running task passed. A reservation is released (it
/// runs nothing to save); a workload is asked to checkpoint (SIGTERM), given
/// the stop grace, then stopped, and fails with reason `time_limit`.
fn time_limit(
    rec: &TaskRecord,
    stopping: Option<&Stopping>,
    allocation_id: &str,
    limit: &str,
    stop_grace_ms: u64,
) -> Outcome {
    if !holds(rec, allocation_id) || rec.state != TaskState::Running {
        return Outcome::Ignored("not this run, or it is not running");
    }
    if stopping.is_some() {
        return Outcome::Ignored("a stop is already under way");
    }
    let id = &rec.spec.task_id;
    if rec.spec.is_reservation() {
        let why = format!("time limit of {limit} reached: the reservation is released");
        return steps(vec![
            enter(TaskState::Released, why.clone()),
            Step::StopWorkload {
                reason: why.clone(),
            },
            finish(why),
        ]);
    }
    steps(vec![
        Step::Announce(vec![(
            EventKind::CheckpointRequested,
            format!(
                "time limit of {limit} reached for {id}: SIGTERM, then {stop_grace_ms} ms to save before SIGKILL"
            ),
        )]),
        Step::StopWorkload {
            reason: format!("time limit of {limit} reached"),
        },
        Step::AwaitStop(Stopping::TimeLimit {
            limit: limit.to_string(),
        }),
    ])
}

/// A run stopped for its time limit ends failed, whatever its exit said.
fn failed_past_limit(limit: &str, code: Option<i32>) -> Vec<Step> {
    let why = past_limit(limit);
    vec![
        Step::ForgetStop,
        Step::RecordExitCode(code),
        Step::RecordFailure(why.clone()),
        enter(TaskState::Failed, why.clone()),
        finish(why),
    ]
}

/// A Released task keeps its allocation until its stop is confirmed or its
/// release deadline passes; a preemption (or an earlier stop's deadline) in
/// that window must not send it back to the queue.
const RELEASING: &str = "released: its room is already on its way back";

fn steps(s: Vec<Step>) -> Outcome {
    Outcome::Steps(s)
}

fn enter(state: TaskState, reason: impl Into<String>) -> Step {
    Step::Enter {
        state,
        reason: Some(reason.into()),
    }
}

fn finish(reason: impl Into<String>) -> Step {
    Step::Finish {
        reason: reason.into(),
    }
}

/// Waiting for room: the only states a grant is taken in.
fn waiting(state: TaskState) -> bool {
    matches!(state, TaskState::Queued | TaskState::Preempted)
}

/// Whether `allocation_id` is the task's current allocation (news of an older
/// attempt is ignored).
fn holds(rec: &TaskRecord, allocation_id: &str) -> bool {
    rec.allocation
        .as_ref()
        .is_some_and(|a| a.allocation_id == allocation_id)
}

fn placed(state: TaskState, allocation: &Allocation, note: Option<&str>) -> Outcome {
    if !waiting(state) {
        return steps(vec![Step::Decline {
            allocation_id: allocation.allocation_id.clone(),
            reason: "task no longer waiting".into(),
        }]);
    }
    steps(vec![
        Step::Grant {
            allocation: allocation.clone(),
            reason: caldera_scheduling::placement::explain::placed_on(&allocation.node, note),
        },
        Step::Dispatch,
    ])
}

fn pending(state: TaskState, reason: &str, estimated_start_ms: Option<u64>) -> Outcome {
    if !waiting(state) {
        return Outcome::Ignored("no longer waiting");
    }
    steps(vec![Step::NotePending {
        reason: reason.to_string(),
        estimated_start_ms,
    }])
}

fn workload(
    rec: &TaskRecord,
    stopping: Option<&Stopping>,
    kind: &WorkloadEventKind,
    node_address: &str,
) -> Outcome {
    let state = rec.state;
    let releasing = state == TaskState::Released;
    match kind {
        WorkloadEventKind::Preparing if state == TaskState::Scheduled => steps(vec![Step::Enter {
            state: TaskState::Preparing,
            reason: None,
        }]),
        WorkloadEventKind::Warming { .. } => warming::progress(rec, kind),
        WorkloadEventKind::Pulling(p) => preparing::pulling(rec, p),
        WorkloadEventKind::Ready { isolation }
            if matches!(
                state,
                TaskState::Scheduled | TaskState::Preparing | TaskState::Warming
            ) =>
        {
            steps(vec![enter(
                TaskState::Ready,
                format!("isolation: {isolation}"),
            )])
        }
        WorkloadEventKind::Started {
            pid,
            port,
            image_digest,
        } if !releasing && state != TaskState::Running => {
            // No pid: a reservation runs nothing, but a command's start can
            // be reported (by a resync) before its shim said its pid, or
            // after a process that exited at once left none to report.
            let how = match pid {
                Some(p) => format!("pid {p}"),
                None if rec.spec.is_reservation() => "reservation held (no command)".to_string(),
                None => "started (its pid not reported yet)".to_string(),
            };
            let how = preparing::started_how(how, image_digest.as_deref());
            let mut s: Vec<Step> = image_digest
                .iter()
                .map(|d| Step::RecordImageDigest(d.clone()))
                .collect();
            s.push(enter(TaskState::Running, how));
            s.extend(serving::started_at(*port, node_address));
            steps(s)
        }
        // Running without an endpoint (made running by a report that named
        // no port): a later start that names one records it.
        WorkloadEventKind::Started {
            port: Some(port), ..
        } if state == TaskState::Running && rec.endpoint.is_none() => steps(
            serving::started_at(Some(*port), node_address)
                .into_iter()
                .collect(),
        ),
        WorkloadEventKind::Started {
            image_digest: Some(d),
            ..
        } if state == TaskState::Running => preparing::late_digest(rec, d),
        WorkloadEventKind::Readiness {
            ready, generation, ..
        } => serving::readiness(rec, *ready, *generation),
        WorkloadEventKind::Swapped {
            generation,
            model,
            port,
            image,
            image_digest,
            ..
        } => {
            let to = serving::SwappedTo {
                generation: *generation,
                model,
                port: *port,
                image: image.as_deref(),
                image_digest: image_digest.as_deref(),
            };
            serving::swapped(rec, &to, node_address)
        }
        WorkloadEventKind::Exited(st) => exited(rec, stopping, st),
        WorkloadEventKind::StartFailed { .. } if releasing => steps(vec![finish("released")]),
        WorkloadEventKind::StartFailed { reason, code } => {
            let mut s = vec![Step::RecordFailure(reason.clone())];
            if *code != 0 {
                s.push(Step::RecordFailureCode(*code));
            }
            s.extend([
                enter(TaskState::Failed, reason.clone()),
                finish(reason.clone()),
            ]);
            steps(s)
        }
        WorkloadEventKind::CheckpointSaved { path } => {
            steps(vec![Step::SaveCheckpoint { path: path.clone() }])
        }
        _ => Outcome::Ignored("already past that stage"),
    }
}

/// Why a task failed whose workload the kernel killed at its memory limit
/// (the agent tells it from a plain SIGKILL by the workload's memory cgroup).
pub const OOM_KILLED_REASON: &str =
    "oom_killed: the kernel killed it for using more memory than its limit (memory.size_gb)";

/// The workload ended: the outcome of a stop the control plane asked for, or
/// the task's own end (code 0 finishes it, anything else fails it).
fn exited(rec: &TaskRecord, stopping: Option<&Stopping>, st: &ExitStatus) -> Outcome {
    if rec.state == TaskState::Released {
        return steps(vec![finish("released")]);
    }
    match stopping {
        Some(Stopping::Preempted { by, reason }) => {
            let mut s = vec![Step::ForgetStop];
            s.extend(requeue_preempted(rec, by, reason));
            return steps(s);
        }
        Some(Stopping::Reclaimed { reason }) => {
            return steps(vec![
                Step::ForgetStop,
                enter(TaskState::Released, reason.clone()),
                finish(reason.clone()),
            ])
        }
        Some(Stopping::TimeLimit { limit }) => return steps(failed_past_limit(limit, st.code)),
        Some(Stopping::Drained { node }) => {
            let mut s = vec![Step::ForgetStop];
            s.extend(requeue_planned(rec, &format!("node {node} drained")));
            return steps(s);
        }
        None if st.stopped => {
            // Stopped on purpose without the control plane asking: its agent
            // shut down. A planned stop, not the workload's failure.
            let node = rec.allocation.as_ref().map_or("", |a| a.node.as_str());
            let why = format!("stopped by the agent of node {node} as it shut down");
            return steps(requeue_planned(rec, &why));
        }
        None => {}
    }
    let (state, why) = match (st.code, st.signal) {
        _ if st.oom_killed => (TaskState::Failed, OOM_KILLED_REASON.to_string()),
        (Some(0), _) => (TaskState::Finished, "exited with code 0".to_string()),
        (Some(c), _) => (TaskState::Failed, format!("exited with code {c}")),
        (None, Some(s)) => (TaskState::Failed, format!("killed by signal {s}")),
        (None, None) => (
            TaskState::Failed,
            "ended without an exit status".to_string(),
        ),
    };
    let mut s = vec![Step::RecordExitCode(st.code)];
    if state == TaskState::Failed {
        s.push(Step::RecordFailure(why.clone()));
    }
    s.push(enter(state, why.clone()));
    s.push(finish(why));
    steps(s)
}

/// Release resources: a waiting task is cancelled; a placed one is Released,
/// its workload stopped, and its room freed at once when nothing can confirm
/// the stop (a reservation runs nothing, a Scheduled task has not started, a
/// node without an actor answers nothing) or else when the stop is confirmed.
fn release(rec: &TaskRecord, by: &str, node_connected: bool) -> Outcome {
    let state = rec.state;
    if waiting(state) {
        return steps(vec![
            Step::Dequeue,
            enter(
                TaskState::Cancelled,
                format!("released by {by} before it was placed"),
            ),
            Step::Leave,
        ]);
    }
    if !state.holds_allocation() {
        return Outcome::Ignored("already released");
    }
    let reservation = rec.spec.is_reservation();
    let last = if reservation || !node_connected || state == TaskState::Scheduled {
        finish("released")
    } else {
        Step::AwaitRelease
    };
    steps(vec![
        enter(TaskState::Released, format!("released by {by}")),
        Step::StopWorkload {
            reason: "released".into(),
        },
        last,
    ])
}

/// A victim that runs is asked to checkpoint and stop; one that has not run
/// yet has nothing to save and goes back to the queue at once.
fn preempt(
    rec: &TaskRecord,
    stopping: Option<&Stopping>,
    allocation_id: &str,
    (by, reason): (&str, &str),
    stop_grace_ms: u64,
) -> Outcome {
    if rec.state == TaskState::Released {
        return Outcome::Ignored(RELEASING);
    }
    if !holds(rec, allocation_id) || stopping.is_some() {
        return Outcome::Ignored("not this allocation, or a stop is already under way");
    }
    let id = &rec.spec.task_id;
    let mut s = vec![Step::Announce(vec![
        (
            EventKind::Preempted,
            format!("task {id} preempted by {by}: {reason}"),
        ),
        (
            EventKind::CheckpointRequested,
            format!(
                "checkpoint requested from {id}: SIGTERM, then {stop_grace_ms} ms to save before SIGKILL"
            ),
        ),
    ])];
    if rec.state != TaskState::Running {
        s.push(Step::StopWorkload {
            reason: "preempted before it ran".into(),
        });
        s.extend(requeue_preempted(rec, by, reason));
    } else {
        s.push(Step::StopWorkload {
            reason: format!("preempted by {by}"),
        });
        s.push(Step::AwaitStop(Stopping::Preempted {
            by: by.to_string(),
            reason: reason.to_string(),
        }));
    }
    steps(s)
}

/// An idle allocation is reclaimed: a replica's service decides (it may stay
/// at its minimum); a task is asked to checkpoint and stop, then Released.
fn reclaim(
    rec: &TaskRecord,
    stopping: Option<&Stopping>,
    allocation_id: &str,
    reason: &str,
) -> Outcome {
    if !holds(rec, allocation_id)
        || stopping.is_some()
        || rec.spec.idle_exempt
        || !rec.state.holds_allocation()
    {
        return Outcome::Ignored("not reclaimable now");
    }
    if rec.service.is_some() {
        return steps(vec![Step::AskServiceToScaleIn {
            reason: reason.to_string(),
        }]);
    }
    steps(vec![
        Step::Record {
            kind: EventKind::CheckpointRequested,
            message: format!("checkpoint requested from {}: {reason}", rec.spec.task_id),
        },
        Step::StopWorkload {
            reason: reason.to_string(),
        },
        Step::AwaitStop(Stopping::Reclaimed {
            reason: reason.to_string(),
        }),
    ])
}

/// A task stuck in a stage past its timeout: its workload is stopped and it
/// fails for `why`.
fn stuck(why: String) -> Outcome {
    steps(vec![
        Step::StopWorkload {
            reason: why.clone(),
        },
        Step::RecordFailure(why.clone()),
        enter(TaskState::Failed, why.clone()),
        finish(why),
    ])
}

/// A requested stop was never confirmed: its outcome happens anyway.
fn stop_overdue(rec: &TaskRecord, stopping: Option<&Stopping>, allocation_id: &str) -> Outcome {
    if !holds(rec, allocation_id) {
        return Outcome::Ignored("an older attempt's stop");
    }
    if rec.state == TaskState::Released {
        return Outcome::Ignored(RELEASING);
    }
    match stopping {
        Some(Stopping::Preempted { by, .. }) => {
            let mut s = vec![Step::ForgetStop];
            s.extend(requeue_preempted(rec, by, "stop not confirmed in time"));
            steps(s)
        }
        Some(Stopping::Reclaimed { reason }) => steps(vec![
            Step::ForgetStop,
            enter(
                TaskState::Released,
                format!("{reason}; stop not confirmed in time"),
            ),
            finish("reclaimed"),
        ]),
        Some(Stopping::TimeLimit { limit }) => steps(failed_past_limit(limit, None)),
        Some(Stopping::Drained { node }) => {
            let mut s = vec![Step::ForgetStop];
            let why = format!("node {node} drained; stop not confirmed in time");
            s.extend(requeue_planned(rec, &why));
            steps(s)
        }
        None => Outcome::Ignored("no stop was asked for"),
    }
}

fn workload_missing(rec: &TaskRecord, node: &str) -> Outcome {
    match rec.state {
        // Never started there: send the start command again.
        TaskState::Scheduled => steps(vec![Step::Dispatch]),
        TaskState::Released => steps(vec![finish("released")]),
        // The agent restarted without it: not the workload's failure, so
        // no retry is spent.
        s if s.holds_allocation() => {
            requeue(rec, format!("workload vanished from node {node}"), false)
        }
        _ => Outcome::Ignored("the task holds no allocation"),
    }
}

/// Preempted -> Queued, keeping the checkpoint pointer for the next start.
fn requeue_preempted(rec: &TaskRecord, by: &str, reason: &str) -> Vec<Step> {
    let resume = match &rec.checkpoint {
        Some(c) => format!("requeued; resumes from checkpoint {c}"),
        None => "requeued; no checkpoint was saved, it starts over".to_string(),
    };
    vec![
        Step::Free {
            reason: format!("preempted by {by}"),
        },
        Step::CountPreemption,
        Step::Unbind,
        enter(TaskState::Preempted, format!("preempted by {by}: {reason}")),
        enter(TaskState::Queued, resume),
        Step::Enqueue,
    ]
}

/// Back to the queue (node lost, workload vanished, dispatch failed), or
/// Failed once a lost node would spend more than the retry budget. A planned
/// stop goes through [`requeue_planned`] instead, so it never spends the budget.
fn requeue(rec: &TaskRecord, why: String, counts_as_loss: bool) -> Outcome {
    let mut s = vec![
        Step::ForgetStop,
        Step::Free {
            reason: why.clone(),
        },
    ];
    let mut losses = rec.node_losses;
    if counts_as_loss {
        s.push(Step::CountNodeLoss);
        losses += 1;
    }
    let budget = rec.spec.retry_budget();
    if losses > budget {
        let why = format!("{why}; retry budget of {budget} spent");
        s.extend([
            Step::RecordFailure(why.clone()),
            enter(TaskState::Failed, why),
            Step::Leave,
        ]);
    } else {
        s.extend([
            Step::Unbind,
            enter(TaskState::Queued, format!("{why}; requeued")),
            Step::Enqueue,
        ]);
    }
    steps(s)
}

/// What taking a grant does to the record: the allocation is the task's now,
/// one more attempt is counted, and the pending note and start estimate are
/// cleared (the first half of [`Step::Grant`]; the transition is the second).
pub fn bind(rec: &mut TaskRecord, allocation: &Allocation) {
    if rec.attempts == 0 && rec.estimate_error_ms.is_none() {
        rec.estimate_error_ms = rec
            .first_estimate_ms
            .map(|e| allocation.created_ms as i64 - e as i64);
    }
    rec.allocation = Some(allocation.clone());
    serving::reset(rec);
    rec.attempts += 1;
    rec.pending_reason = None;
    rec.estimated_start_ms = None;
}

impl Step {
    /// A record-only step that is recorded even when nothing else in its
    /// reaction is (what the node says a replica serves).
    pub fn is_serving_news(&self) -> bool {
        matches!(
            self,
            Step::Serve { .. } | Step::SetReady(_) | Step::RecordSwap { .. }
        )
    }
}

/// Applies a step's change to the record, for the steps that only change the
/// record; answers false for the others (the actor carries those out).
pub fn apply_to_record(rec: &mut TaskRecord, step: &Step) -> bool {
    if serving::apply(rec, step) {
        return true;
    }
    match step {
        Step::Unbind => {
            rec.allocation = None;
            rec.pull = None;
            serving::reset(rec);
        }
        Step::CountNodeLoss => rec.node_losses += 1,
        Step::Unfence => rec.fenced_until_ms = None,
        Step::CountPreemption => rec.preemptions += 1,
        Step::RecordFailure(why) => {
            rec.failure = Some(why.clone());
            rec.failure_code = None;
        }
        Step::RecordFailureCode(code) => rec.failure_code = Some(*code),
        Step::NotePull(p) => rec.pull = Some(p.clone()),
        Step::RecordImageDigest(d) => {
            if let Some(a) = rec.allocation.as_mut() {
                a.image_digest = Some(d.clone());
            }
        }
        Step::RecordExitCode(code) => rec.exit_code = *code,
        Step::NotePending {
            reason,
            estimated_start_ms,
        } => {
            rec.pending_reason = Some(reason.clone());
            rec.estimated_start_ms = *estimated_start_ms;
            if rec.attempts == 0 && rec.first_estimate_ms.is_none() {
                rec.first_estimate_ms = *estimated_start_ms;
            }
        }
        _ => return false,
    }
    true
}
