//! Borrowed marks: which of a tenant's allocations hold capacity beyond its
//! guarantee (and so are preempted first, and billed as borrowed).
//!
//! A grant is marked as it is admitted. What the tenant holds and may hold
//! changes later — a quota is saved, an older allocation is released, ends
//! or is preempted — and a mark set once would then go stale: a tenant back
//! within its guarantee would keep allocations marked borrowed. So the marks
//! are derived again from the ledger whenever any of that changes: oldest
//! first, an allocation is guaranteed while the tenant's holdings up to and
//! including it fit the guarantee (every dimension, and every per-model
//! GPU guarantee), borrowed from the first one that does not.
use super::core::stages::admit::gpus_of_model;
use super::core::Core;
use super::ledger::{allocation_usage, Entry};
use caldera_spec::{Allocation, Quota, Usage};
use std::collections::{BTreeMap, HashSet};

/// What a tenant holds, added up oldest allocation first.
#[derive(Default)]
struct Held {
    usage: Usage,
    by_model: BTreeMap<String, f64>,
}

impl Held {
    /// Adds `e`; answers whether the holdings now pass `guaranteed`.
    fn add_and_exceeds(&mut self, e: &Entry, guaranteed: &Quota) -> bool {
        self.usage += allocation_usage(e);
        let mut over = guaranteed.exceeded_by(&self.usage).is_some();
        for (key, g) in &guaranteed.gpus_by_model {
            let held = self.by_model.entry(key.clone()).or_default();
            *held += gpus_of_model(e, key);
            over |= *held > g + 1e-9;
        }
        over
    }
}

impl Core {
    /// Marks `tenant`'s allocations borrowed or guaranteed under its current
    /// limits and holdings; answers the allocations whose mark changed.
    ///
    /// `may_borrow`: whether a guaranteed allocation may become borrowed. Only
    /// a lower quota does that; a change in holdings (a grant, a free) only
    /// ever brings allocations back within the guarantee, so it passes false
    /// and a grant admission marked guaranteed stays so (admission counts a
    /// request as asked, a re-mark the allocation as granted: a whole GPU's
    /// memory, for one).
    ///
    /// `offered`: allocations offered to their tasks and not yet recorded.
    /// They count (they are held), but their marks stay as offered, so the
    /// grant a task records is the one it was offered; the next re-mark,
    /// after it is recorded, sets it right.
    ///
    /// Oldest first, and at equal age the ones marked guaranteed first: the
    /// grants of one pass share a creation time, and admission (whose
    /// holdings only grow within a pass) marked the earlier ones guaranteed,
    /// so a re-mark with nothing changed changes nothing.
    pub fn remark_borrowed(
        &mut self,
        tenant: &str,
        offered: &HashSet<String>,
        may_borrow: bool,
    ) -> Vec<Allocation> {
        let Some(guaranteed) = self.limits.get(tenant).map(|l| l.guaranteed.clone()) else {
            return Vec::new();
        };
        let mut mine: Vec<(u64, bool, String)> = self
            .ledger
            .all()
            .filter(|e| e.allocation.tenant == tenant)
            .map(|e| {
                let a = &e.allocation;
                (a.created_ms, a.borrowed, a.allocation_id.clone())
            })
            .collect();
        mine.sort();
        let mut held = Held::default();
        let mut changed = Vec::new();
        for (_, _, id) in mine {
            let Some(e) = self.ledger.get_mut(&id) else {
                continue;
            };
            let borrowed = held.add_and_exceeds(e, &guaranteed);
            let allowed = may_borrow || !borrowed;
            if e.allocation.borrowed != borrowed && allowed && !offered.contains(&id) {
                e.allocation.borrowed = borrowed;
                changed.push(e.allocation.clone());
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::core::TenantLimits;
    use crate::queue::fixtures::{core_with, placed, spec, submit};
    use caldera_spec::Quota;

    fn gpus(n: f64) -> Quota {
        Quota {
            gpus: Some(n),
            ..Quota::default()
        }
    }

    fn limits(guaranteed: Quota, borrowing: Quota) -> TenantLimits {
        TenantLimits {
            guaranteed,
            borrowing_limit: borrowing,
        }
    }

    /// Each allocation of the ledger: (task id, borrowed), by task id.
    fn marks(c: &Core) -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = c
            .ledger
            .all()
            .map(|e| (e.allocation.task_id.clone(), e.allocation.borrowed))
            .collect();
        v.sort();
        v
    }

    fn allocation_of(c: &Core, task: &str) -> String {
        c.ledger
            .of_task(task)
            .map(|e| e.allocation.allocation_id.clone())
            .unwrap_or_default()
    }

    /// Guarantee 2 GPUs, borrowing 2 more: "g1", "g2" (granted at t=0) are
    /// guaranteed, "b1", "b2" (t=1 s) borrowed.
    fn four_on_a_guarantee_of_two() -> Core {
        let mut c = core_with(&[("a", 4)]);
        c.set_limits("t", limits(gpus(2.0), gpus(2.0)));
        submit(&mut c, "t", spec("g1", 1, "medium", None), 1, 1);
        submit(&mut c, "t", spec("g2", 1, "medium", None), 2, 1);
        assert_eq!(placed(&c.cycle(0)), ["g1", "g2"]);
        submit(&mut c, "t", spec("b1", 1, "medium", None), 3, 1);
        submit(&mut c, "t", spec("b2", 1, "medium", None), 4, 1);
        assert_eq!(placed(&c.cycle(1_000)), ["b1", "b2"]);
        c
    }

    #[test]
    fn releasing_the_guaranteed_ones_brings_the_borrowed_back_within_the_guarantee() {
        let mut c = four_on_a_guarantee_of_two();
        let none = HashSet::new();
        let as_granted = [("b1", true), ("b2", true), ("g1", false), ("g2", false)];
        let want = |rows: &[(&str, bool)]| -> Vec<(String, bool)> {
            rows.iter().map(|(t, b)| (t.to_string(), *b)).collect()
        };
        assert_eq!(marks(&c), want(&as_granted));
        // Nothing changed: a re-mark changes nothing.
        assert!(c.remark_borrowed("t", &none, false).is_empty());
        // g1 released. Oldest first: g2 (t=0) holds 1 <= 2; with b1 (t=1 s)
        // 2 <= 2, so b1 is guaranteed now; with b2 3 > 2, so b2 stays borrowed.
        c.release(&allocation_of(&c, "g1"));
        let changed = c.remark_borrowed("t", &none, false);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(
            (changed[0].task_id.as_str(), changed[0].borrowed),
            ("b1", false)
        );
        // g2 released too: b1 = 1, b2 = 2 <= 2: both guaranteed.
        c.release(&allocation_of(&c, "g2"));
        let changed = c.remark_borrowed("t", &none, false);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(marks(&c), want(&[("b1", false), ("b2", false)]));
    }

    #[test]
    fn an_offered_grant_counts_but_keeps_the_mark_it_was_offered_with() {
        let mut c = four_on_a_guarantee_of_two();
        c.release(&allocation_of(&c, "g1"));
        c.release(&allocation_of(&c, "g2"));
        // b1 is offered, not yet recorded: it stays borrowed; b2 behind it
        // (1 + 1 = 2 <= 2) is guaranteed.
        let offered: HashSet<String> = [allocation_of(&c, "b1")].into();
        let changed = c.remark_borrowed("t", &offered, false);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0].task_id, "b2");
        // Recorded: the next re-mark sets it right.
        let changed = c.remark_borrowed("t", &HashSet::new(), false);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(
            (changed[0].task_id.as_str(), changed[0].borrowed),
            ("b1", false)
        );
    }

