//! The Preparing stage of a container task is its image's pull: the
//! node's `Pulling` reports become progress events and the record's `pull`
//! (what `caldera status`, the task page and `caldera logs -f` show), the
//! digest the container runs goes into the allocation and the history, and
//! a task stuck past its prepare timeout fails saying how far its pull got.
use super::{enter, steps, stuck, Outcome, Step};
use caldera_spec::codes;
use caldera_spec::container::PullProgress;
use caldera_spec::{EventKind, TaskRecord, TaskState};

/// A `Pulling` report: recorded as the task's pull and an event. A report
/// that arrives before the `Preparing` event (a node's events may be read
/// out of order after a reconnect) enters the stage first.
pub(super) fn pulling(rec: &TaskRecord, p: &PullProgress) -> Outcome {
    let text = p.describe();
    match rec.state {
        TaskState::Scheduled => steps(vec![
            Step::NotePull(p.clone()),
            enter(TaskState::Preparing, text),
        ]),
        TaskState::Preparing => steps(vec![
            Step::NotePull(p.clone()),
            Step::Announce(vec![(EventKind::PullProgress, text)]),
        ]),
        _ => Outcome::Ignored("not preparing"),
    }
}

/// How a started workload's history line names what runs: "pid 42" or,
/// for a container, "pid 42, image sha256:...".
pub(super) fn started_how(how: String, image_digest: Option<&str>) -> String {
    match image_digest {
        Some(d) => format!("{how}, image {d}"),
        None => how,
    }
}

/// The digest arrived after the task was already running (a resync's
/// report made it running first): recorded with an event of its own.
pub(super) fn late_digest(rec: &TaskRecord, digest: &str) -> Outcome {
    let known = rec
        .allocation
        .as_ref()
        .and_then(|a| a.image_digest.as_deref());
    if known == Some(digest) {
        return Outcome::Ignored("digest already recorded");
    }
    steps(vec![
        Step::RecordImageDigest(digest.to_string()),
        Step::Record {
            kind: EventKind::PullProgress,
            message: format!("running image {digest}"),
        },
    ])
}

