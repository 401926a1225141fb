//! Stage 2, admit: may the tenant hold this much more? Within its guarantee a
//! task is `Guaranteed`; past it but within guarantee + borrowing limit it is
//! `Borrowing` (and its allocation is marked borrowed, so a tenant reclaiming
//! its guarantee may preempt it); past that it is `OverQuota` and waits for the
//! tenant's own work to end, however much room the pool has.
//!
//! Per-GPU-model quotas ("at most 2 A100s") need the GPUs the placement chose,
//! so [`Core::model_admission`] runs after the place stage.
use super::super::estimate;
use super::super::{Core, TenantLimits, Waiting};
use super::Pass;
use crate::placement::{Demand, GpuDemand, Placement};
use crate::queue::ledger::Entry;
use caldera_spec::{NodeInventory, Standing, Usage};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A tenant's standing if it held `held` and were granted `asked`.
pub fn standing(limits: Option<&TenantLimits>, held: Usage, asked: &Usage) -> Standing {
    let mut after = held;
    after += *asked;
    standing_after(limits, &after)
}

/// A tenant's standing if it held `after`. No limits: guaranteed. A resource
/// without a borrowing limit is never over quota (only borrowed).
fn standing_after(limits: Option<&TenantLimits>, after: &Usage) -> Standing {
    match limits {
        None => Standing::Guaranteed,
        Some(l) => caldera_spec::standing(&l.guaranteed, &l.borrowing_limit, after),
    }
}

/// A grant that would take a tenant past its quota of one GPU model; the
/// words are the task's pending reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "over quota for GPU model {model}: would hold {would:.2}, tenant {tenant} may hold {limit:.2}"
)]
pub struct OverModelQuota {
    pub model: String,
    pub tenant: String,
    /// GPUs of the model held with the grant (shares as fractions).
    pub would: f64,
    /// Guarantee plus borrowing limit.
    pub limit: f64,
}

/// The standing against one GPU model's quota of a tenant that holds `held`
/// GPUs of that model and is granted `asked` more: `Ok(borrowed)` within
/// guarantee + borrowing, `Err(why)` past it. A model with a guarantee but no
/// borrowing limit is never over; one with neither is never borrowed.
pub fn model_standing(
    model: &str,
    tenant: &str,
    guaranteed: Option<f64>,
    borrowing: Option<f64>,
    held: f64,
    asked: f64,
) -> Result<bool, OverModelQuota> {
    let would = held + asked;
    if let (Some(g), Some(b)) = (guaranteed, borrowing) {
        if would > g + b + 1e-9 {
            return Err(OverModelQuota {
                model: model.into(),
                tenant: tenant.into(),
                would,
                limit: g + b,
            });
        }
    }
    Ok(guaranteed.is_some_and(|g| would > g + 1e-9))
}

/// How much of one GPU an allocation of `demand` takes per GPU it holds: a
/// share its fraction, anything else all of it.
fn gpu_fraction(demand: &Demand) -> f64 {
    match demand.gpu {
        GpuDemand::Share { milli } => milli as f64 / 1000.0,
        _ => 1.0,
    }
}

/// Whether `model` is what a quota key names, by the one model matcher
/// ("a100" names "NVIDIA A100-SXM4-80GB", "a10" does not).
fn names(key: &str, model: &str) -> bool {
    caldera_spec::gpu_model::matches(key, model)
}

impl Core {
    /// `tenant`'s standing if it held `after` (the request included).
    pub(in crate::queue) fn standing(&self, tenant: &str, after: &Usage) -> Standing {
        standing_after(self.limits.get(tenant), after)
    }

    /// Whether `tenant` may hold `after` (guaranteed or borrowing).
    pub(crate) fn admits(&self, tenant: &str, after: &Usage) -> bool {
        !matches!(self.standing(tenant, after), Standing::OverQuota { .. })
    }

