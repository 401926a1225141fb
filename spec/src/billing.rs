//! Billing records: one per allocation, the persisted history chargeback
//! is computed from. The live ledger (`Allocation`) forgets an allocation
//! when it is released; its billing record keeps what it held, from when to
//! when, and on whose guarantee, for the retention period.
use crate::Allocation;
use serde::{Deserialize, Serialize};

/// One GPU an allocation held, with what is needed to charge it without the
/// node's inventory: the model (for its price) and the GPU's total memory
/// (for the fraction).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BilledGpu {
    pub model: String,
    pub index: u32,
    /// GPU memory granted, MiB.
    pub memory_mb: u64,
    /// The GPU's whole memory, MiB (as the node reported it at grant).
    pub memory_total_mb: u64,
}

impl BilledGpu {
    /// The fraction of this GPU that is charged, as `(numerator,
    /// denominator)`: granted memory over total memory, capped at 1. A
    /// `share` request is granted as that share of the GPU's memory, so it
    /// is the share; a `memory_gb` request holds that fraction of the GPU
    /// away from everyone else, so it pays for it.
    pub fn fraction(&self) -> (u64, u64) {
        let total = self.memory_total_mb.max(1);
        (self.memory_mb.min(total), total)
    }
}

/// A change of an allocation's borrowed mark while it was held (a quota
/// change re-marks live allocations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BorrowMark {
    pub at_ms: u64,
    pub borrowed: bool,
}

/// An in-place swap of the model version an allocation serves (a
/// service's replica swapped on the slice it holds): from `at_ms` on, its
/// time is billed to `model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelMark {
    pub at_ms: u64,
    /// `name:version` served from then on.
    pub model: String,
}

/// What one allocation held, from when to when: written in the batch that
/// records the grant, closed in the batch that frees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BillingRecord {
    pub allocation_id: String,
    pub tenant: String,
    /// The task key (`tenant/id`).
    pub task_id: String,
    /// An inference replica: its service's task key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The model version the task serves (`name:version`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub node: String,
    pub gpus: Vec<BilledGpu>,
    pub cpu_milli: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
    /// When the room was taken (the allocation's `created_ms`).
    pub start_ms: u64,
    /// When it was freed; `None` while it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// Why it was freed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// Borrowed (beyond the tenant's guarantee) at `start_ms`.
    pub borrowed: bool,
    /// Later changes of the borrowed mark, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<BorrowMark>,
    /// How long the idle inspector measured it idle, ms in all.
    #[serde(default)]
    pub idle_ms: u64,
    /// Later changes of the model version it served (in-place swaps), in
    /// time order: `model` is what it served from `start_ms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_marks: Vec<ModelMark>,
}

impl BillingRecord {
    /// The open record of a grant. `total_mb(index)` is the node's memory of
    /// GPU `index` (None: unknown, the GPU is charged whole).
    pub fn open(
        a: &Allocation,
        model: Option<String>,
        service: Option<String>,
        total_mb: impl Fn(u32) -> Option<u64>,
    ) -> BillingRecord {
        BillingRecord {
            allocation_id: a.allocation_id.clone(),
            tenant: a.tenant.clone(),
            task_id: a.task_id.clone(),
            service,
            model,
            node: a.node.clone(),
            gpus: a
                .gpus
                .iter()
                .map(|g| BilledGpu {
                    model: g.model.clone(),
                    index: g.index,
                    memory_mb: g.memory_mb,
                    memory_total_mb: total_mb(g.index).unwrap_or(g.memory_mb),
                })
                .collect(),
            cpu_milli: a.cpu_milli,
            memory_mb: a.memory_mb,
            disk_mb: a.disk_mb,
            start_ms: a.created_ms,
            end_ms: None,
            end_reason: None,
            borrowed: a.borrowed,
            marks: Vec::new(),
            idle_ms: 0,
            model_marks: Vec::new(),
        }
    }

    /// The model version served at `at_ms`.
    pub fn model_at(&self, at_ms: u64) -> Option<&str> {
        self.model_marks
            .iter()
            .take_while(|m| m.at_ms <= at_ms)
            .last()
            .map(|m| m.model.as_str())
            .or(self.model.as_deref())
    }

    /// `[from, to)` cut where the model version served changed:
    /// `(from, to)` pieces, each served by one version.
    pub fn model_runs(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = from;
        for m in self
            .model_marks
            .iter()
            .filter(|m| m.at_ms > from && m.at_ms < to)
        {
            if m.at_ms > at {
                out.push((at, m.at_ms));
                at = m.at_ms;
            }
        }
        if at < to {
            out.push((at, to));
        }
        out
    }

    /// The borrowed mark as of `at_ms`.
    pub fn borrowed_at(&self, at_ms: u64) -> bool {
        self.marks
            .iter()
            .take_while(|m| m.at_ms <= at_ms)
            .last()
            .map_or(self.borrowed, |m| m.borrowed)
    }

    /// `[from, to)` cut into runs of one borrowed mark: `(from, to, borrowed)`.
    pub fn borrow_runs(&self, from: u64, to: u64) -> Vec<(u64, u64, bool)> {
        let mut out = Vec::new();
        let mut at = from;
        let mut state = self.borrowed_at(from);
        for m in self.marks.iter().filter(|m| m.at_ms > from && m.at_ms < to) {
            if m.borrowed != state {
                out.push((at, m.at_ms, state));
                at = m.at_ms;
                state = m.borrowed;
            }
        }
        if at < to {
            out.push((at, to, state));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(marks: &[(u64, bool)]) -> BillingRecord {
        BillingRecord {
            marks: marks
                .iter()
                .map(|&(at_ms, borrowed)| BorrowMark { at_ms, borrowed })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn borrow_runs_split_at_each_change_inside_the_range() {
        let r = rec(&[(100, true), (200, false), (250, false)]);
        assert_eq!(
            r.borrow_runs(0, 300),
            vec![(0, 100, false), (100, 200, true), (200, 300, false)]
        );
        // Starting inside the borrowed run.
        assert_eq!(r.borrow_runs(150, 180), vec![(150, 180, true)]);
        assert!(!r.borrowed_at(99));
        assert!(r.borrowed_at(100));
    }

    #[test]
    fn model_runs_split_at_each_swap_and_name_the_version_served() {
        let r = BillingRecord {
            model: Some("llama:v1".into()),
            model_marks: vec![
                ModelMark {
                    at_ms: 100,
                    model: "llama:v2".into(),
                },
                ModelMark {
                    at_ms: 300,
                    model: "llama:v3".into(),
                },
            ],
            ..Default::default()
        };
        assert_eq!(r.model_runs(0, 400), vec![(0, 100), (100, 300), (300, 400)]);
        assert_eq!(r.model_runs(150, 200), vec![(150, 200)]);
        assert_eq!(r.model_at(99), Some("llama:v1"));
        assert_eq!(r.model_at(100), Some("llama:v2"));
        assert_eq!(r.model_at(350), Some("llama:v3"));
    }

    #[test]
    fn a_fraction_is_capped_at_one_whole_gpu() {
        let g = BilledGpu {
            model: "A100".into(),
            index: 0,
            memory_mb: 90_000,
            memory_total_mb: 81_920,
        };
        assert_eq!(g.fraction(), (81_920, 81_920));
        let g = BilledGpu {
            memory_mb: 0,
            memory_total_mb: 0,
            ..g
        };
        assert_eq!(g.fraction(), (0, 1));
    }
}
