//! What the pool and its tenants use and cost: the pool's utilisation now
//! (a tenant sees only its own line per tenant), the usage curves from the
//! persisted, downsampled history (the finest tier that still holds `from`
//! answers, and `resolution_ms` says which), and a tenant's cost over a
//! period from its billing records and the price table.
use super::tenants::VisibleTenant;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::routes::cost_views::{
    cost_line, prices, BillingRecordView, CostReportView, CostTotalView, PoolHistoryView,
    PoolPoint, TenantUsagePoint, TenantUsageView, UsagePair,
};
use crate::state::AppState;
use caldera_actors::chargeback::{csv, CostLine, CostReport, GroupBy};
use caldera_actors::views::{PoolMetrics, Utilization};
use caldera_spec::time::rfc3339;
use caldera_spec::BillingRecord;

/// Capacity, allocated and measured use per dimension. A tenant sees the
/// pool, but only its own line of the per-tenant table.
pub async fn utilization(st: &AppState, caller: &User) -> Result<Utilization, ApiError> {
    let mut u = st.cp.utilization().await?;
    if let Some(t) = caller.tenant() {
        u.by_tenant.retain(|k| k.key == t);
    }
    Ok(u)
}

/// The pool's queue by priority, and what idle and borrowed allocations
/// hold per tenant, read together (the figures `/metrics` shows).
pub async fn pool_metrics(st: &AppState, _: &User) -> Result<PoolMetrics, ApiError> {
    Ok(st.cp.pool_metrics().await?)
}

/// The tenant's allocated vs measured use over `[from, to)`, each point
/// the mean over its bucket, with its max.
pub async fn tenant_history(
    st: &AppState,
    tenant: &VisibleTenant,
    from: u64,
    to: u64,
) -> Result<TenantUsageView, ApiError> {
    let c = st.cp.usage_history(tenant.name(), from, to).await?;
    let samples: Vec<TenantUsagePoint> = c
        .points
        .iter()
        .map(|p| TenantUsagePoint {
            at: rfc3339(p.at_ms),
            at_ms: p.at_ms,
            allocated: p.mean.allocated,
            used: p.mean.used,
            max: UsagePair {
                allocated: p.max.allocated,
                used: p.max.used,
            },
            samples: p.samples,
        })
        .collect();
    let current = c.points.last().map(|p| UsagePair {
        allocated: p.mean.allocated,
        used: p.mean.used,
    });
    Ok(TenantUsageView {
        tenant: tenant.name().to_string(),
        from: rfc3339(c.from_ms),
        to: rfc3339(c.to_ms),
        from_ms: c.from_ms,
        to_ms: c.to_ms,
        resolution_ms: c.resolution_ms,
        current,
        samples,
        note: "used on simulated GPUs is the CPU use of the workload's process tree".into(),
    })
}

/// The pool's capacity, allocated, used, idle and borrowed per dimension
/// over `[from, to)`.
pub async fn pool_history(
    st: &AppState,
    _: &Operator,
    from: u64,
    to: u64,
) -> Result<PoolHistoryView, ApiError> {
    let c = st.cp.pool_history(from, to).await?;
    let points = c
        .points
        .iter()
        .map(|p| PoolPoint {
            at: rfc3339(p.at_ms),
            at_ms: p.at_ms,
            mean: p.mean,
            max: p.max,
            samples: p.samples,
        })
        .collect();
    Ok(PoolHistoryView {
        from: rfc3339(c.from_ms),
        to: rfc3339(c.to_ms),
        from_ms: c.from_ms,
        to_ms: c.to_ms,
        resolution_ms: c.resolution_ms,
        points,
    })
}

/// What the tenant's allocations cost over `[from, to)`, grouped `by`: the
/// billing records and the report made of them.
pub async fn cost(
    st: &AppState,
    tenant: &VisibleTenant,
    from: u64,
    to: u64,
    by: GroupBy,
) -> Result<(Vec<BillingRecord>, CostReport), ApiError> {
    Ok(st.cp.cost(tenant.name(), from, to, by).await?)
}

/// Every tenant's cost over `[from, to)`, one line each, and their total.
pub async fn cost_all(
    st: &AppState,
    _: &Operator,
    from: u64,
    to: u64,
) -> Result<(Vec<CostLine>, CostLine), ApiError> {
    Ok(st.cp.cost_all(from, to).await?)
}

/// The tenant's cost report over `[from, to)`, grouped `by`, as the API
/// shows it (with the billing records behind it when `with_records`).
pub async fn cost_report(
    st: &AppState,
    tenant: &VisibleTenant,
    from: u64,
    to: u64,
    by: GroupBy,
    with_records: bool,
) -> Result<CostReportView, ApiError> {
    let (records, rep) = cost(st, tenant, from, to, by).await?;
    let p = st.cp.prices();
    Ok(CostReportView {
        tenant: tenant.name().to_string(),
        from: rfc3339(from),
        to: rfc3339(to),
        from_ms: from,
        to_ms: to,
        group_by: by.as_str().to_string(),
        currency: p.currency.clone(),
        prices: prices(&p),
        money: "exact decimals of the currency (micro-units); each charge rounded half-up once to a micro-unit".into(),
        total: cost_line(&rep.total),
        groups: rep.groups.iter().map(cost_line).collect(),
        records: with_records.then(|| records.iter().map(BillingRecordView::from).collect()),
    })
}

/// The tenant's cost report over `[from, to)`, grouped `by`, as CSV.
pub async fn cost_csv(
    st: &AppState,
    tenant: &VisibleTenant,
    from: u64,
    to: u64,
    by: GroupBy,
) -> Result<String, ApiError> {
    let (_, rep) = cost(st, tenant, from, to, by).await?;
    Ok(csv::render(tenant.name(), &rep, &st.cp.prices().currency))
}

/// Every tenant's cost over `[from, to)`, one line each and the total, as
/// the API shows it.
pub async fn cost_total(
    st: &AppState,
    op: &Operator,
    from: u64,
    to: u64,
) -> Result<CostTotalView, ApiError> {
    let (lines, total) = cost_all(st, op, from, to).await?;
    Ok(CostTotalView {
        from: rfc3339(from),
        to: rfc3339(to),
        from_ms: from,
        to_ms: to,
        currency: st.cp.prices().currency,
        tenants: lines.iter().map(cost_line).collect(),
        total: cost_line(&total),
    })
}
