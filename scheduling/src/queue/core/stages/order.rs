//! Stage 1, order: who is considered first. Higher priority first; within a
//! priority, the tenant using less of its guarantee (lower dominant share)
//! first, so a tenant that already holds much waits behind one that holds
//! little; then arrival. The task id breaks what is left, so the order is
//! total and a pass is deterministic.
use super::super::{Core, Waiting};
use std::cmp::Reverse;
use std::collections::HashMap;

/// `InLine`'s fields but the id, borrowed-free: priority, share, seq.
type Place = (Reverse<u16>, u64, u64);

/// A waiting task's place in line; fields compare in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct InLine {
    priority: Reverse<u16>,
    /// Dominant share in millionths: an `f64` is not totally ordered, an
    /// integer is.
    share_micro: u64,
    seq: u64,
    task_id: String,
}

impl InLine {
    pub fn new(priority: u16, share: f64, seq: u64, task_id: String) -> InLine {
        InLine {
            priority: Reverse(priority),
            share_micro: InLine::share_micro(share),
            seq,
            task_id,
        }
    }

    /// A dominant share in millionths (saturating).
    fn share_micro(share: f64) -> u64 {
        (share * 1e6).min(u64::MAX as f64) as u64
    }
}

/// Task ids in queue order.
pub fn in_line(mut tasks: Vec<InLine>) -> Vec<String> {
    tasks.sort();
    tasks.into_iter().map(|t| t.task_id).collect()
}

impl Core {
    /// The waiting tasks among `ids`, in queue order. Each tenant's share is
    /// computed once per pass, before anything is granted in it.
    pub(in crate::queue) fn order(&self, ids: Vec<String>) -> Vec<String> {
        let mut shares: HashMap<&str, f64> = HashMap::new();
        let line = ids
            .into_iter()
            .filter_map(|id| {
                let w = self.waiting.get(&id)?;
                let tenant = w.task.tenant.as_str();
                let share = *shares
                    .entry(tenant)
                    .or_insert_with(|| self.share_of(tenant));
                Some(InLine::new(w.task.spec.priority.0, share, w.task.seq, id))
            })
            .collect();
        in_line(line)
    }

    /// Each waiting task of `ids` and its place in `order`'s line (1 =
    /// first): one more than the waiting tasks whose place compares lower.
    /// O(waiting × log ids) comparisons of borrowed fields, no sort of the
    /// queue and no copy of its ids.
    pub(in crate::queue) fn positions_of(&self, ids: &[String]) -> HashMap<String, u32> {
        let mut shares: HashMap<&str, u64> = HashMap::new();
        let mut targets: Vec<(Place, &str)> = ids
            .iter()
            .filter_map(|id| Some((self.place(self.waiting.get(id)?, &mut shares), id.as_str())))
            .collect();
        targets.sort();
        let mut ahead = vec![0u32; targets.len()];
        for (id, w) in &self.waiting {
            let key = (self.place(w, &mut shares), id.as_str());
            // Every target after `key` has this task ahead of it.
            let from = targets.partition_point(|t| *t <= key);
            if let Some(first) = ahead.get_mut(from) {
                *first += 1;
            }
        }
        // `ahead[i]` counted tasks just before target i: sum them up.
        let mut before = 0u32;
        targets
            .iter()
            .zip(ahead)
            .map(|((_, id), n)| {
                before += n;
                (id.to_string(), before + 1)
            })
            .collect()
    }

    /// A waiting task's place in line without its id: priority, its
    /// tenant's share (computed once per tenant into `shares`), arrival.
    fn place<'a>(&self, w: &'a Waiting, shares: &mut HashMap<&'a str, u64>) -> Place {
        let tenant = w.task.tenant.as_str();
        let share = *shares
            .entry(tenant)
            .or_insert_with(|| InLine::share_micro(self.share_of(tenant)));
        (Reverse(w.task.spec.priority.0), share, w.task.seq)
    }

    /// `tenant`'s dominant share: the largest fraction of any guaranteed
    /// resource it holds (0 without limits).
    fn share_of(&self, tenant: &str) -> f64 {
        self.limits.get(tenant).map_or(0.0, |l| {
            caldera_spec::dominant_share(&l.guaranteed, &self.ledger.tenant_usage(tenant))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_fair_share_then_arrival() {
        // (id, priority, tenant's dominant share, seq)
        let line = [
            // low (100): last whatever its share or arrival.
            ("low-first-in", 100, 0.0, 1),
            // medium (500), tenant holds 3 of 4 guaranteed GPUs: share 0.75.
            ("med-busy", 500, 0.75, 2),
            // medium, tenant holds 1 of 4: share 0.25 < 0.75, so before med-busy
            // although it came later.
            ("med-idle-late", 500, 0.25, 9),
            // medium, share 0.25, seq 5 < 9: before med-idle-late.
            ("med-idle-early", 500, 0.25, 5),
            // high (900): first although its tenant holds 2x its guarantee.
            ("high-over", 900, 2.0, 7),
            // shares 0.2500001 and 0.25 differ by 0.1 micro-units: both 250000
            // in millionths, so seq decides (4 < 5): before med-idle-early.
            ("med-idle-tie", 500, 0.250_000_1, 4),
        ];
        let tasks = line
            .iter()
            .map(|(id, p, s, q)| InLine::new(*p, *s, *q, id.to_string()))
            .collect();
        assert_eq!(
            in_line(tasks),
            [
                "high-over",
                "med-idle-tie",
                "med-idle-early",
                "med-idle-late",
                "med-busy",
                "low-first-in",
            ]
        );
    }

    #[test]
    fn shares_are_millionths_and_an_infinite_share_sorts_last() {
        // (share, millionths)
        let rows = [
            (0.0, 0),
            // 0.25 x 1e6 = 250000.
            (0.25, 250_000),
            // 1/3 x 1e6 = 333333.33.. -> truncated to 333333.
            (1.0 / 3.0, 333_333),
            // Guarantee 0 and something held: share is infinite -> u64::MAX.
            (f64::INFINITY, u64::MAX),
        ];
        for (share, micro) in rows {
            assert_eq!(InLine::new(0, share, 0, String::new()).share_micro, micro);
        }
    }
}
