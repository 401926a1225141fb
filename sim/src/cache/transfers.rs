//! Time to ready: how long a node takes to have a version's weights, from
//! the bandwidths given. A hit reads the cached file once to verify it (at
//! the disk's rate); a miss fetches from a peer holding a verified copy (each
//! transfer at the peer rate) or, when no node holds one, from the origin,
//! whose bandwidth is shared: `n` concurrent origin reads each get `1/n` of
//! it. As in the live system, a version is read from the origin by at most
//! one node at a time; the others wait for that copy and then fetch it from
//! that peer. Peers are not capped in how much they serve, and a source
//! never disappears mid-transfer (the live system resumes from another).
use std::collections::BTreeMap;

/// Where a fetch reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Origin,
    Peer,
    /// Waits for the version's origin read to finish, then reads that peer.
    PeerAfterOrigin,
}

/// A fetch that finished: the node has the version verified from `at` on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Done {
    pub node: usize,
    pub version: usize,
    pub at: f64,
}

#[derive(Debug, Clone)]
struct OriginRead {
    node: usize,
    version: usize,
    remaining: f64,
}

/// Bandwidths, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub origin: f64,
    pub peer: f64,
    pub disk: f64,
}

/// The fetches in flight; see the module comment.
#[derive(Debug, Clone)]
pub struct Transfers {
    rates: Rates,
    now: f64,
    origin: Vec<OriginRead>,
    /// `(finishes at, node, version)`.
    peer: Vec<(f64, usize, usize)>,
    /// Per version: `(node, bytes)` waiting for its origin read.
    after_origin: BTreeMap<usize, Vec<(usize, u64)>>,
    /// Bytes read from the origin, and from peers.
    pub origin_bytes: u64,
    pub peer_bytes: u64,
}

impl Transfers {
    /// Nothing in flight at time 0.
    pub fn new(rates: Rates) -> Self {
        Transfers {
            rates,
            now: 0.0,
            origin: Vec::new(),
            peer: Vec::new(),
            after_origin: BTreeMap::new(),
            origin_bytes: 0,
            peer_bytes: 0,
        }
    }

    /// Seconds a hit takes: reading `bytes` once to verify them.
    pub fn verify_s(&self, bytes: u64) -> f64 {
        bytes as f64 / self.rates.disk
    }

    /// Start fetching `bytes` of `version` onto `node` now; `peer_holds`:
    /// some node holds it verified.
    pub fn start(&mut self, node: usize, version: usize, bytes: u64, peer_holds: bool) -> Source {
        if peer_holds {
            self.start_peer(node, version, bytes);
            Source::Peer
        } else if self.origin.iter().any(|r| r.version == version) {
            self.after_origin
                .entry(version)
                .or_default()
                .push((node, bytes));
            Source::PeerAfterOrigin
        } else {
            self.origin_bytes += bytes;
            self.origin.push(OriginRead {
                node,
                version,
                remaining: bytes as f64,
            });
            Source::Origin
        }
    }

    fn start_peer(&mut self, node: usize, version: usize, bytes: u64) {
        self.peer_bytes += bytes;
        self.peer
            .push((self.now + bytes as f64 / self.rates.peer, node, version));
    }

    /// Run the clock to `until` (may be infinite: until nothing is left),
    /// returning the fetches that finished, in time order.
    pub fn advance(&mut self, until: f64) -> Vec<Done> {
        let mut done = Vec::new();
        loop {
            let rate = self.rates.origin / self.origin.len().max(1) as f64;
            let next_origin = self
                .origin
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.remaining.total_cmp(&b.1.remaining))
                .map(|(i, r)| (self.now + r.remaining / rate, i));
            let next_peer = self
                .peer
                .iter()
                .enumerate()
                .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
                .map(|(i, p)| (p.0, i));
            let next = match (next_origin, next_peer) {
                (None, None) => {
                    if until.is_finite() {
                        self.now = self.now.max(until);
                    }
                    return done;
                }
                (Some(o), Some(p)) => o.0.min(p.0),
                (Some(o), None) => o.0,
                (None, Some(p)) => p.0,
            };
            if next > until {
                self.progress(until - self.now, rate);
                self.now = until;
                return done;
            }
            self.progress(next - self.now, rate);
            self.now = next;
            match (next_origin, next_peer) {
                (Some((t, i)), _) if t <= next => {
                    let read = self.origin.swap_remove(i);
                    done.push(Done {
                        node: read.node,
                        version: read.version,
                        at: self.now,
                    });
                    for (node, bytes) in self.after_origin.remove(&read.version).unwrap_or_default()
                    {
                        self.start_peer(node, read.version, bytes);
                    }
                }
                (_, Some((_, i))) => {
                    let (at, node, version) = self.peer.swap_remove(i);
                    done.push(Done { node, version, at });
                }
                _ => {}
            }
        }
    }

    fn progress(&mut self, dt: f64, rate: f64) {
        if dt > 0.0 {
            for r in &mut self.origin {
                r.remaining = (r.remaining - dt * rate).max(0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: Rates = Rates {
        origin: 100.0,
        peer: 50.0,
        disk: 400.0,
    };

    #[test]
    fn concurrent_origin_reads_share_the_origin() {
        let mut t = Transfers::new(RATES);
        assert_eq!(t.start(0, 0, 100, false), Source::Origin);
        assert_eq!(t.start(1, 1, 100, false), Source::Origin);
        let done = t.advance(f64::INFINITY);
        // Two at 50 B/s each: both done at 2 s, not 1 s.
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|d| (d.at - 2.0).abs() < 1e-9), "{done:?}");
        assert_eq!((t.origin_bytes, t.peer_bytes), (200, 0));
        assert!((t.verify_s(400) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_second_node_waits_for_the_origin_read_and_then_reads_the_peer() {
        let mut t = Transfers::new(RATES);
        assert_eq!(t.start(0, 7, 100, false), Source::Origin);
        assert!(t.advance(0.5).is_empty());
        assert_eq!(t.start(1, 7, 100, false), Source::PeerAfterOrigin);
        let done = t.advance(f64::INFINITY);
        // Origin: 1 s; then the peer read: 100 B at 50 B/s = 2 s more.
        assert_eq!(
            done[0],
            Done {
                node: 0,
                version: 7,
                at: 1.0
            }
        );
        assert_eq!(
            done[1],
            Done {
                node: 1,
                version: 7,
                at: 3.0
            }
        );
        assert_eq!((t.origin_bytes, t.peer_bytes), (100, 100));
    }

    #[test]
    fn advancing_stops_at_the_time_asked_and_resumes_with_the_new_share() {
        let mut t = Transfers::new(RATES);
        t.start(0, 0, 100, false);
        assert!(t.advance(0.5).is_empty()); // 50 B left
        t.start(1, 1, 100, false); // now 50 B/s each
        let done = t.advance(f64::INFINITY);
        assert!((done[0].at - 1.5).abs() < 1e-9, "{done:?}");
        // The second: 50 B by 1.5 s, then 50 B alone at 100 B/s.
        assert!((done[1].at - 2.0).abs() < 1e-9, "{done:?}");
    }
}
