//! Replica ports: every workload the agent starts gets a port of its own on
//! the node, from the `replica-ports` range, as `CALDERA_PORT`; the control
//! plane lists it as the replica's endpoint. The port is written into the
//! shim's spec, so an agent restarted later (adopting the shim) knows it is
//! taken and never hands it out twice.
//!
//! Ports are handed out round-robin from just past the last one given, so a
//! port a stopped workload just released is the last to be reused (a client
//! still holding the old endpoint meets a closed port, not another replica),
//! and one something else on the host already listens on is skipped.
//!
//! Each port handed out is also claimed host-wide, so that agents sharing
//! a host never hand out the same one: see [`super::port_claims`].
use super::port_claims::{claims_dir, Claims};
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;

/// The range ports are handed out from, and where the next search starts.
#[derive(Debug)]
pub struct ReplicaPorts {
    first: u16,
    last: u16,
    next: u16,
    claims: Claims,
}

/// The default `replica-ports` range.
pub const DEFAULT_RANGE: (u16, u16) = (20000, 29999);

/// Parses `FIRST-LAST` (1024 <= FIRST <= LAST <= 65535); the error names the key.
pub fn parse_range(text: &str) -> Result<(u16, u16), BadRange> {
    let text = text.trim();
    let parsed = text
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)));
    match parsed {
        Some(range) if check_range(range).is_ok() => Ok(range),
        _ => Err(BadRange::Text(text.to_string())),
    }
}

/// A `replica-ports` range that is not `FIRST-LAST` within the bounds;
/// the error names the key and says what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRange {
    #[error("replica-ports {0:?} must be FIRST-LAST with 1024 <= FIRST <= LAST <= 65535")]
    Text(String),
    #[error("replica-ports {0}-{1} must be FIRST-LAST with 1024 <= FIRST <= LAST <= 65535")]
    Bounds(u16, u16),
}

/// A range as parsed, or as set in the agent's config, checked.
pub fn check_range((first, last): (u16, u16)) -> Result<(), BadRange> {
    if first >= 1024 && first <= last {
        Ok(())
    } else {
        Err(BadRange::Bounds(first, last))
    }
}

impl ReplicaPorts {
    /// Ports of `first..=last`, claimed host-wide in [`claims_dir`].
    pub fn new(range: (u16, u16)) -> Self {
        Self::claimed_in(range, &claims_dir())
    }

    /// Ports of `first..=last`, claimed host-wide in `dir`.
    pub fn claimed_in((first, last): (u16, u16), dir: &Path) -> Self {
        ReplicaPorts {
            first,
            last,
            next: first,
            claims: Claims::open(dir),
        }
    }

    /// Hands out from `first..=last` from now on, keeping the claims held
    /// (the claims directory is opened once, when the agent starts).
    pub fn set_range(&mut self, (first, last): (u16, u16)) {
        self.first = first;
        self.last = last;
        self.next = first;
    }

    /// `first-last`, as errors and logs name the range.
    pub fn label(&self) -> String {
        format!("{}-{}", self.first, self.last)
    }

    /// Claims the ports in `held` (best effort) and lets go of the others.
    pub fn hold(&mut self, held: &BTreeSet<u16>) {
        self.claims.settle(held);
    }

    /// A port of the range that no workload in `held` (this agent's) has, no
    /// other agent on the host has claimed, and nothing on the host listens
    /// on (127.0.0.1 and 0.0.0.0 both bindable); None when every one is
    /// taken. The port stays claimed while `held` names it at later picks.
    pub fn pick(&mut self, held: &BTreeSet<u16>) -> Option<u16> {
        self.claims.settle(held);
        let size = u32::from(self.last - self.first) + 1;
        for step in 0..size {
            let offset = (u32::from(self.next - self.first) + step) % size;
            let port = self.first + offset as u16;
            if held.contains(&port) || !self.claims.claim(port) {
                continue;
            }
            if !free_on_host(port) {
                self.claims.release(port);
                continue;
            }
            self.next = if port == self.last {
                self.first
            } else {
                port + 1
            };
            return Some(port);
        }
        None
    }
}

