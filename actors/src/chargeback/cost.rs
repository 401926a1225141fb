//! A cost report: billing records × the price table over a period, grouped
//! by task, model version or UTC day. Pure: the facade reads the records
//! and the clock, this file does the arithmetic.
//!
//! Money is integer micro-units. Each charge — one resource of one
//! allocation over one stretch of the period with one borrowed mark (and,
//! grouped by day, within one day) — is `price × quantity × duration` as an
//! exact integer ratio, rounded half-up once to a micro-unit; a report's
//! figures are sums of those charges, so nothing drifts and allocated =
//! borrowed + guaranteed to the micro-unit. The measured-idle part of a
//! charge is its share `idle_ms / held_ms` of the allocation's whole time
//! held (the inspector accumulates idle time per allocation, not per
//! instant), rounded the same way.
use super::prices::{Micros, PriceTable};
use caldera_spec::BillingRecord;
use serde::Serialize;
use std::collections::BTreeMap;

const HOUR_MS: u128 = 3_600_000;
const DAY_MS: u64 = 86_400_000;

/// How a report's lines are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The submitted task (a replica counts under its service).
    Task,
    /// The model version served (`-`: none).
    Model,
    /// The UTC calendar day.
    Day,
}

impl GroupBy {
    pub const NAMES: &'static str = "task, model, day";

    pub fn parse(s: &str) -> Option<GroupBy> {
        match s {
            "task" => Some(GroupBy::Task),
            "model" => Some(GroupBy::Model),
            "day" => Some(GroupBy::Day),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupBy::Task => "task",
            GroupBy::Model => "model",
            GroupBy::Day => "day",
        }
    }
}

/// One line of a report (a group, or the total).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostLine {
    pub key: String,
    /// Allocations that contributed.
    pub allocations: u32,
    pub allocated: Micros,
    /// The part of `allocated` measured idle.
    pub idle: Micros,
    /// Granted beyond the tenant's guarantee (preemptible).
    pub borrowed: Micros,
    /// Within the tenant's guarantee.
    pub guaranteed: Micros,
    pub gpu_hours: f64,
    pub cpu_core_hours: f64,
    pub memory_gb_hours: f64,
    pub disk_gb_hours: f64,
}

impl CostLine {
    /// `idle / allocated` (0 when nothing was charged).
    pub fn idle_share(&self) -> f64 {
        if self.allocated.0 == 0 {
            0.0
        } else {
            self.idle.0 as f64 / self.allocated.0 as f64
        }
    }

    fn add(&mut self, o: &CostLine) {
        self.allocated.0 += o.allocated.0;
        self.idle.0 += o.idle.0;
        self.borrowed.0 += o.borrowed.0;
        self.guaranteed.0 += o.guaranteed.0;
        self.gpu_hours += o.gpu_hours;
        self.cpu_core_hours += o.cpu_core_hours;
        self.memory_gb_hours += o.memory_gb_hours;
        self.disk_gb_hours += o.disk_gb_hours;
    }
}

/// A tenant's cost over `[from_ms, to_ms)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CostReport {
    pub from_ms: u64,
    pub to_ms: u64,
    pub group_by: GroupBy,
    pub total: CostLine,
    pub groups: Vec<CostLine>,
}

/// `num / den` rounded half-up (`den > 0`).
fn round_div(num: u128, den: u128) -> u64 {
    u64::try_from((2 * num + den) / (2 * den)).unwrap_or(u64::MAX)
}

/// The charges of one stretch `[s, e)` of one record with one borrowed mark.
fn stretch(r: &BillingRecord, p: &PriceTable, s: u64, e: u64) -> CostLine {
    let dur = u128::from(e - s);
    let mut line = CostLine::default();
    let charge = |price: Micros, qty: u128, per: u128| -> u64 {
        round_div(u128::from(price.0) * qty * dur, per * HOUR_MS)
    };
    let mut allocated = 0u64;
    for g in &r.gpus {
        let (n, d) = g.fraction();
        allocated += charge(p.gpu_hour.of(&g.model), n.into(), d.into());
        line.gpu_hours += n as f64 / d as f64 * dur as f64 / HOUR_MS as f64;
    }
    allocated += charge(p.cpu_core_hour, r.cpu_milli.into(), 1000);
    allocated += charge(p.memory_gb_hour, r.memory_mb.into(), 1024);
    allocated += charge(p.disk_gb_hour, r.disk_mb.into(), 1024);
    let hours = dur as f64 / HOUR_MS as f64;
    line.cpu_core_hours = r.cpu_milli as f64 / 1000.0 * hours;
    line.memory_gb_hours = r.memory_mb as f64 / 1024.0 * hours;
    line.disk_gb_hours = r.disk_mb as f64 / 1024.0 * hours;
    line.allocated = Micros(allocated);
    line
}

