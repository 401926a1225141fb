//! What the cost and usage-history routes answer: the views of
//! `caldera_spec::views`, and how the control plane's cost lines and price
//! table become them.
use caldera_actors::chargeback::{CostLine, PriceTable};
pub use caldera_spec::views::{
    BillingRecordView, CostLineView, CostReportView, CostTotalView, PoolHistoryView, PoolPoint,
    PricesView, TenantUsagePoint, TenantUsageView, UsagePair,
};

/// A cost line as the API shows it.
pub fn cost_line(l: &CostLine) -> CostLineView {
    CostLineView {
        key: l.key.clone(),
        allocations: l.allocations,
        allocated_cost: l.allocated.decimal(),
        idle_cost: l.idle.decimal(),
        idle_share: l.idle_share(),
        borrowed_cost: l.borrowed.decimal(),
        guaranteed_cost: l.guaranteed.decimal(),
        allocated_cost_micros: l.allocated.0,
        idle_cost_micros: l.idle.0,
        borrowed_cost_micros: l.borrowed.0,
        guaranteed_cost_micros: l.guaranteed.0,
        gpu_hours: l.gpu_hours,
        cpu_core_hours: l.cpu_core_hours,
        memory_gb_hours: l.memory_gb_hours,
        disk_gb_hours: l.disk_gb_hours,
    }
}

/// The price table as the API shows it.
pub fn prices(p: &PriceTable) -> PricesView {
    PricesView {
        gpu_hour: p
            .gpu_hour
            .0
            .iter()
            .map(|(k, v)| (k.clone(), v.decimal()))
            .collect(),
        cpu_core_hour: p.cpu_core_hour.decimal(),
        memory_gb_hour: p.memory_gb_hour.decimal(),
        disk_gb_hour: p.disk_gb_hour.decimal(),
    }
}
