//! Fail points on the commit paths, compiled only into test builds (this
//! crate's unit tests, and the `failpoints` feature that the workspace's
//! integration tests turn on through the root package's dev-dependency on
//! itself). A release build of `caldera` has none of it: no rule, no
//! counter, no endpoint.
//!
//! A rule says, for one [`CommitSite`] or for every site, how many commits
//! to let through and then how many to refuse as if sled had failed. A test
//! against the real server arms one (`PUT /v1/test/failpoints/{site}`),
//! drives the path, then clears it and asserts recovery.
use crate::commit_site::CommitSite;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// What to do with the next commits of a site.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Commits to let through first.
    #[serde(default)]
    pub skip: u64,
    /// Commits to refuse after those.
    pub fail: u64,
}

/// Commits made and refused at one site since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SiteCounts {
    pub committed: u64,
    pub refused: u64,
}

/// The armed rules and the per-site counters.
#[derive(Debug, Default)]
pub struct CommitFaults {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// `None`: the rule for every site (a site's own rule goes first).
    rules: HashMap<Option<CommitSite>, FaultRule>,
    counts: BTreeMap<CommitSite, SiteCounts>,
}

impl CommitFaults {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arms `rule` for `site` (`None`: every site), replacing the one there.
    pub fn arm(&self, site: Option<CommitSite>, rule: FaultRule) {
        self.lock().rules.insert(site, rule);
    }

    /// Removes every rule: commits go through again.
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// Whether the next commit at `site` is refused; counts it either way.
    pub fn refuses(&self, site: CommitSite) -> bool {
        let mut g = self.lock();
        let key = if g.rules.contains_key(&Some(site)) {
            Some(site)
        } else {
            None
        };
        let refused = match g.rules.get_mut(&key) {
            Some(r) if r.skip > 0 => {
                r.skip -= 1;
                false
            }
            Some(r) if r.fail > 0 => {
                r.fail -= 1;
                true
            }
            _ => false,
        };
        let c = g.counts.entry(site).or_default();
        if refused {
            c.refused += 1;
        } else {
            c.committed += 1;
        }
        refused
    }

    /// Counters per site that was committed to at least once.
    pub fn counts(&self) -> BTreeMap<CommitSite, SiteCounts> {
        self.lock().counts.clone()
    }

    /// The rules still armed (a spent rule stays, with zeros).
    pub fn rules(&self) -> Vec<(Option<CommitSite>, FaultRule)> {
        self.lock().rules.iter().map(|(k, v)| (*k, *v)).collect()
    }
}

/// The disk fail point: a limit on the size of any file this process
/// writes (`RLIMIT_FSIZE`, `None`: lifted), with `SIGXFSZ` ignored, so a
/// write past it fails with `EFBIG` the way a write to a full disk fails
/// with `ENOSPC` — through sled's own write path, which latches the error
/// as it latches a full disk. Lifting the limit is the disk freed. The
/// limit is process-wide: every file the server writes is under it.
pub fn limit_file_size(limit: Option<u64>) -> std::io::Result<()> {
    // SAFETY: signal() and the rlimit calls take plain values and a pointer
    // to a local that outlives them; they change process-wide settings only.
    unsafe {
        if libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = limit.map_or(lim.rlim_max, |l| l.min(lim.rlim_max));
        if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_lets_skip_through_then_refuses_fail_and_a_sites_rule_beats_the_global_one() {
        let f = CommitFaults::default();
        f.arm(None, FaultRule { skip: 1, fail: 1 });
        f.arm(Some(CommitSite::Grant), FaultRule { skip: 0, fail: 2 });
        let seen: Vec<bool> = [
            CommitSite::Free,
            CommitSite::Grant,
            CommitSite::Free,
            CommitSite::Grant,
            CommitSite::Grant,
            CommitSite::Free,
        ]
        .iter()
        .map(|s| f.refuses(*s))
        .collect();
        // free: skipped, grant: refused, free: refused (global spent now),
        // grant: refused (its own rule spent now), grant: through, free: through.
        assert_eq!(seen, [false, true, true, true, false, false]);
        let c = f.counts();
        assert_eq!(
            c[&CommitSite::Grant],
            SiteCounts {
                committed: 1,
                refused: 2
            }
        );
        assert_eq!(
            c[&CommitSite::Free],
            SiteCounts {
                committed: 2,
                refused: 1
            }
        );
        f.arm(None, FaultRule { skip: 0, fail: 5 });
        f.clear();
        assert!(!f.refuses(CommitSite::Event));
    }
}
