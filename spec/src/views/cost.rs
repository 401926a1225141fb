//! What a cost report answers (`GET /v1/tenants/{name}/cost`, `GET /v1/cost`).
//! Money is exact: decimals of the currency, and the same in micro-units.
use crate::time::rfc3339;
use crate::{BilledGpu, BillingRecord, BorrowMark, ModelMark};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One line of a cost report: a group (task, model or day), or the total.
/// Money is exact: decimals of the currency, and the same in micro-units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CostLineView {
    /// The task, model or day (`YYYY-MM-DD`, UTC); `total` for the total.
    pub key: String,
    /// Allocations that contributed.
    pub allocations: u32,
    #[cfg_attr(feature = "openapi", schema(example = "12.500000"))]
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

/// The price table in force (config keys `price-*`), decimals of the currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PricesView {
    /// Per GPU-hour by GPU model; `default` for models not listed.
    pub gpu_hour: BTreeMap<String, String>,
    pub cpu_core_hour: String,
    pub memory_gb_hour: String,
    pub disk_gb_hour: String,
}

/// One allocation's billing record (with `?records=true`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

impl From<&BillingRecord> for BillingRecordView {
    /// The record in the tenant's own ids.
    fn from(r: &BillingRecord) -> BillingRecordView {
        BillingRecordView {
            allocation_id: crate::local_id(&r.allocation_id).to_string(),
            task: crate::local_id(&r.task_id).to_string(),
            service: r.service.as_deref().map(|s| crate::local_id(s).to_string()),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    pub money: String,
    pub total: CostLineView,
    pub groups: Vec<CostLineView>,
    /// The billing records behind the report (`?records=true` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<BillingRecordView>>,
}

/// `GET /v1/cost`: every tenant's cost over one period, and the total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CostTotalView {
    /// RFC 3339; the period is `[from, to)`.
    pub from: String,
    pub to: String,
    pub from_ms: u64,
    pub to_ms: u64,
    pub currency: String,
    /// One line per tenant, keyed by its name, in name order.
    pub tenants: Vec<CostLineView>,
    /// Their sum, keyed `total`.
    pub total: CostLineView,
}
