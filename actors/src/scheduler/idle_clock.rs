//! How long each held allocation was measured idle, between inspector passes:
//! the idle inspector keeps the clock, the usage record persists its changed
//! totals into the billing records.
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
    pub(super) tenants: BTreeSet<String>,
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
    pub(super) fn tick(&mut self, idle_ids: &[String], now: u64, period_ms: u64) {
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

    /// The allocations whose idle totals changed since they were last persisted.
    pub(super) fn dirty(&self) -> impl Iterator<Item = &String> {
        self.dirty.iter()
    }

    /// The changed totals are now in the store.
    pub(super) fn persisted(&mut self) {
        self.dirty.clear();
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