/// The group key of a stretch starting at `s`.
fn key(r: &BillingRecord, by: GroupBy, s: u64) -> String {
    match by {
        GroupBy::Task => {
            caldera_spec::local_id(r.service.as_deref().unwrap_or(&r.task_id)).to_string()
        }
        GroupBy::Model => r.model_at(s).unwrap_or("-").to_string(),
        GroupBy::Day => caldera_spec::time::utc_date(s),
    }
}

/// `[from, to)` of `r` cut where its group changes: at UTC midnights
/// grouping by day, where an in-place swap changed the version it served
/// grouping by model (each version billed the time it served).
fn pieces(r: &BillingRecord, from: u64, to: u64, by: GroupBy) -> Vec<(u64, u64)> {
    match by {
        GroupBy::Task => vec![(from, to)],
        GroupBy::Model => r.model_runs(from, to),
        GroupBy::Day => days(from, to),
    }
}

/// `[from, to)` cut at UTC midnights.
fn days(from: u64, to: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let next = ((at / DAY_MS) + 1) * DAY_MS;
        out.push((at, next.min(to)));
        at = next;
    }
    out
}

/// The report of `records` over `[from_ms, to_ms)`; an allocation still
/// held is charged up to `min(to_ms, now_ms)`.
pub fn report(
    records: &[BillingRecord],
    prices: &PriceTable,
    from_ms: u64,
    to_ms: u64,
    now_ms: u64,
    by: GroupBy,
) -> CostReport {
    let mut groups: BTreeMap<String, CostLine> = BTreeMap::new();
    for r in records {
        let end = r.end_ms.unwrap_or(now_ms.max(r.start_ms));
        let held = end.saturating_sub(r.start_ms);
        let (s, e) = (r.start_ms.max(from_ms), end.min(to_ms));
        if s >= e {
            continue;
        }
        let mut touched = std::collections::BTreeSet::new();
        for (ds, de) in pieces(r, s, e, by) {
            for (bs, be, borrowed) in r.borrow_runs(ds, de) {
                let mut line = stretch(r, prices, bs, be);
                line.idle = Micros(round_div(
                    u128::from(line.allocated.0) * u128::from(r.idle_ms.min(held)),
                    u128::from(held.max(1)),
                ));
                if borrowed {
                    line.borrowed = line.allocated;
                } else {
                    line.guaranteed = line.allocated;
                }
                let k = key(r, by, bs);
                let g = groups.entry(k.clone()).or_insert_with(|| CostLine {
                    key: k.clone(),
                    ..Default::default()
                });
                g.add(&line);
                if touched.insert(k) {
                    g.allocations += 1;
                }
            }
        }
    }
    let mut total = CostLine {
        key: "total".into(),
        ..Default::default()
    };
    for g in groups.values() {
        total.add(g);
    }
    total.allocations = records
        .iter()
        .filter(|r| r.start_ms.max(from_ms) < r.end_ms.unwrap_or(now_ms.max(r.start_ms)).min(to_ms))
        .count() as u32;
    CostReport {
        from_ms,
        to_ms,
        group_by: by,
        total,
        groups: groups.into_values().collect(),
    }
}

