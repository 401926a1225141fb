//! Which copies to delete to make room: least recently used first, never a
//! copy that is pinned or in use by a live allocation. Pure: the store
//! deletes what this chooses.
use super::index::IndexEntry;
use std::collections::BTreeMap;

/// Room cannot be made: what is held (pinned or in use) leaves too little.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheFull {
    pub held_bytes: u64,
    pub capacity_bytes: u64,
}

impl std::fmt::Display for CacheFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gb = |b: u64| b as f64 / (1u64 << 30) as f64;
        write!(
            f,
            "cache full: {:.3} of {:.3} GB pinned or in use",
            gb(self.held_bytes),
            gb(self.capacity_bytes)
        )
    }
}

/// The copies to evict so that `need` more bytes fit, given `used` bytes on
/// disk (copies and partial fetches) of `capacity`. `in_use` says whether a
/// copy is used by a live allocation.
///
/// Example: capacity 10, used 9 by A (6, last used at 1) and B (3, at 2),
/// need 4: deleting A (the least recently used) leaves 3 + 4 <= 10, so
/// `[A]`; with A in use, deleting B leaves 6 + 4 <= 10, so `[B]`; with A
/// pinned and B in use, nothing can go: `CacheFull { held 9 of 10 }`.
pub fn victims(
    entries: &BTreeMap<String, IndexEntry>,
    in_use: impl Fn(&str) -> bool,
    capacity: u64,
    used: u64,
    need: u64,
) -> Result<Vec<String>, CacheFull> {
    let mut free = capacity.saturating_sub(used);
    let mut evictable: Vec<(&String, &IndexEntry)> = entries
        .iter()
        .filter(|(sha, e)| !e.pinned && !in_use(sha))
        .collect();
    evictable.sort_by_key(|(sha, e)| (e.last_used_ms, sha.as_str()));
    let mut chosen = Vec::new();
    for (sha, e) in evictable {
        if free >= need {
            break;
        }
        free += e.size_bytes;
        chosen.push(sha.clone());
    }
    if free >= need {
        return Ok(chosen);
    }
    let held_bytes = entries
        .iter()
        .filter(|(sha, e)| e.pinned || in_use(sha))
        .map(|(_, e)| e.size_bytes)
        .sum();
    Err(CacheFull {
        held_bytes,
        capacity_bytes: capacity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(size_bytes: u64, last_used_ms: u64, pinned: bool) -> IndexEntry {
        IndexEntry {
            size_bytes,
            last_used_ms,
            pinned,
            access: Default::default(),
        }
    }

    fn entries(list: &[(&str, IndexEntry)]) -> BTreeMap<String, IndexEntry> {
        list.iter()
            .map(|(k, e)| (k.to_string(), e.clone()))
            .collect()
    }

    /// name, copies, those in use, bytes needed, victims or the bytes held.
    type Case<'a> = (
        &'a str,
        BTreeMap<String, IndexEntry>,
        &'a [&'a str],
        u64,
        Result<Vec<&'a str>, u64>,
    );

    #[test]
    fn least_recently_used_unused_unpinned_goes_first() {
        let none: &[&str] = &[];
        let cases: Vec<Case> = vec![
            // Room already: nothing goes.
            (
                "fits",
                entries(&[("A", entry(6, 1, false))]),
                none,
                4,
                Ok(vec![]),
            ),
            // used 9 of 10, need 4: A (oldest) frees 6 -> 7 free.
            (
                "lru",
                entries(&[("A", entry(6, 1, false)), ("B", entry(3, 2, false))]),
                none,
                4,
                Ok(vec!["A"]),
            ),
            // A in use: B frees 3 -> 4 free.
            (
                "in use",
                entries(&[("A", entry(6, 1, false)), ("B", entry(3, 2, false))]),
                &["A"],
                4,
                Ok(vec!["B"]),
            ),
            // A pinned, B in use: held 9, nothing can go.
            (
                "held",
                entries(&[("A", entry(6, 1, true)), ("B", entry(3, 2, false))]),
                &["B"],
                4,
                Err(9),
            ),
            // Need 8: both unused ones go, oldest first.
            (
                "both",
                entries(&[("B", entry(3, 5, false)), ("A", entry(6, 4, false))]),
                none,
                8,
                Ok(vec!["A", "B"]),
            ),
        ];
        for (name, e, in_use, need, expected) in cases {
            let used = e.values().map(|e| e.size_bytes).sum();
            let got = victims(&e, |s| in_use.contains(&s), 10, used, need);
            match expected {
                Ok(v) => assert_eq!(got, Ok(v.iter().map(|s| s.to_string()).collect()), "{name}"),
                Err(held) => assert_eq!(
                    got,
                    Err(CacheFull {
                        held_bytes: held,
                        capacity_bytes: 10
                    }),
                    "{name}"
                ),
            }
        }
        let full = CacheFull {
            held_bytes: 5 << 29,
            capacity_bytes: 3 << 30,
        };
        assert_eq!(
            full.to_string(),
            "cache full: 2.500 of 3.000 GB pinned or in use"
        );
    }
}