/// The Preparing timer ran out. A task whose image was being pulled fails
/// as `pull_timed_out`, saying how far the pull got; any other says where
/// it was stuck.
pub(super) fn timeout(rec: &TaskRecord, attempt: u32, after_secs: u64) -> Outcome {
    let stage = rec.state;
    if attempt != rec.attempts || !matches!(stage, TaskState::Scheduled | TaskState::Preparing) {
        return Outcome::Ignored("past preparing, or a later attempt");
    }
    let node = rec.allocation.as_ref().map_or("", |a| a.node.as_str());
    let Some(pull) = &rec.pull else {
        return stuck(format!(
            "stuck in {} for {after_secs}s on node {node} (preparing timeout)",
            stage.as_str()
        ));
    };
    let why = format!(
        "pull_timed_out: stuck in {} for {after_secs}s on node {node} (prepare timeout): {}",
        stage.as_str(),
        pull.describe()
    );
    let Outcome::Steps(mut s) = stuck(why) else {
        return Outcome::Ignored("unreachable");
    };
    s.push(Step::RecordFailureCode(codes::PULL_TIMED_OUT.code));
    Outcome::Steps(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::tests::{news, task, with};
    use crate::lifecycle::{apply_to_record, decide, Input};
    use caldera_spec::wire::WorkloadEventKind;

    fn pull(layers_done: u32, bytes_done: u64) -> PullProgress {
        PullProgress {
            image: "registry.internal/x:1".into(),
            layers_done,
            layers_total: 5,
            bytes_done,
        }
    }

    fn steps_of(out: Outcome) -> Vec<Step> {
        match out {
            Outcome::Steps(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pull_reports_are_recorded_as_progress_while_preparing() {
        let s = steps_of(decide(
            &task(TaskState::Preparing),
            None,
            news(WorkloadEventKind::Pulling(pull(2, 40_000_000))),
        ));
        assert_eq!(
            s,
            vec![
                Step::NotePull(pull(2, 40_000_000)),
                Step::Announce(vec![(
                    EventKind::PullProgress,
                    "pulling registry.internal/x:1: 2 of 5 layers, 40 MB done".into()
                )]),
            ]
        );
        let mut rec = task(TaskState::Preparing);
        assert!(apply_to_record(&mut rec, &s[0]));
        assert_eq!(rec.pull, Some(pull(2, 40_000_000)));
        // Before the Preparing event: it enters the stage.
        let early = decide(
            &task(TaskState::Scheduled),
            None,
            news(WorkloadEventKind::Pulling(pull(0, 0))),
        );
        assert_eq!(early.final_state(), Some(TaskState::Preparing));
        // A running task ignores a late report.
        assert!(matches!(
            decide(
                &task(TaskState::Running),
                None,
                news(WorkloadEventKind::Pulling(pull(5, 1)))
            ),
            Outcome::Ignored(_)
        ));
    }

    #[test]
    fn the_digest_goes_into_the_allocation_and_the_history() {
        let started = WorkloadEventKind::Started {
            pid: Some(42),
            port: None,
            image_digest: Some("sha256:abc".into()),
        };
        let s = steps_of(decide(&task(TaskState::Ready), None, news(started.clone())));
        assert!(
            s.contains(&Step::RecordImageDigest("sha256:abc".into())),
            "{s:?}"
        );
        assert!(
            s.iter().any(|st| matches!(st, Step::Enter { state: TaskState::Running, reason: Some(r) } if r == "pid 42, image sha256:abc")),
            "{s:?}"
        );
        let mut rec = task(TaskState::Ready);
        for st in &s {
            apply_to_record(&mut rec, st);
        }
        let digest = rec.allocation.as_ref().and_then(|a| a.image_digest.clone());
        assert_eq!(digest.as_deref(), Some("sha256:abc"));
        // Running already (a resync came first): recorded once, with an event.
        let late = steps_of(decide(
            &task(TaskState::Running),
            None,
            news(started.clone()),
        ));
        assert_eq!(late[0], Step::RecordImageDigest("sha256:abc".into()));
        assert!(matches!(
            decide(&rec_running(rec), None, news(started)),
            Outcome::Ignored(_)
        ));
    }

    fn rec_running(mut rec: TaskRecord) -> TaskRecord {
        rec.state = TaskState::Running;
        rec
    }

    #[test]
    fn a_start_failure_keeps_its_code() {
        let failed = WorkloadEventKind::StartFailed {
            reason: "image registry.internal/nope:1 not found in its registry (...)".into(),
            code: codes::IMAGE_NOT_FOUND.code,
        };
        let s = steps_of(decide(&task(TaskState::Preparing), None, news(failed)));
        let mut rec = task(TaskState::Preparing);
        for st in &s {
            apply_to_record(&mut rec, st);
        }
        assert_eq!(rec.failure_code, Some(codes::IMAGE_NOT_FOUND.code));
        assert!(rec
            .failure
            .as_deref()
            .is_some_and(|f| f.contains("not found")));
        // A later failure without a code leaves none behind.
        apply_to_record(&mut rec, &Step::RecordFailure("exited with code 1".into()));
        assert_eq!(rec.failure_code, None);
    }

    #[test]
    fn a_pull_stuck_past_the_prepare_timeout_says_how_far_it_got() {
        let rec = with(task(TaskState::Preparing), |r| {
            r.attempts = 1;
            r.pull = Some(pull(2, 40_000_000));
        });
        let input = Input::PreparingTimeout {
            attempt: 1,
            after_secs: 5,
        };
        let out = decide(&rec, None, input);
        assert_eq!(out.final_state(), Some(TaskState::Failed));
        let s = steps_of(out);
        let node = rec.allocation.as_ref().map_or("", |a| a.node.as_str());
        let why = format!("pull_timed_out: stuck in preparing for 5s on node {node} (prepare timeout): pulling registry.internal/x:1: 2 of 5 layers, 40 MB done");
        assert!(s.contains(&Step::RecordFailure(why)), "{s:?}");
        assert!(s.contains(&Step::RecordFailureCode(codes::PULL_TIMED_OUT.code)));
    }
}
