//! Who may start an attempt now. Three limits at once: per subscription
//! (a slow receiver holds only its own few), per tenant (one tenant's many
//! slow receivers hold only that tenant's share) and in all (memory holds
//! only the attempts in flight). The per-tenant limit is what keeps one
//! tenant's hanging receivers from delaying another tenant's deliveries.
use caldera_spec::webhook::WebhookRecord;
use std::collections::HashMap;

/// Whose share a subscription's attempts count against: the tenant that
/// made it; the operator's subscriptions share one more.
pub fn holder(s: &WebhookRecord) -> &str {
    s.owner.as_deref().unwrap_or("")
}

/// The three limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub total: usize,
    pub per_holder: usize,
    pub per_webhook: usize,
}

/// Attempts in flight, counted three ways.
#[derive(Debug)]
pub struct Slots {
    limits: Limits,
    total: usize,
    per_holder: HashMap<String, usize>,
    per_webhook: HashMap<String, usize>,
}

impl Slots {
    pub fn new(limits: Limits) -> Slots {
        Slots {
            limits,
            total: 0,
            per_holder: HashMap::new(),
            per_webhook: HashMap::new(),
        }
    }

    /// Attempts of subscription `webhook` in flight.
    pub fn busy(&self, webhook: &str) -> usize {
        self.per_webhook.get(webhook).copied().unwrap_or(0)
    }

    /// Whether every slot is taken.
    pub fn full(&self) -> bool {
        self.total >= self.limits.total
    }

    /// How many more attempts subscription `webhook` of `holder` may start.
    pub fn room(&self, webhook: &str, holder: &str) -> usize {
        let held = self.per_holder.get(holder).copied().unwrap_or(0);
        let w = self.limits.per_webhook.saturating_sub(self.busy(webhook));
        let h = self.limits.per_holder.saturating_sub(held);
        let t = self.limits.total.saturating_sub(self.total);
        w.min(h).min(t)
    }

    pub fn take(&mut self, webhook: &str, holder: &str) {
        self.total += 1;
        *self.per_holder.entry(holder.to_string()).or_default() += 1;
        *self.per_webhook.entry(webhook.to_string()).or_default() += 1;
    }

    pub fn give_back(&mut self, webhook: &str, holder: &str) {
        self.total = self.total.saturating_sub(1);
        release(&mut self.per_holder, holder);
        release(&mut self.per_webhook, webhook);
    }

    /// Forgets every attempt (a restart of the dispatcher: they are still
    /// queued and are attempted again).
    pub fn clear(&mut self) {
        self.total = 0;
        self.per_holder.clear();
        self.per_webhook.clear();
    }
}

fn release(m: &mut HashMap<String, usize>, key: &str) {
    if let Some(n) = m.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            m.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_with_many_busy_subscriptions_leaves_room_for_another() {
        let mut s = Slots::new(Limits {
            total: 32,
            per_holder: 8,
            per_webhook: 4,
        });
        // Tenant a: 200 subscriptions, each wanting 4 attempts.
        let mut taken = 0;
        for i in 0..200 {
            let w = format!("wh-a{i}");
            while s.room(&w, "a") > 0 {
                s.take(&w, "a");
                taken += 1;
            }
        }
        assert_eq!(taken, 8, "a holds its share only");
        assert_eq!(s.room("wh-b", "b"), 4, "b's first subscription gets its 4");
        s.take("wh-b", "b");
        assert_eq!(s.room("wh-b", "b"), 3);
        // Four tenants at their share fill all 32.
        for t in ["c", "d", "e"] {
            for i in 0..2 {
                let w = format!("wh-{t}{i}");
                while s.room(&w, t) > 0 {
                    s.take(&w, t);
                }
            }
        }
        assert_eq!(s.room("wh-b", "b"), 0, "all 32 are taken: the total binds");
        s.give_back("wh-a0", "a");
        assert_eq!((s.busy("wh-a0"), s.room("wh-a0", "a")), (3, 1));
        s.clear();
        assert_eq!(s.room("wh-a0", "a"), 4);
    }
}
