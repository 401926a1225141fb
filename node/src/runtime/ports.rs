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
use std::collections::BTreeSet;
use std::net::TcpListener;

/// The range ports are handed out from, and where the next search starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPorts {
    first: u16,
    last: u16,
    next: u16,
}

/// The default `replica-ports` range.
pub const DEFAULT_RANGE: (u16, u16) = (20000, 29999);

/// Parses `FIRST-LAST` (1024 <= FIRST <= LAST <= 65535); the error names the key.
pub fn parse_range(text: &str) -> Result<(u16, u16), String> {
    let text = text.trim();
    let parsed = text
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)));
    match parsed {
        Some((first, last)) if first >= 1024 && first <= last => Ok((first, last)),
        _ => Err(format!(
            "replica-ports {text:?} must be FIRST-LAST with 1024 <= FIRST <= LAST <= 65535"
        )),
    }
}

impl ReplicaPorts {
    pub fn new((first, last): (u16, u16)) -> Self {
        ReplicaPorts {
            first,
            last,
            next: first,
        }
    }

    /// `first-last`, as errors and logs name the range.
    pub fn label(&self) -> String {
        format!("{}-{}", self.first, self.last)
    }

    /// A port of the range that no workload in `held` has and nothing on the
    /// host listens on (127.0.0.1 and 0.0.0.0 both bindable); None when every
    /// one is taken.
    pub fn pick(&mut self, held: &BTreeSet<u16>) -> Option<u16> {
        let size = u32::from(self.last - self.first) + 1;
        for step in 0..size {
            let offset = (u32::from(self.next - self.first) + step) % size;
            let port = self.first + offset as u16;
            if held.contains(&port) || !free_on_host(port) {
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
            let e = parse_range(bad).unwrap_err();
            assert!(e.contains("replica-ports"), "{bad}: {e}");
        }
    }

    #[test]
    fn ports_are_unique_round_robin_and_skip_held_and_busy_ones() {
        // A port something already listens on is skipped.
        let busy = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = busy.local_addr().unwrap().port();
        let mut ports = ReplicaPorts::new((b, b.saturating_add(3)));
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
}