/// Nothing listens on `port` now (a bind succeeds; it is closed at once).
fn free_on_host(port: u16) -> bool {
    TcpListener::bind(("0.0.0.0", port)).is_ok() && TcpListener::bind(("127.0.0.1", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_bad_ones_name_the_key() {
        assert_eq!(parse_range("20000-29999"), Ok((20000, 29999)));
        assert_eq!(parse_range(" 30000 - 30000 "), Ok((30000, 30000)));
        for bad in ["", "20000", "29999-20000", "80-90", "20000-70000", "a-b"] {
            let e = parse_range(bad).unwrap_err().to_string();
            assert!(e.contains("replica-ports"), "{bad}: {e}");
        }
    }

    #[test]
    fn ports_are_unique_round_robin_and_skip_held_and_busy_ones() {
        // A port something already listens on is skipped. The three ports after
        // it must be free for the count below to hold, so a busy host (other
        // tests' servers, outgoing connections) is looked past until they are.
        let (_busy, b) = busy_port_before_three_free();
        let claims = tempfile::tempdir().unwrap();
        let mut ports = ReplicaPorts::claimed_in((b, b.saturating_add(3)), claims.path());
        let mut held = BTreeSet::new();
        for _ in 0..3 {
            let p = ports.pick(&held).expect("a free port");
            assert_ne!(p, b, "the busy port was handed out");
            assert!(held.insert(p), "{p} handed out twice");
        }
        assert_eq!(ports.pick(&held), None, "every port is taken");
        // A released port comes back once the others are taken.
        let released = *held.iter().next().unwrap();
        held.remove(&released);
        assert_eq!(ports.pick(&held), Some(released));
    }

    /// A listener on some port `b` such that `b+1..=b+3` could be bound just now.
    fn busy_port_before_three_free() -> (TcpListener, u16) {
        loop {
            let busy = TcpListener::bind("127.0.0.1:0").unwrap();
            let b = busy.local_addr().unwrap().port();
            let next_free = (1..=3).all(|i| {
                b.checked_add(i)
                    .is_some_and(|p| TcpListener::bind(("127.0.0.1", p)).is_ok())
            });
            if next_free {
                return (busy, b);
            }
        }
    }

    /// Two agents on one host, the same range, workloads that have not
    /// bound their ports yet (as `caldera up` runs them). Each must get its own port, and
    /// a port comes back to the host once its agent's workload let it go.
    #[test]
    fn two_agents_on_one_host_never_hand_out_the_same_port() {
        let claims = tempfile::tempdir().unwrap();
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let first = probe.local_addr().unwrap().port();
        drop(probe);
        let range = (first, first.saturating_add(1));
        let mut a = ReplicaPorts::claimed_in(range, claims.path());
        let mut b = ReplicaPorts::claimed_in(range, claims.path());
        let pa = a.pick(&BTreeSet::new()).expect("a port for a");
        let pb = b.pick(&BTreeSet::new()).expect("a port for b");
        assert_ne!(pa, pb, "both agents handed out {pa}");
        // Both ports are claimed: a third pick of either agent finds none.
        assert_eq!(a.pick(&[pa].into()), None);
        assert_eq!(b.pick(&[pb].into()), None);
        // a's workload ended: at its next pick a lets go of pa and, b's pb
        // being claimed, pa is the one free port again.
        assert_eq!(a.pick(&BTreeSet::new()), Some(pa));
        // a exits: its claims go with its process, and b may hand out pa.
        drop(a);
        assert_eq!(b.pick(&[pb].into()), Some(pa), "a's port once a is gone");
    }

    #[test]
    fn without_a_usable_claims_dir_the_probe_alone_decides() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        // A file where the directory should be: claims are off, and both
        // agents hand out the one free port (what a host without the
        // directory gets: the probe only).
        let mut a = ReplicaPorts::claimed_in((port, port), file.path());
        let mut b = ReplicaPorts::claimed_in((port, port), file.path());
        assert_eq!(a.pick(&BTreeSet::new()), Some(port));
        assert_eq!(b.pick(&BTreeSet::new()), Some(port));
    }
}