    #[test]
    fn a_per_model_guarantee_marks_what_passes_it_and_releases_bring_it_back() {
        let a100 = |n: f64| Quota {
            gpus_by_model: [("a100".to_string(), n)].into(),
            ..Quota::default()
        };
        let mut c = core_with(&[("a", 4)]);
        // 1 A100 guaranteed, 2 more may be borrowed.
        c.set_limits("t", limits(a100(1.0), a100(2.0)));
        submit(&mut c, "t", spec("first", 1, "medium", None), 1, 1);
        assert_eq!(placed(&c.cycle(0)), ["first"]);
        submit(&mut c, "t", spec("second", 2, "medium", None), 2, 1);
        assert_eq!(placed(&c.cycle(1_000)), ["second"]);
        // first: 1 <= 1 guaranteed; second: 1 + 2 = 3 > 1: borrowed, as
        // admitted, so a re-mark keeps both.
        let none = HashSet::new();
        assert!(
            c.remark_borrowed("t", &none, false).is_empty(),
            "{:?}",
            marks(&c)
        );
        assert_eq!(
            marks(&c),
            [("first".to_string(), false), ("second".to_string(), true)]
        );
        // first released: second alone holds 2 > 1 A100: still borrowed.
        c.release(&allocation_of(&c, "first"));
        assert!(c.remark_borrowed("t", &none, false).is_empty());
        // The guarantee raised to 2: 2 <= 2, back within it.
        c.set_limits("t", limits(a100(2.0), a100(2.0)));
        let changed = c.remark_borrowed("t", &none, true);
        assert_eq!(changed.len(), 1);
        assert!(!changed[0].borrowed);
    }
    #[test]
    fn a_change_in_holdings_never_marks_a_guaranteed_allocation_borrowed() {
        // Guarantee 80 GB of GPU memory; two whole 80 GB A100s. Admission
        // counts a whole-GPU request as no memory asked: the second is
        // admitted with 80 + 0 = 80 <= 80, guaranteed. Counted as granted it
        // holds 80 + 80 = 160 > 80: a re-mark after a quota change marks it
        // borrowed, one after a change in holdings leaves it guaranteed.
        let memory = |gb: f64| Quota {
            gpu_memory_gb: Some(gb),
            ..Quota::default()
        };
        let mut c = core_with(&[("a", 2)]);
        c.set_limits("t", limits(memory(80.0), memory(80.0)));
        submit(&mut c, "t", spec("first", 1, "medium", None), 1, 1);
        assert_eq!(placed(&c.cycle(0)), ["first"]);
        submit(&mut c, "t", spec("second", 1, "medium", None), 2, 1);
        assert_eq!(placed(&c.cycle(1_000)), ["second"]);
        let none = HashSet::new();
        assert!(c.remark_borrowed("t", &none, false).is_empty());
        assert_eq!(
            marks(&c),
            [("first".to_string(), false), ("second".to_string(), false)]
        );
        let changed = c.remark_borrowed("t", &none, true);
        assert_eq!(changed.len(), 1);
        assert_eq!(
            (changed[0].task_id.as_str(), changed[0].borrowed),
            ("second", true)
        );
    }
}