    /// Admits `w` against its tenant's quota as this pass has left it. Over
    /// quota: it is told why and when its tenant's own work should have ended
    /// enough, and `None` is returned.
    pub(in crate::queue) fn admit(
        &mut self,
        id: &str,
        w: &Waiting,
        pass: &mut Pass,
        now_ms: u64,
    ) -> Option<Standing> {
        let tenant = w.task.tenant.as_str();
        let held = pass.held_by(tenant, &self.ledger);
        let standing = standing(self.limits.get(tenant), held, &w.usage);
        let Standing::OverQuota { dim, limit, would } = standing else {
            return Some(standing);
        };
        let key: Arc<str> = format!("{tenant}/{}", w.shape).into();
        let est = *pass
            .quota_starts
            .entry(key)
            .or_insert_with(|| estimate::quota_start(self, tenant, &w.usage, now_ms));
        let reason = format!("over quota: {dim} would be {would:.2}, tenant {tenant} may use {limit:.2} (guarantee + borrowing limit)");
        self.pending(&mut pass.out, id, reason, est);
        None
    }

    /// Per-GPU-model quota of placement `p` on `node`: `Ok(borrowed)` (beyond
    /// some model's guarantee) or `Err(why)` (past some model's limit; the
    /// models are checked in name order and the first one past says why).
    pub(in crate::queue) fn model_admission(
        &self,
        tenant: &str,
        node: &str,
        demand: &Demand,
        p: &Placement,
    ) -> Result<bool, OverModelQuota> {
        let Some(l) = self.limits.get(tenant) else {
            return Ok(false);
        };
        let (guaranteed, borrowing) = (
            &l.guaranteed.gpus_by_model,
            &l.borrowing_limit.gpus_by_model,
        );
        if guaranteed.is_empty() && borrowing.is_empty() {
            return Ok(false);
        }
        let Some(inv) = self.inventories.get(node) else {
            return Ok(false);
        };
        let keys: BTreeSet<&String> = guaranteed.keys().chain(borrowing.keys()).collect();
        let mut borrowed = false;
        for key in keys {
            let asked = asked_of_model(inv, p, key) * gpu_fraction(demand);
            if asked == 0.0 {
                continue;
            }
            let held = self.held_of_model(tenant, key);
            let (g, b) = (guaranteed.get(key).copied(), borrowing.get(key).copied());
            borrowed |= model_standing(key, tenant, g, b, held, asked)?;
        }
        Ok(borrowed)
    }

    /// GPUs of the model `key` names that `tenant` holds (shares as fractions).
    fn held_of_model(&self, tenant: &str, key: &str) -> f64 {
        self.ledger
            .all()
            .filter(|e| e.allocation.tenant == tenant)
            .map(|e| gpus_of_model(e, key))
            .sum()
    }
}

/// GPUs of the model `key` names that one allocation holds (a share as its
/// fraction): what it counts against a per-model quota.
pub(in crate::queue) fn gpus_of_model(e: &Entry, key: &str) -> f64 {
    let of_model = e.allocation.gpus.iter().filter(|g| names(key, &g.model));
    of_model.count() as f64 * gpu_fraction(&e.demand)
}