/// The operator's view over every tenant: one line per tenant (its
/// report's total, keyed by the tenant's name) and their sum, keyed `total`.
pub fn across_tenants(per_tenant: &[(String, CostReport)]) -> (Vec<CostLine>, CostLine) {
    let mut total = CostLine {
        key: "total".into(),
        ..Default::default()
    };
    let mut lines = Vec::with_capacity(per_tenant.len());
    for (tenant, rep) in per_tenant {
        total.add(&rep.total);
        total.allocations += rep.total.allocations;
        lines.push(CostLine {
            key: tenant.clone(),
            ..rep.total.clone()
        });
    }
    (lines, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chargeback::prices::GpuPrices;
    use caldera_spec::{BilledGpu, BorrowMark};

    fn prices() -> PriceTable {
        let mut gpu = BTreeMap::new();
        gpu.insert("default".to_string(), Micros(1_000_000));
        gpu.insert("A100".to_string(), Micros(2_400_000));
        PriceTable {
            gpu_hour: GpuPrices(gpu),
            cpu_core_hour: Micros(36_000),
            memory_gb_hour: Micros(10_000),
            disk_gb_hour: Micros(0),
            currency: "EUR".into(),
        }
    }

    fn half_a100(id: &str, start: u64, end: Option<u64>) -> BillingRecord {
        BillingRecord {
            allocation_id: format!("t/{id}.1"),
            task_id: format!("t/{id}"),
            gpus: vec![BilledGpu {
                model: "A100-80GB".into(),
                index: 0,
                memory_mb: 40_960,
                memory_total_mb: 81_920,
            }],
            cpu_milli: 2000,
            memory_mb: 4096,
            start_ms: start,
            end_ms: end,
            ..Default::default()
        }
    }

    /// Half an A100 (2.40/h), 2 cores (0.036/h), 4 GB (0.01/h) for 90 min:
    /// 0.5 × 2.40 × 1.5 = 1.80; 2 × 0.036 × 1.5 = 0.108; 4 × 0.01 × 1.5 = 0.06
    /// → 1.968000. Idle 30 of the 90 min: a third, 0.656000.
    #[test]
    fn a_known_allocation_costs_exactly_price_times_fraction_times_hours() {
        let mut r = half_a100("a", 0, Some(5_400_000));
        r.idle_ms = 1_800_000;
        let rep = report(&[r], &prices(), 0, 10_000_000, 10_000_000, GroupBy::Task);
        assert_eq!(rep.total.allocated, Micros(1_968_000));
        assert_eq!(rep.total.idle, Micros(656_000));
        assert_eq!(rep.total.guaranteed, Micros(1_968_000));
        assert_eq!(rep.groups.len(), 1);
        assert_eq!(rep.groups[0].key, "a");
        assert!((rep.total.gpu_hours - 0.75).abs() < 1e-12);
    }

    /// Held from 0, still held at now = 60 min, report to 30 min: charged
    /// for 30 min only (1.968 / 3 = 0.656); to 2 h: up to now, 60 min.
    #[test]
    fn a_live_allocation_is_charged_up_to_to_or_now() {
        let r = half_a100("live", 0, None);
        let half_hour = report(
            std::slice::from_ref(&r),
            &prices(),
            0,
            1_800_000,
            3_600_000,
            GroupBy::Task,
        );
        assert_eq!(half_hour.total.allocated, Micros(656_000));
        let to_now = report(&[r], &prices(), 0, 7_200_000, 3_600_000, GroupBy::Task);
        assert_eq!(to_now.total.allocated, Micros(1_312_000));
    }

    /// Borrowed from 30 min to 60 min of a 90-min hold: one third borrowed,
    /// and borrowed + guaranteed = allocated.
    #[test]
    fn a_remark_splits_borrowed_from_guaranteed() {
        let mut r = half_a100("b", 0, Some(5_400_000));
        r.marks = vec![
            BorrowMark {
                at_ms: 1_800_000,
                borrowed: true,
            },
            BorrowMark {
                at_ms: 3_600_000,
                borrowed: false,
            },
        ];
        let rep = report(&[r], &prices(), 0, 5_400_000, 5_400_000, GroupBy::Model);
        assert_eq!(rep.total.borrowed, Micros(656_000));
        assert_eq!(rep.total.guaranteed, Micros(1_312_000));
        assert_eq!(
            rep.total.borrowed.0 + rep.total.guaranteed.0,
            rep.total.allocated.0
        );
        assert_eq!(rep.groups[0].key, "-");
    }

    /// A replica serving llama:v1, swapped in place to llama:v2 at 30 min
    /// of a 90-min hold: v1 is billed 30 min (1.968 / 3 = 0.656), v2 the
    /// other 60 (1.312); each counts the allocation once, and the lines add
    /// up to the total.
    #[test]
    fn by_model_bills_each_version_the_time_it_served() {
        let mut r = half_a100("svc.r0", 0, Some(5_400_000));
        r.model = Some("llama:v1".into());
        r.model_marks = vec![caldera_spec::ModelMark {
            at_ms: 1_800_000,
            model: "llama:v2".into(),
        }];
        let rep = report(&[r], &prices(), 0, 5_400_000, 5_400_000, GroupBy::Model);
        let lines: Vec<(&str, Micros, u32)> = rep
            .groups
            .iter()
            .map(|g| (g.key.as_str(), g.allocated, g.allocations))
            .collect();
        assert_eq!(
            lines,
            [
                ("llama:v1", Micros(656_000), 1),
                ("llama:v2", Micros(1_312_000), 1)
            ]
        );
        assert_eq!(rep.total.allocated, Micros(1_968_000));
    }

    /// Two tenants' totals: one line each, keyed by the tenant, and their sum.
    #[test]
    fn the_operators_total_is_each_tenants_total_and_their_sum() {
        let a = report(
            &[half_a100("a", 0, Some(5_400_000))],
            &prices(),
            0,
            5_400_000,
            5_400_000,
            GroupBy::Task,
        );
        let b = report(
            &[half_a100("b", 0, Some(1_800_000))],
            &prices(),
            0,
            5_400_000,
            5_400_000,
            GroupBy::Task,
        );
        let (lines, total) = across_tenants(&[("acme".into(), a), ("bravo".into(), b)]);
        let keys: Vec<(&str, Micros)> = lines
            .iter()
            .map(|l| (l.key.as_str(), l.allocated))
            .collect();
        assert_eq!(
            keys,
            [("acme", Micros(1_968_000)), ("bravo", Micros(656_000))]
        );
        assert_eq!(total.key, "total");
        assert_eq!(total.allocated, Micros(2_624_000));
        assert_eq!(total.allocations, 2);
        assert!((total.gpu_hours - 1.0).abs() < 1e-12);
    }

    /// 23:00 to 01:00 UTC: two day lines of one hour each; 2.40 × 0.5 + 0.072 + 0.04 = 1.312 a day.
    #[test]
    fn by_day_cuts_at_utc_midnight_and_clips_to_the_period() {
        let r = half_a100("d", DAY_MS - 3_600_000, Some(DAY_MS + 3_600_000));
        let rep = report(&[r], &prices(), 0, 2 * DAY_MS, 2 * DAY_MS, GroupBy::Day);
        let keys: Vec<&str> = rep.groups.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["1970-01-01", "1970-01-02"]);
        assert!(rep.groups.iter().all(|g| g.allocated == Micros(1_312_000)));
        assert_eq!(rep.total.allocated, Micros(2_624_000));
        assert_eq!(rep.total.allocations, 1);
        // Outside the period: nothing.
        let none = report(
            &rep_records(),
            &prices(),
            3 * DAY_MS,
            4 * DAY_MS,
            4 * DAY_MS,
            GroupBy::Day,
        );
        assert_eq!(none.total.allocated, Micros(0));
        assert!(none.groups.is_empty());
    }

    fn rep_records() -> Vec<BillingRecord> {
        vec![half_a100("d", 0, Some(DAY_MS))]
    }

    /// A GPU model with no entry of its own pays `default`.
    #[test]
    fn a_model_without_a_price_pays_default() {
        let mut r = half_a100("t4", 0, Some(3_600_000));
        r.gpus[0].model = "T4-16GB".into();
        r.gpus[0].memory_total_mb = 16_384;
        r.gpus[0].memory_mb = 16_384;
        r.cpu_milli = 0;
        r.memory_mb = 0;
        let rep = report(&[r], &prices(), 0, 3_600_000, 3_600_000, GroupBy::Task);
        assert_eq!(rep.total.allocated, Micros(1_000_000));
    }
}
