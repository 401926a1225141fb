//! What the cost and usage-history routes answer, typed so `/openapi.json`
//! documents it (the keys they always answered).
use caldera_actors::chargeback::{CostLine, PriceTable};
use caldera_actors::usage_history::PoolSample;
use caldera_spec::time::rfc3339;
use caldera_spec::{BilledGpu, BillingRecord, BorrowMark, ModelMark, Usage};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One line of a cost report: a group (task, model or day), or the total.
/// Money is exact: decimals of the currency, and the same in micro-units.
#[derive(Serialize, ToSchema)]
pub struct CostLineView {
    /// The task, model or day (`YYYY-MM-DD`, UTC); `total` for the total.
    pub key: String,
    /// Allocations that contributed.
    pub allocations: u32,
    #[schema(example = "12.500000")]
    pub allocated_cost: String,
    /// The part of `allocated_cost` measured idle.
    pub idle_cost: String,
    /// `idle_cost / allocated_cost` (0 when nothing was charged).
    pub idle_share: f64,
    /// Held beyond the tenant's guarantee (borrowed, preemptible).
    pub borrowed_cost: String,
    /// Held within the tenant's guarantee.
    pub guaranteed_cost: String,
    pub allocated_cost_micros: u64,
    pub idle_cost_micros: u64,
    pub borrowed_cost_micros: u64,
    pub guaranteed_cost_micros: u64,
    /// GPU-hours, a fractional slice counted by its fraction.
    pub gpu_hours: f64,
    pub cpu_core_hours: f64,
    pub memory_gb_hours: f64,
    pub disk_gb_hours: f64,
}

impl CostLineView {
    pub fn of(l: &CostLine) -> CostLineView {
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
}

/// The price table in force (config keys `price-*`), decimals of the currency.
#[derive(Serialize, ToSchema)]
pub struct PricesView {
    /// Per GPU-hour by GPU model; `default` for models not listed.
    pub gpu_hour: BTreeMap<String, String>,
    pub cpu_core_hour: String,
    pub memory_gb_hour: String,
    pub disk_gb_hour: String,
}

impl PricesView {
    pub fn of(p: &PriceTable) -> PricesView {
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
}

/// One allocation's billing record (with `?records=true`).
#[derive(Serialize, ToSchema)]
pub struct BillingRecordView {
    pub allocation_id: String,
    pub task: String,
    /// The service of a replica.
    pub service: Option<String>,
    /// `name:version` of the model it served from its start.
    pub model: Option<String>,
    /// In-place swaps while it was held: from `at_ms` it served `model`.
    pub model_marks: Vec<ModelMark>,
    pub node: String,
    pub gpus: Vec<BilledGpu>,
    pub cpu_milli: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
    /// RFC 3339.
    pub start: String,
    pub start_ms: u64,
    /// RFC 3339; null while the allocation is held (charged up to `to`).
    pub end: Option<String>,
    pub end_ms: Option<u64>,
    pub end_reason: Option<String>,
    /// Borrowed (beyond the guarantee) when granted.
    pub borrowed: bool,
    /// Changes of the borrowed mark while it was held.
    pub marks: Vec<BorrowMark>,
    /// Time measured idle while held, ms.
    pub idle_ms: u64,
}

impl BillingRecordView {
    pub fn of(r: &BillingRecord) -> BillingRecordView {
        BillingRecordView {
            allocation_id: caldera_spec::local_id(&r.allocation_id).to_string(),
            task: caldera_spec::local_id(&r.task_id).to_string(),
            service: r
                .service
                .as_deref()
                .map(|s| caldera_spec::local_id(s).to_string()),
            model: r.model.clone(),
            model_marks: r.model_marks.clone(),
            node: r.node.clone(),
            gpus: r.gpus.clone(),
            cpu_milli: r.cpu_milli,
            memory_mb: r.memory_mb,
            disk_mb: r.disk_mb,
            start: rfc3339(r.start_ms),
            start_ms: r.start_ms,
            end: r.end_ms.map(rfc3339),
            end_ms: r.end_ms,
            end_reason: r.end_reason.clone(),
            borrowed: r.borrowed,
            marks: r.marks.clone(),
            idle_ms: r.idle_ms,
        }
    }
}

/// `GET /v1/tenants/{name}/cost` (JSON).
#[derive(Serialize, ToSchema)]
pub struct CostReportView {
    pub tenant: String,
    /// RFC 3339; the period is `[from, to)`.
    pub from: String,
    pub to: String,
    pub from_ms: u64,
    pub to_ms: u64,
    /// `task`, `model` or `day`.
    pub group_by: String,
    pub currency: String,
    pub prices: PricesView,
    /// How money is computed.
    pub money: &'static str,
    pub total: CostLineView,
    pub groups: Vec<CostLineView>,
    /// The billing records behind the report (`?records=true` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<BillingRecordView>>,
}

/// Allocated and measured use of one moment (or bucket).
#[derive(Serialize, ToSchema)]
pub struct UsagePair {
    pub allocated: Usage,
    pub used: Usage,
}

/// One point of a tenant's usage curve: the mean over its bucket, and the max.
#[derive(Serialize, ToSchema)]
pub struct TenantUsagePoint {
    /// RFC 3339 of the bucket's start.
    pub at: String,
    pub at_ms: u64,
    pub allocated: Usage,
    pub used: Usage,
    pub max: UsagePair,
    /// Raw samples the point stands for (1 at the finest tier).
    pub samples: u32,
}

/// `GET /v1/tenants/{name}/usage`.
#[derive(Serialize, ToSchema)]
pub struct TenantUsageView {
    pub tenant: String,
    /// RFC 3339; the range is `[from, to)`.
    pub from: String,
    pub to: String,
    pub from_ms: u64,
    pub to_ms: u64,
    /// Bucket width of the tier that answered, ms (10 s, 5 min or 1 h by default).
    pub resolution_ms: u64,
    /// The last point's means; null before the first sample.
    pub current: Option<UsagePair>,
    pub samples: Vec<TenantUsagePoint>,
    pub note: &'static str,
}

/// One point of the pool's curve: the mean over its bucket, and the max.
#[derive(Serialize, ToSchema)]
pub struct PoolPoint {
    /// RFC 3339 of the bucket's start.
    pub at: String,
    pub at_ms: u64,
    pub mean: PoolSample,
    pub max: PoolSample,
    pub samples: u32,
}

/// `GET /v1/utilization/history`.
#[derive(Serialize, ToSchema)]
pub struct PoolHistoryView {
    pub from: String,
    pub to: String,
    pub from_ms: u64,
    pub to_ms: u64,
    pub resolution_ms: u64,
    pub points: Vec<PoolPoint>,
}
