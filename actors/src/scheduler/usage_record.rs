//! Each inspector pass, persisted: the tenants' and the pool's samples go
//! into the downsampled history (`h/`), and the idle time each allocation
//! was measured into its billing record — one batch, one commit (and so at
//! most one flush) per sample period, never one per sample.
use super::idle::Survey;
use super::Scheduler;
use crate::commit_site::CommitSite;
use crate::usage_history::{writer, PoolSample, TenantSample};
use caldera_spec::Usage;

fn gb(mb: f64) -> f64 {
    mb / 1024.0
}

impl Scheduler {
    /// Persists one pass: history samples and changed idle totals.
    pub(super) fn record_usage(&mut self, survey: &Survey, now: u64) {
        let period = self.idle.sample_every().as_millis() as u64;
        self.idle.billing.tick(&survey.idle_ids, now, period);
        let clock = &mut self.idle.billing;
        clock.tenants.extend(survey.allocated.keys().cloned());
        let tenants: Vec<(String, TenantSample)> = clock
            .tenants
            .iter()
            .map(|t| {
                let s = TenantSample {
                    allocated: survey.allocated.get(t).copied().unwrap_or_default(),
                    used: survey.used.get(t).copied().unwrap_or_default(),
                };
                (t.clone(), s)
            })
            .collect();
        let total = self.utilization().total;
        let dim = |f: fn(&crate::views::Dim) -> f64| Usage {
            gpus: f(&total.gpus),
            gpu_memory_gb: gb(f(&total.gpu_memory_mb)),
            cpu_cores: f(&total.cpu_cores),
            memory_gb: gb(f(&total.memory_mb)),
            disk_gb: gb(f(&total.disk_mb)),
        };
        let pool = PoolSample {
            capacity: dim(|d| d.capacity),
            allocated: dim(|d| d.allocated),
            used: dim(|d| d.used),
            idle: survey.idle,
            borrowed: survey.borrowed,
        };
        let store = self.gate.store().clone();
        let mut b = store.batch();
        let keep = self
            .config
            .chargeback
            .billing_retention_days
            .saturating_mul(86_400_000);
        if let Err(e) = writer::stage(&store, &mut b, now, &tenants, &pool, keep) {
            tracing::warn!(error = %e, "usage history not recorded this pass");
            return;
        }
        let dirty: Vec<String> = self.idle.billing.dirty().cloned().collect();
        for id in &dirty {
            if let Ok(Some(mut r)) = store.open_billing(id) {
                r.idle_ms = r.idle_ms.max(self.idle.billing.idle_ms(id));
                b.put_open_billing(&r);
            }
        }
        if self
            .gate
            .commit_logged(CommitSite::UsageHistory, b)
            .is_some()
        {
            self.idle.billing.persisted();
        }
    }
}
