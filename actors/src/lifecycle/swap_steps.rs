//! The rules of a hot swap, as pure code: given the recorded swap and what
//! is seen of its replicas now, the one next step. The service's actor
//! (`service/swap_drive.rs`) records the step, then carries it out, then
//! asks again; a control plane rebuilt mid-swap asks the same question of
//! the same record and so resumes where it was.
//!
//! Swapping, per replica in order: `pending` (waits until another replica
//! is ready, unless the swap allows downtime) -> `warming` (the new
//! version's weights into the node's cache; the old process serves) ->
//! `restarting` (the Swap command sent, a new generation) -> `waiting_ready`
//! (the node said Swapped) -> `done` (ready on the new version). A failure
//! anywhere (a timeout, SwapFailed, the replica ending) rolls back: every
//! replica past `warming` is swapped back to the old version under a new
//! generation (`rolling_back` -> `rolled_back`).
use caldera_spec::{SwapPhase, SwapProgress, SwapStep};

/// What is seen of one replica now (its record, as the node's reports left it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaSeen {
    /// Running on its allocation (not ended, not requeued).
    pub running: bool,
    /// Its readiness probe passes (or it has none and started).
    pub ready: bool,
    /// The generation of the process running now.
    pub generation: u32,
    /// A SwapFailed the node reported for this generation.
    pub swap_failed: Option<(u32, String)>,
    /// The swap's target version is verified in its node's cache.
    pub target_verified: bool,
}

/// How long each step may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub warm_ms: u64,
    pub ready_ms: u64,
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing now: look again later.
    Wait,
    /// Replica `index` moves to `step` (under `generation`).
    Step {
        index: usize,
        step: SwapStep,
        generation: u32,
    },
    /// Every replica is ready on the target: the swap is done.
    Finish,
    /// Roll back, for `reason` (names the replica).
    RollBack { reason: String },
    /// Replica `index` could not be swapped back in time: it is released
    /// (and replaced on the old version), its step `rolled_back`.
    GiveUp { index: usize, reason: String },
    /// Every swapped replica serves the old version again.
    RolledBack,
}

/// The next step of `swap`, `seen[i]` being what is seen of `swap.replicas[i]`
/// (`None`: its record is gone or unreadable, taken as not running).
pub fn next(swap: &SwapProgress, seen: &[Option<ReplicaSeen>], now_ms: u64, l: Limits) -> Next {
    match swap.phase {
        SwapPhase::Swapping => swapping(swap, seen, now_ms, l),
        SwapPhase::RollingBack => rolling_back(swap, seen, now_ms, l),
        SwapPhase::Done | SwapPhase::RolledBack | SwapPhase::Cancelled => Next::Wait,
    }
}

fn name(swap: &SwapProgress, i: usize) -> &str {
    caldera_spec::local_id(&swap.replicas[i].replica)
}

fn seen_at(seen: &[Option<ReplicaSeen>], i: usize) -> ReplicaSeen {
    seen.get(i).cloned().flatten().unwrap_or_default()
}

fn swapping(swap: &SwapProgress, seen: &[Option<ReplicaSeen>], now: u64, l: Limits) -> Next {
    // A replica already on the new version that stopped running, or whose
    // swap the node refused: the new version does not hold; roll back.
    for (i, r) in swap.replicas.iter().enumerate() {
        let s = seen_at(seen, i);
        let touched = matches!(
            r.step,
            SwapStep::Restarting | SwapStep::WaitingReady | SwapStep::Done
        );
        if let Some((g, why)) = &s.swap_failed {
            if touched && *g == r.generation {
                return Next::RollBack {
                    reason: format!(
                        "replica {}: swap to {} failed: {why}",
                        name(swap, i),
                        swap.to
                    ),
                };
            }
        }
        if touched && !s.running {
            return Next::RollBack {
                reason: format!(
                    "replica {} stopped running on {} (crashed or exited after its swap)",
                    name(swap, i),
                    swap.to
                ),
            };
        }
    }
    let Some(i) = swap.replicas.iter().position(|r| r.step != SwapStep::Done) else {
        return Next::Finish;
    };
    let r = &swap.replicas[i];
    let s = seen_at(seen, i);
    let waited = now.saturating_sub(r.since_ms);
    let step = |step, generation| Next::Step {
        index: i,
        step,
        generation,
    };
    match r.step {
        SwapStep::Pending => {
            let others_ready = (0..swap.replicas.len())
                .filter(|j| *j != i)
                .any(|j| seen_at(seen, j).running && seen_at(seen, j).ready);
            if swap.replicas.len() >= 2 && !others_ready && !swap.allow_downtime {
                Next::Wait
            } else {
                step(SwapStep::Warming, r.generation)
            }
        }
        SwapStep::Warming if s.target_verified => {
            step(SwapStep::Restarting, r.generation.max(s.generation) + 1)
        }
        SwapStep::Warming if waited > l.warm_ms => Next::RollBack {
            reason: format!(
                "replica {}: {} was not warm on node {} within {} s",
                name(swap, i),
                swap.to,
                r.node,
                l.warm_ms / 1000
            ),
        },
        SwapStep::Restarting if s.generation == r.generation => {
            step(SwapStep::WaitingReady, r.generation)
        }
        SwapStep::WaitingReady if s.generation == r.generation && s.ready => {
            step(SwapStep::Done, r.generation)
        }
        SwapStep::Restarting | SwapStep::WaitingReady if waited > l.ready_ms => Next::RollBack {
            reason: format!(
                "replica {} was not ready on {} within {} s ({})",
                name(swap, i),
                swap.to,
                l.ready_ms / 1000,
                if r.step == SwapStep::Restarting {
                    "the node never said it restarted"
                } else {
                    "its readiness probe never passed"
                }
            ),
        },
        _ => Next::Wait,
    }
}

fn rolling_back(swap: &SwapProgress, seen: &[Option<ReplicaSeen>], now: u64, l: Limits) -> Next {
    for (i, r) in swap.replicas.iter().enumerate() {
        let s = seen_at(seen, i);
        let step = |step, generation| Next::Step {
            index: i,
            step,
            generation,
        };
        match r.step {
            // Touched and not yet sent back: send it back. One that ended is
            // replaced on the old version by its service.
            SwapStep::Restarting | SwapStep::WaitingReady | SwapStep::Done if !s.running => {
                return step(SwapStep::RolledBack, r.generation)
            }
            SwapStep::Restarting | SwapStep::WaitingReady | SwapStep::Done => {
                return step(SwapStep::RollingBack, r.generation.max(s.generation) + 1)
            }
            // Nothing of it changed yet: it stays on the old version.
            SwapStep::Warming => return step(SwapStep::Pending, r.generation),
            SwapStep::RollingBack if !s.running => return step(SwapStep::RolledBack, r.generation),
            SwapStep::RollingBack if s.generation == r.generation && s.ready => {
                return step(SwapStep::RolledBack, r.generation)
            }
            SwapStep::RollingBack
                if now.saturating_sub(r.since_ms) > l.ready_ms
                    || s.swap_failed
                        .as_ref()
                        .is_some_and(|(g, _)| *g == r.generation) =>
            {
                return Next::GiveUp {
                    index: i,
                    reason: format!(
                        "replica {} did not come back on {} in time; it is replaced",
                        name(swap, i),
                        swap.from
                    ),
                }
            }
            _ => {}
        }
    }
    if swap
        .replicas
        .iter()
        .any(|r| r.step == SwapStep::RollingBack)
    {
        Next::Wait
    } else {
        Next::RolledBack
    }
}

#[cfg(test)]
#[path = "swap_steps_tests.rs"]
mod tests;
