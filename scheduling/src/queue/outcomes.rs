//! What passes decided, counted: tasks placed, tasks turned down (by the
//! reason that turned each down) and tasks that preempt. The core adds to the
//! tally as a pass goes; the caller takes it after each pass
//! ([`super::core::Core::take_outcomes`]) and adds it to its own counters
//! (the control plane's `/metrics`). Fixed arrays: counting a decision never
//! allocates.
use crate::placement::rejections::ALL_REASONS;

/// Over the tenant's guarantee + borrowing limit.
pub const OVER_QUOTA: &str = "over_quota";
/// Over a per-GPU-model quota on the node chosen.
pub const GPU_MODEL_QUOTA: &str = "gpu_model_quota";
/// Room was found, but starting would delay the queue's head (backfill).
pub const BACKFILL: &str = "backfill";
/// The chosen room could not be bound (the ledger refused it).
pub const BIND: &str = "bind";
/// No node was considered at all (an empty or all-lost pool).
pub const NO_NODES: &str = "no_nodes";

/// Reasons a task is turned down before or after placement; the placement
/// filters' own reasons ([`ALL_REASONS`]) follow them.
pub const ADMISSION_REASONS: [&str; 5] = [OVER_QUOTA, GPU_MODEL_QUOTA, BACKFILL, BIND, NO_NODES];

const REASONS: usize = ADMISSION_REASONS.len() + ALL_REASONS.len();

/// Counts since the last [`Outcomes::take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcomes {
    /// Tasks granted room.
    pub placed: u64,
    /// Tasks that found no room and preempt running work instead.
    pub preempting: u64,
    rejected: [u64; REASONS],
}

impl Default for Outcomes {
    fn default() -> Self {
        Outcomes {
            placed: 0,
            preempting: 0,
            rejected: [0; REASONS],
        }
    }
}

impl Outcomes {
    /// Counts one task turned down for `reason` (an admission reason or a
    /// placement filter's); an unknown reason is not counted.
    pub fn rejected(&mut self, reason: &str) {
        if let Some(i) = Self::reasons().position(|r| r == reason) {
            self.rejected[i] += 1;
        }
    }

    /// Every reason code, admission first, then the placement filters'.
    pub fn reasons() -> impl Iterator<Item = &'static str> {
        ADMISSION_REASONS.into_iter().chain(ALL_REASONS)
    }

    /// `(reason, count)` for every reason with a count.
    pub fn rejections(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Self::reasons().zip(self.rejected).filter(|(_, n)| *n > 0)
    }

    /// Tasks turned down in all.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().sum()
    }

    /// The counts so far, and a fresh tally.
    pub fn take(&mut self) -> Outcomes {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::rejections::GPU_ROOM;

    #[test]
    fn rejections_are_counted_by_reason_and_taking_resets_them() {
        let mut o = Outcomes::default();
        o.rejected(OVER_QUOTA);
        o.rejected(GPU_ROOM);
        o.rejected(GPU_ROOM);
        o.rejected("not a reason");
        o.placed += 1;
        let got: Vec<_> = o.rejections().collect();
        assert_eq!(got, vec![(OVER_QUOTA, 1), (GPU_ROOM, 2)]);
        assert_eq!(o.rejected_total(), 3);
        let taken = o.take();
        assert_eq!(taken.placed, 1);
        assert_eq!(o, Outcomes::default());
    }
}
