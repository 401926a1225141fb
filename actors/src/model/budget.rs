//! The registry-wide origin budget (`models.max-origin-pulls`): the one place that
//! knows how many origin reads run across all versions. Each version's actor
//! reports its own count after every change; admission of one more read is a
//! check and a reservation under one lock, so two versions never both take
//! the last slot.
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct OriginBudget {
    reads: Mutex<BTreeMap<String, u32>>,
}

impl OriginBudget {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, u32>) -> T) -> T {
        match self.reads.lock() {
            Ok(mut g) => f(&mut g),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Whether `version` may run `wanted` origin reads with the others'
    /// under `max` in all; if so, reserves them.
    pub fn admit(&self, version: &str, wanted: u32, max: u32) -> bool {
        self.with(|m| {
            let others: u32 = m
                .iter()
                .filter(|(k, _)| k.as_str() != version)
                .map(|(_, n)| *n)
                .sum();
            if others + wanted > max {
                return false;
            }
            m.insert(version.to_string(), wanted);
            true
        })
    }

    /// `version` runs `reads` origin reads now (after a change was recorded,
    /// or at a rebuild). Answers whether a slot was freed by it.
    pub fn set(&self, version: &str, reads: u32) -> bool {
        self.with(|m| {
            let before = m.insert(version.to_string(), reads).unwrap_or(0);
            reads < before
        })
    }

    /// Origin reads under way across all versions.
    pub fn total(&self) -> u32 {
        self.with(|m| m.values().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_by_every_version() {
        let b = OriginBudget::default();
        assert!(b.admit("a:v1", 1, 2));
        assert!(b.admit("b:v1", 1, 2));
        // Two in all: a third version waits, a version re-admitting its
        // own count does not.
        assert!(!b.admit("c:v1", 1, 2));
        assert!(b.admit("a:v1", 1, 2));
        assert!(b.set("a:v1", 0), "a read ended: a slot is free");
        assert!(b.admit("c:v1", 1, 2));
        assert_eq!(b.total(), 2);
    }
}