/// GPUs of placement `p` that are of the model `key` names, by the inventory.
fn asked_of_model(inv: &NodeInventory, p: &Placement, key: &str) -> f64 {
    p.gpus
        .iter()
        .filter(|(i, _)| {
            inv.gpus
                .iter()
                .any(|g| g.index == *i && names(key, &g.model))
        })
        .count() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::fixtures::{core_with, placed, spec, submit};
    use caldera_spec::Quota;

    fn gpus(n: f64) -> Usage {
        Usage {
            gpus: n,
            ..Usage::default()
        }
    }

    fn quota(gpus: f64) -> Quota {
        Quota {
            gpus: Some(gpus),
            ..Quota::default()
        }
    }

    #[test]
    fn within_the_guarantee_then_borrowing_then_over_quota() {
        // Guaranteed 4 GPUs, may borrow 2 more: at most 4 + 2 = 6.
        let limits = TenantLimits {
            guaranteed: quota(4.0),
            borrowing_limit: quota(2.0),
        };
        let over = |limit, would| Standing::OverQuota {
            dim: "gpus",
            limit,
            would,
        };
        // (held, asked, standing)
        let rows = [
            // 3 + 1 = 4 <= 4: within the guarantee.
            (3.0, 1.0, Standing::Guaranteed),
            // 3 + 2 = 5 > 4, 5 <= 6: borrowing.
            (3.0, 2.0, Standing::Borrowing),
            // 3 + 3 = 6 <= 6: borrowing up to the limit exactly.
            (3.0, 3.0, Standing::Borrowing),
            // 3 + 4 = 7 > 6: over, in gpus, limit 6, would 7.
            (3.0, 4.0, over(6.0, 7.0)),
            // 0 + 0.5 (a half share) = 0.5 <= 4.
            (0.0, 0.5, Standing::Guaranteed),
            // 5.75 + 0.5 = 6.25 > 6: over by a quarter GPU.
            (5.75, 0.5, over(6.0, 6.25)),
        ];
        for (held, asked, want) in rows {
            let got = standing(Some(&limits), gpus(held), &gpus(asked));
            assert_eq!(got, want, "held {held}, asked {asked}");
        }
        // No limits set: any amount is guaranteed (100 + 100 = 200).
        assert_eq!(
            standing(None, gpus(100.0), &gpus(100.0)),
            Standing::Guaranteed
        );
        // Guaranteed 4, no borrowing limit: 3 + 4 = 7 > 4 borrows, never over.
        let unbounded = TenantLimits {
            guaranteed: quota(4.0),
            borrowing_limit: Quota::default(),
        };
        assert_eq!(
            standing(Some(&unbounded), gpus(3.0), &gpus(4.0)),
            Standing::Borrowing
        );
    }

    #[test]
    fn a_gpu_models_quota_borrows_past_its_guarantee_and_refuses_past_its_limit() {
        // (guaranteed, borrowing, held, asked, borrowed or why not)
        let rows = [
            // A100: 2 guaranteed + 1 borrowable. 1 + 1 = 2 <= 2: not borrowed.
            (Some(2.0), Some(1.0), 1.0, 1.0, Ok(false)),
            // 1 + 2 = 3 > 2: borrowed; 3 <= 2 + 1: allowed.
            (Some(2.0), Some(1.0), 1.0, 2.0, Ok(true)),
            // Shares: 2.5 + 0.5 = 3 <= 3: borrowed, allowed.
            (Some(2.0), Some(1.0), 2.5, 0.5, Ok(true)),
            // 2 + 2 = 4 > 3: refused.
            (
                Some(2.0),
                Some(1.0),
                2.0,
                2.0,
                Err("over quota for GPU model a100: would hold 4.00, tenant t may hold 3.00"),
            ),
            // Guaranteed 2, no borrowing limit: 5 + 1 = 6 > 2 borrows, never refused.
            (Some(2.0), None, 5.0, 1.0, Ok(true)),
            // Only a borrowing limit: no guarantee to pass, no limit to check.
            (None, Some(1.0), 5.0, 1.0, Ok(false)),
        ];
        for (g, b, held, asked, want) in rows {
            let got = model_standing("a100", "t", g, b, held, asked);
            assert_eq!(
                got.map_err(|e| e.to_string()),
                want.map_err(String::from),
                "{g:?}+{b:?}, {held}+{asked}"
            );
        }
    }

    #[test]
    fn a_model_quota_is_checked_against_the_gpus_the_placement_chose() {
        // Tenant t may hold 2 A100s (2 guaranteed + 0 borrowable); the node has 4.
        let mut c = core_with(&[("a", 4)]);
        let a100 = |n: f64| Quota {
            gpus_by_model: [("a100".to_string(), n)].into(),
            ..Quota::default()
        };
        c.set_limits(
            "t",
            TenantLimits {
                guaranteed: a100(2.0),
                borrowing_limit: a100(0.0),
            },
        );
        submit(&mut c, "t", spec("two", 2, "medium", None), 1, 1);
        submit(&mut c, "t", spec("third", 1, "medium", None), 2, 1);
        let d = c.cycle(0);
        // two: 0 + 2 = 2 <= 2 -> placed. third: 2 + 1 = 3 > 2 -> refused.
        assert_eq!(placed(&d), ["two"]);
        assert!(d.iter().any(|d| matches!(d,
            crate::queue::core::Decision::Pending { task_id, reason, estimated_start_ms: None }
                if task_id == "third" && reason.contains("would hold 3.00, tenant t may hold 2.00"))),
            "{d:#?}");
    }

    #[test]
    fn a_model_quota_key_names_whole_models_only() {
        // "a10" is not "NVIDIA A100-SXM4-80GB"; "a100-80gb" is.
        assert!(!names("a10", "NVIDIA A100-SXM4-80GB"));
        assert!(names("a10", "NVIDIA A10"));
        assert!(names("a100-80gb", "NVIDIA A100-SXM4-80GB"));
        assert!(!names("a100-80gb", "NVIDIA A100-SXM4-40GB"));
    }
}
