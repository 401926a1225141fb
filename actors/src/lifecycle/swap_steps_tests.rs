use super::*;
use caldera_spec::{ModelRef, SwapReplica};

const L: Limits = Limits {
    warm_ms: 60_000,
    ready_ms: 300_000,
};

fn swap(steps: &[(SwapStep, u32)], phase: SwapPhase, allow_downtime: bool) -> SwapProgress {
    let m = |v: &str| ModelRef {
        name: "llama".into(),
        version: v.into(),
    };
    SwapProgress {
        from: m("v3"),
        to: m("v4"),
        requested_by: "alpha".into(),
        allow_downtime,
        max_surge: 0,
        phase,
        replicas: steps
            .iter()
            .enumerate()
            .map(|(i, (step, generation))| SwapReplica {
                replica: format!("alpha/svc.r{i}"),
                allocation_id: format!("alpha/svc.r{i}.1"),
                node: format!("n{i}"),
                step: *step,
                generation: *generation,
                since_ms: 1_000,
                surge: false,
                image: None,
                image_digest: None,
            })
            .collect(),
        reason: None,
        started_ms: 1_000,
        finished_ms: None,
    }
}

fn ready(generation: u32) -> Option<ReplicaSeen> {
    Some(ReplicaSeen {
        running: true,
        ready: true,
        generation,
        ..Default::default()
    })
}

fn not_ready(generation: u32) -> Option<ReplicaSeen> {
    Some(ReplicaSeen {
        running: true,
        ready: false,
        generation,
        ..Default::default()
    })
}

use SwapPhase::Swapping;
use SwapStep::*;

#[test]
fn a_replica_is_swapped_only_while_another_is_ready() {
    let s = swap(&[(Pending, 0), (Pending, 0)], Swapping, false);
    // r1 is not ready: r0 must wait, or the service would have none.
    assert_eq!(next(&s, &[ready(0), not_ready(0)], 2_000, L), Next::Wait);
    assert_eq!(
        next(&s, &[ready(0), ready(0)], 2_000, L),
        Next::Step {
            index: 0,
            step: Warming,
            generation: 0
        }
    );
    // One replica with downtime allowed goes at once.
    let one = swap(&[(Pending, 0)], Swapping, true);
    assert!(matches!(
        next(&one, &[not_ready(0)], 2_000, L),
        Next::Step { step: Warming, .. }
    ));
}

#[test]
fn each_step_waits_for_its_report_then_moves_on() {
    let mut warm = ready(0).unwrap();
    let s = swap(&[(Warming, 0), (Pending, 0)], Swapping, false);
    assert_eq!(
        next(&s, &[Some(warm.clone()), ready(0)], 2_000, L),
        Next::Wait
    );
    warm.target_verified = true;
    // Verified: restart under the next generation (the process's + 1).
    assert_eq!(
        next(&s, &[Some(warm), ready(0)], 2_000, L),
        Next::Step {
            index: 0,
            step: Restarting,
            generation: 1
        }
    );
    let s = swap(&[(Restarting, 1), (Pending, 0)], Swapping, false);
    assert_eq!(next(&s, &[ready(0), ready(0)], 2_000, L), Next::Wait);
    assert!(matches!(
        next(&s, &[not_ready(1), ready(0)], 2_000, L),
        Next::Step {
            step: WaitingReady,
            ..
        }
    ));
    let s = swap(&[(WaitingReady, 1), (Pending, 0)], Swapping, false);
    assert_eq!(next(&s, &[not_ready(1), ready(0)], 2_000, L), Next::Wait);
    assert!(matches!(
        next(&s, &[ready(1), ready(0)], 2_000, L),
        Next::Step {
            index: 0,
            step: Done,
            ..
        }
    ));
    // Then the next replica, since r0 is ready again.
    let s = swap(&[(Done, 1), (Pending, 0)], Swapping, false);
    assert!(matches!(
        next(&s, &[ready(1), ready(0)], 2_000, L),
        Next::Step {
            index: 1,
            step: Warming,
            ..
        }
    ));
    let s = swap(&[(Done, 1), (Done, 1)], Swapping, false);
    assert_eq!(next(&s, &[ready(1), ready(1)], 2_000, L), Next::Finish);
}

#[test]
fn a_timeout_a_refused_swap_or_a_crash_rolls_back_naming_the_replica() {
    // Not ready past ready_ms (counted from the step's since_ms = 1000).
    let s = swap(&[(WaitingReady, 1), (Pending, 0)], Swapping, false);
    match next(&s, &[not_ready(1), ready(0)], 1_000 + 300_001, L) {
        Next::RollBack { reason } => {
            assert!(
                reason.contains("svc.r0") && reason.contains("not ready"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    let mut failed = not_ready(0).unwrap();
    failed.swap_failed = Some((1, "weights corrupt".into()));
    let s = swap(&[(Restarting, 1), (Pending, 0)], Swapping, false);
    match next(&s, &[Some(failed), ready(0)], 2_000, L) {
        Next::RollBack { reason } => assert!(reason.contains("weights corrupt"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // r0 was swapped and then crashed while r1 warmed.
    let s = swap(&[(Done, 1), (Warming, 0)], Swapping, false);
    let gone = Some(ReplicaSeen::default());
    assert!(matches!(
        next(&s, &[gone, ready(0)], 2_000, L),
        Next::RollBack { .. }
    ));
    // A warm that never ends.
    let s = swap(&[(Warming, 0), (Pending, 0)], Swapping, false);
    assert!(matches!(
        next(&s, &[ready(0), ready(0)], 1_000 + 60_001, L),
        Next::RollBack { .. }
    ));
}

#[test]
fn a_rollback_sends_back_every_touched_replica_under_a_new_generation() {
    let s = swap(
        &[(Done, 1), (WaitingReady, 1), (Pending, 0)],
        SwapPhase::RollingBack,
        false,
    );
    let seen = [ready(1), not_ready(1), ready(0)];
    assert_eq!(
        next(&s, &seen, 2_000, L),
        Next::Step {
            index: 0,
            step: RollingBack,
            generation: 2
        }
    );
    let s = swap(
        &[(RollingBack, 2), (RollingBack, 2), (Pending, 0)],
        SwapPhase::RollingBack,
        false,
    );
    assert_eq!(
        next(&s, &[not_ready(2), ready(1), ready(0)], 2_000, L),
        Next::Wait
    );
    assert!(matches!(
        next(&s, &[ready(2), ready(1), ready(0)], 2_000, L),
        Next::Step {
            index: 0,
            step: RolledBack,
            ..
        }
    ));
    let s = swap(
        &[(RolledBack, 2), (RolledBack, 2), (Pending, 0)],
        SwapPhase::RollingBack,
        false,
    );
    assert_eq!(
        next(&s, &[ready(2), ready(2), ready(0)], 2_000, L),
        Next::RolledBack
    );
    // One that never comes back is given up (released, replaced on v3).
    let s = swap(&[(RollingBack, 2)], SwapPhase::RollingBack, true);
    assert!(matches!(
        next(&s, &[not_ready(1)], 1_000 + 300_001, L),
        Next::GiveUp { index: 0, .. }
    ));
    // An ended swap does nothing.
    let s = swap(&[(Done, 1)], SwapPhase::Done, true);
    assert_eq!(next(&s, &[ready(1)], 2_000, L), Next::Wait);
}
