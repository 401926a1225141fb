//! The Warming stage: a task whose model's weights are not yet verified on
//! its node waits here (`scheduled -> preparing -> warming -> ready`), with
//! progress events as bytes arrive and a timeout of its own
//! (`models.warming-timeout-ms`) whose reason names what it was reading.
use super::{enter, steps, Outcome, Step};
use caldera_spec::wire::WorkloadEventKind;
use caldera_spec::{EventKind, TaskRecord, TaskState};

/// `bytes` of `size` in the unit that suits `size`: "1.2 of 4 GB".
fn amount(bytes: u64, size: u64) -> String {
    let (div, unit) = match size {
        s if s >= 1_000_000_000 => (1e9, "GB"),
        s if s >= 1_000_000 => (1e6, "MB"),
        s if s >= 1_000 => (1e3, "KB"),
        _ => (1.0, "bytes"),
    };
    let show = |b: u64| {
        let v = format!("{:.1}", b as f64 / div);
        v.strip_suffix(".0").map_or(v.clone(), str::to_string)
    };
    format!("{} of {} {unit}", show(bytes), show(size))
}

/// What a warming task is reading, as its events and its timeout say it:
/// "reading llama:v1 from peer node-2: 1.2 of 4 GB".
pub fn reading(model: &str, source: &str, bytes_done: u64, size_bytes: u64) -> String {
    let from = if source.is_empty() {
        "no source yet (waiting for one)".to_string()
    } else {
        source.to_string()
    };
    format!(
        "reading {model} from {from}: {}",
        amount(bytes_done, size_bytes)
    )
}

/// A `Warming` report: the first enters the stage, later ones are progress.
/// The actor passes on at most about one a second (and the last), so the
/// log is not one event per chunk.
pub(super) fn progress(rec: &TaskRecord, kind: &WorkloadEventKind) -> Outcome {
    let WorkloadEventKind::Warming {
        model,
        source,
        bytes_done,
        size_bytes,
        rate_bytes_per_s,
    } = kind
    else {
        return Outcome::Ignored("not a warming report");
    };
    let text = reading(model, source, *bytes_done, *size_bytes);
    match rec.state {
        TaskState::Scheduled | TaskState::Preparing => steps(vec![enter(TaskState::Warming, text)]),
        TaskState::Warming => {
            let rate = rate_bytes_per_s / 1_000_000;
            steps(vec![Step::Announce(vec![(
                EventKind::WarmingProgress,
                format!("warming: {text} at {rate} MB/s"),
            )])])
        }
        _ => Outcome::Ignored("not warming"),
    }
}

/// The warming timer ran out: the task fails naming the stage and the
/// source it was reading.
pub(super) fn timeout(rec: &TaskRecord, attempt: u32, after_secs: u64, reading: &str) -> Outcome {
    if attempt != rec.attempts || rec.state != TaskState::Warming {
        return Outcome::Ignored("past warming, or a later attempt");
    }
    super::stuck(format!(
        "warming_timeout: stuck in warming for {after_secs} s {reading}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::tests::{news, task};
    use crate::lifecycle::{decide, Input};

    fn warming(bytes_done: u64) -> WorkloadEventKind {
        WorkloadEventKind::Warming {
            model: "llama:v1".into(),
            source: "peer n2".into(),
            bytes_done,
            size_bytes: 4_000_000_000,
            rate_bytes_per_s: 100_000_000,
        }
    }

    #[test]
    fn the_first_warming_report_enters_the_stage_and_later_ones_are_progress() {
        let first = decide(&task(TaskState::Preparing), None, news(warming(0)));
        assert_eq!(first.final_state(), Some(TaskState::Warming));
        let later = decide(
            &task(TaskState::Warming),
            None,
            news(warming(1_200_000_000)),
        );
        let Outcome::Steps(s) = later else {
            panic!("{later:?}")
        };
        assert!(
            matches!(&s[..], [Step::Announce(e)] if e[0].0 == EventKind::WarmingProgress
                && e[0].1 == "warming: reading llama:v1 from peer n2: 1.2 of 4 GB at 100 MB/s"),
            "{s:?}"
        );
        // Ready leaves it.
        let ready = WorkloadEventKind::Ready {
            isolation: "none".into(),
        };
        let out = decide(&task(TaskState::Warming), None, news(ready));
        assert_eq!(out.final_state(), Some(TaskState::Ready));
        // A running task ignores a late report.
        assert!(matches!(
            decide(&task(TaskState::Running), None, news(warming(5))),
            Outcome::Ignored(_)
        ));
    }

    #[test]
    fn the_warming_timeout_fails_the_task_naming_the_stage_and_the_source() {
        let reading = reading("llama:v1", "peer node-2", 1_200_000_000, 4_000_000_000);
        let input = Input::WarmingTimeout {
            attempt: 1,
            after_secs: 600,
            reading: &reading,
        };
        let out = decide(&task(TaskState::Warming), None, input);
        assert_eq!(out.final_state(), Some(TaskState::Failed));
        let Outcome::Steps(s) = out else { panic!() };
        assert!(s.contains(&Step::RecordFailure(
            "warming_timeout: stuck in warming for 600 s reading llama:v1 from peer node-2: 1.2 of 4 GB"
                .into()
        )));
        // Past warming, or another attempt's timer: nothing.
        assert!(matches!(
            decide(&task(TaskState::Running), None, input),
            Outcome::Ignored(_)
        ));
        let stale = Input::WarmingTimeout {
            attempt: 0,
            after_secs: 600,
            reading: &reading,
        };
        assert!(matches!(
            decide(&task(TaskState::Warming), None, stale),
            Outcome::Ignored(_)
        ));
    }

    #[test]
    fn amounts_are_written_in_the_unit_of_the_size() {
        assert_eq!(amount(1_200_000_000, 4_000_000_000), "1.2 of 4 GB");
        assert_eq!(amount(0, 4_000_000), "0 of 4 MB");
        assert_eq!(amount(10, 20), "10 of 20 bytes");
        assert_eq!(
            reading("llama:v1", "peer node-2", 1_200_000_000, 4_000_000_000),
            "reading llama:v1 from peer node-2: 1.2 of 4 GB"
        );
    }
}
