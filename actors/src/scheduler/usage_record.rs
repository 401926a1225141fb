//! Each inspector pass, persisted: the tenants' and the pool's samples go
//! into the downsampled history (`h/`), and the idle time each allocation
//! was measured into its billing record — one batch, one commit (and so at
//! most one flush) per sample period, never one per sample.
use super::idle::Survey;
use super::Scheduler;
use crate::commit_site::CommitSite;
use crate::usage_history::{writer, PoolSample, TenantSample};
use caldera_spec::Usage;
use std::collections::{BTreeSet, HashMap};

/// Measured-idle time per held allocation, and which totals changed since
/// they were last persisted.
#[derive(Debug, Default)]
pub struct IdleClock {
    idle_ms: HashMap<String, u64>,
    dirty: BTreeSet<String>,
    last_pass_ms: Option<u64>,
    /// Tenants sampled so far: each gets a point every pass from its first
    /// allocation on (zeros included), so a bucket's mean counts idle time.
    tenants: BTreeSet<String>,
}

impl IdleClock {
    /// Seeded from the open billing records (a restarted Scheduler carries on).
    pub fn load(store: &caldera_storage::Store) -> IdleClock {
        let mut c = IdleClock::default();
        for r in store.open_billings().flatten() {
            c.tenants.insert(r.tenant.clone());
            c.idle_ms.insert(r.allocation_id, r.idle_ms);
        }
        c
    }

    pub fn idle_ms(&self, allocation_id: &str) -> u64 {
        self.idle_ms.get(allocation_id).copied().unwrap_or(0)
    }

    pub fn forget(&mut self, allocation_id: &str) {
        self.idle_ms.remove(allocation_id);
        self.dirty.remove(allocation_id);
    }

    /// Adds the time since the last pass to each allocation measured idle
    /// now. A gap longer than two periods (a restart) is not counted: no
    /// one measured it.
    fn tick(&mut self, idle_ids: &[String], now: u64, period_ms: u64) {
        let elapsed = self.last_pass_ms.map_or(0, |l| now.saturating_sub(l));
        self.last_pass_ms = Some(now);
        if elapsed == 0 || elapsed > 2 * period_ms {
            return;
        }
        for id in idle_ids {
            *self.idle_ms.entry(id.clone()).or_default() += elapsed;
            self.dirty.insert(id.clone());
        }
    }
}

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
        let dirty: Vec<String> = self.idle.billing.dirty.iter().cloned().collect();
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
            self.idle.billing.dirty.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Passes every 10 s: an allocation idle in passes 2 and 3 gets 20 s; a
    /// pass after a 60 s gap (a restart) adds nothing.
    #[test]
    fn idle_time_is_the_time_between_passes_that_measured_it_idle() {
        let mut c = IdleClock::default();
        let a = vec!["t/a.1".to_string()];
        c.tick(&a, 0, 10_000);
        assert_eq!(
            c.idle_ms("t/a.1"),
            0,
            "the first pass has no interval before it"
        );
        c.tick(&a, 10_000, 10_000);
        c.tick(&a, 20_000, 10_000);
        c.tick(&[], 30_000, 10_000);
        assert_eq!(c.idle_ms("t/a.1"), 20_000);
        c.tick(&a, 90_000, 10_000);
        assert_eq!(c.idle_ms("t/a.1"), 20_000);
        assert!(c.dirty.contains("t/a.1"));
    }
}
