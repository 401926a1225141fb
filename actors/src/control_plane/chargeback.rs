//! The facade's history and cost reads: a tenant's usage curve, the pool's,
//! and a tenant's cost report, all from sled (on the blocking pool), so
//! they answer the same after a restart.
use super::{blocking, ControlPlane};
use crate::chargeback::{self, CostLine, CostReport, GroupBy, PriceTable};
use crate::errors::Result;
use crate::usage_history::{tier_for, PoolSample, TenantSample};
use caldera_spec::BillingRecord;
use caldera_storage::{HistoryPoint, HistorySeries};

/// One point of a curve: the mean over its bucket and the max.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CurvePoint<T: serde::Serialize> {
    pub at_ms: u64,
    /// Raw samples the point stands for (1 at the finest tier).
    pub samples: u32,
    pub mean: T,
    pub max: T,
}

/// A curve over `[from_ms, to_ms)` at one resolution.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Curve<T: serde::Serialize> {
    pub from_ms: u64,
    pub to_ms: u64,
    /// Bucket width, ms (the sample period at the finest tier).
    pub resolution_ms: u64,
    pub points: Vec<CurvePoint<T>>,
}

impl ControlPlane {
    /// Now, by the control plane's clock (Unix ms).
    pub fn now_ms(&self) -> u64 {
        self.sh.clock.now_ms()
    }

    /// The price table in force.
    pub fn prices(&self) -> PriceTable {
        PriceTable::from_config(&self.sh.config)
    }

    /// `tenant`'s allocated vs used over `[from_ms, to_ms)`.
    pub async fn usage_history(
        &self,
        tenant: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Curve<TenantSample>> {
        self.curve(
            HistorySeries::Tenant(tenant.to_string()),
            from_ms,
            to_ms,
            TenantSample::from_values,
        )
        .await
    }

    /// The pool's capacity, allocated, used, idle and borrowed over `[from_ms, to_ms)`.
    pub async fn pool_history(&self, from_ms: u64, to_ms: u64) -> Result<Curve<PoolSample>> {
        self.curve(
            HistorySeries::Pool,
            from_ms,
            to_ms,
            crate::usage_history::pool_from_values,
        )
        .await
    }

    async fn curve<T: serde::Serialize + Send + 'static>(
        &self,
        series: HistorySeries,
        from_ms: u64,
        to_ms: u64,
        read: fn(&[f32]) -> T,
    ) -> Result<Curve<T>> {
        let tier = tier_for(from_ms, self.now_ms());
        let resolution_ms = if tier.resolution_ms == 0 {
            self.sh.config.scheduling.usage_sample_ms
        } else {
            tier.resolution_ms
        };
        let store = self.store();
        let points: Vec<HistoryPoint> =
            blocking(move || store.history(tier.id, &series, from_ms, to_ms)).await?;
        let points = points
            .into_iter()
            .map(|p| CurvePoint {
                at_ms: p.at_ms,
                samples: p.count,
                mean: read(&p.mean),
                max: read(&p.max),
            })
            .collect();
        Ok(Curve {
            from_ms,
            to_ms,
            resolution_ms,
            points,
        })
    }

    /// `tenant`'s cost over `[from_ms, to_ms)`, grouped `by`, with the
    /// billing records it was computed from.
    pub async fn cost(
        &self,
        tenant: &str,
        from_ms: u64,
        to_ms: u64,
        by: GroupBy,
    ) -> Result<(Vec<BillingRecord>, CostReport)> {
        let store = self.store();
        let t = tenant.to_string();
        let records = blocking(move || store.billing_between(&t, from_ms, to_ms)).await?;
        let prices = self.prices();
        let rep = chargeback::report(&records, &prices, from_ms, to_ms, self.now_ms(), by);
        Ok((records, rep))
    }

    /// Every tenant's cost over `[from_ms, to_ms)`: one line per tenant (in
    /// name order) and their sum, for the operator.
    pub async fn cost_all(&self, from_ms: u64, to_ms: u64) -> Result<(Vec<CostLine>, CostLine)> {
        let mut per_tenant = Vec::new();
        for t in self.tenants().await? {
            let (_, rep) = self.cost(&t.name, from_ms, to_ms, GroupBy::Task).await?;
            per_tenant.push((t.name, rep));
        }
        per_tenant.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(chargeback::across_tenants(&per_tenant))
    }
}
