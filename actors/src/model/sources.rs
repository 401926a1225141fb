//! Where a node reads a version from: the pure rule of staggered,
//! peer-to-peer warmup. No actix, no clock, no I/O: everything it weighs is
//! in the version's record (who holds a verified copy, who reads what now)
//! and in what the caller knows of the fleet (which holders are live and
//! where they serve), so the whole rule is table-tested here.
//!
//! In order:
//! 1. a node that holds a verified copy needs nothing;
//! 2. with `models.peer-warmup` on, a live peer that holds a verified copy serves
//!    it: the one with the fewest transfers in progress (ties by name), so a
//!    rollout spreads over every holder instead of queueing on the first;
//! 3. else the origin, if this version has fewer than
//!    `models.max-origin-pulls-per-version` origin reads under way and the
//!    registry-wide budget (`models.max-origin-pulls`) admits one more;
//! 4. else, with `models.peer-stream-partial` on, a live peer still reading the
//!    version streams it on as its bytes arrive (the fewest transfers, then
//!    the most bytes done): a cold rollout overlaps the one origin read with
//!    the peer copies instead of waiting for it. Never a peer whose own read
//!    leads back to the receiver (a cycle would wait on itself). The
//!    receiver checks the whole copy's SHA-256 before use either way;
//! 5. else the node waits, and is served when a copy is verified somewhere
//!    or an origin read ends.
use caldera_spec::{CopyState, NodeCopy};
use std::collections::BTreeMap;

/// The label of the origin as a source (`WeightSource::label`).
pub const ORIGIN: &str = "origin";

/// The label of a peer as a source (`WeightSource::label`).
pub fn peer_label(node: &str) -> String {
    format!("peer {node}")
}

/// The peer a label names, if it names one.
pub fn peer_of(label: &str) -> Option<&str> {
    label.strip_prefix("peer ")
}

/// A node that could serve as a peer: live, and where it serves its cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePeer {
    pub node: String,
    pub url: String,
}

/// The limits the rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub per_version: u32,
    pub peer_warmup: bool,
    /// Peers still reading may stream on (rule 4).
    pub stream_partial: bool,
}

/// What a node needing a copy is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// It holds a verified copy already.
    Holds,
    /// Read from this peer.
    Peer(LivePeer),
    /// Read from the origin.
    Origin,
    /// Nothing may serve it now; the text says why (for the event).
    Wait(String),
}

/// Origin reads of this version under way, as the record shows them.
pub fn origin_reads(nodes: &BTreeMap<String, NodeCopy>) -> u32 {
    nodes
        .values()
        .filter(|c| c.copy == CopyState::Warming && c.source == ORIGIN)
        .count() as u32
}

/// Transfers each peer is serving now, as the record shows them.
pub fn peer_loads(nodes: &BTreeMap<String, NodeCopy>) -> BTreeMap<&str, u32> {
    let mut loads = BTreeMap::new();
    for c in nodes.values().filter(|c| c.copy == CopyState::Warming) {
        if let Some(p) = peer_of(&c.source) {
            *loads.entry(p).or_insert(0) += 1;
        }
    }
    loads
}

/// The source for `receiver`. `live` are the live nodes with a peer url
/// (any order); `avoid` is a source that just failed this receiver (tried
/// last: another peer or the origin first); `origin_admitted` says whether
/// the registry-wide budget has room for one more origin read.
pub fn choose(
    nodes: &BTreeMap<String, NodeCopy>,
    receiver: &str,
    live: &[LivePeer],
    limits: Limits,
    avoid: Option<&str>,
    origin_admitted: bool,
) -> Choice {
    if nodes
        .get(receiver)
        .is_some_and(|c| c.copy == CopyState::Verified)
    {
        return Choice::Holds;
    }
    let loads = peer_loads(nodes);
    let candidates = || {
        live.iter()
            .filter(|p| p.node != receiver)
            .filter(|p| avoid.and_then(peer_of) != Some(p.node.as_str()))
            .filter_map(|p| nodes.get(&p.node).map(|c| (p, c)))
    };
    let load = |p: &LivePeer| loads.get(p.node.as_str()).copied().unwrap_or(0);
    if limits.peer_warmup {
        let best = candidates()
            .filter(|(_, c)| c.copy == CopyState::Verified)
            .min_by_key(|(p, _)| (load(p), &p.node));
        if let Some((p, _)) = best {
            return Choice::Peer(p.clone());
        }
    }
    let reading = origin_reads(nodes);
    // The receiver's own origin read (being re-sourced) does not count against it.
    let own = nodes
        .get(receiver)
        .is_some_and(|c| c.copy == CopyState::Warming && c.source == ORIGIN) as u32;
    let here = reading - own;
    // An origin that just failed this node is tried again when nothing else
    // can serve it (within the budgets; a cut read resumes at its bytes).
    if here < limits.per_version && origin_admitted {
        return Choice::Origin;
    }
    if limits.peer_warmup && limits.stream_partial {
        let best = candidates()
            .filter(|(p, c)| {
                c.copy == CopyState::Warming
                    && !c.source.is_empty()
                    && !reads_through(nodes, &p.node, receiver)
            })
            .min_by_key(|(p, c)| (load(p), std::cmp::Reverse(c.bytes_done), &p.node));
        if let Some((p, _)) = best {
            return Choice::Peer(p.clone());
        }
    }
    if here >= limits.per_version {
        return Choice::Wait(format!(
            "{here} of {} origin reads of this version under way and no peer holds a verified copy",
            limits.per_version
        ));
    }
    Choice::Wait(
        "the registry-wide origin budget (models.max-origin-pulls) is spent and no peer holds a verified copy"
            .into(),
    )
}

/// Whether `from`'s read of the version comes, peer by peer, from `node`
/// (so `node` reading from `from` would close a cycle).
fn reads_through(nodes: &BTreeMap<String, NodeCopy>, from: &str, node: &str) -> bool {
    let mut at = from;
    // A chain is at most as long as the record; a longer walk is a cycle already.
    for _ in 0..=nodes.len() {
        if at == node {
            return true;
        }
        match nodes
            .get(at)
            .filter(|c| c.copy == CopyState::Warming)
            .and_then(|c| peer_of(&c.source))
        {
            Some(next) => at = next,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(copy: CopyState, source: &str) -> NodeCopy {
        NodeCopy::new(copy, 0, source)
    }

    fn peers(names: &[&str]) -> Vec<LivePeer> {
        names
            .iter()
            .map(|n| LivePeer {
                node: n.to_string(),
                url: format!("http://{n}"),
            })
            .collect()
    }

    fn record(rows: &[(&str, CopyState, &str)]) -> BTreeMap<String, NodeCopy> {
        rows.iter()
            .map(|(n, c, s)| (n.to_string(), copy(*c, s)))
            .collect()
    }

    /// One origin read per version, verified copies only (rules 1-3, 5).
    const ONE: Limits = Limits {
        per_version: 1,
        peer_warmup: true,
        stream_partial: false,
    };

    /// The defaults: as ONE, and peers still reading stream on (rule 4).
    const STREAM: Limits = Limits {
        stream_partial: true,
        ..ONE
    };

    #[test]
    fn with_streaming_the_next_node_reads_the_first_ones_copy_as_it_arrives() {
        let live = peers(&["n1", "n2", "n3"]);
        let one = record(&[("n1", CopyState::Warming, ORIGIN)]);
        assert_eq!(
            choose(&one, "n2", &live, STREAM, None, true),
            Choice::Peer(peers(&["n1"])[0].clone())
        );
        // A verified holder still comes first, and a free origin slot before
        // a peer that is still reading.
        let mixed = record(&[
            ("n1", CopyState::Warming, ORIGIN),
            ("n3", CopyState::Verified, ORIGIN),
        ]);
        assert_eq!(
            choose(&mixed, "n2", &live, STREAM, None, true),
            Choice::Peer(peers(&["n3"])[0].clone())
        );
        let two = Limits {
            per_version: 2,
            ..STREAM
        };
        assert_eq!(choose(&one, "n2", &live, two, None, true), Choice::Origin);
        // Off: n2 waits for n1's verified copy (ONE is the same without it).
        assert!(matches!(
            choose(&one, "n2", &live, ONE, None, true),
            Choice::Wait(_)
        ));
        // A node that is waiting (no source) streams nothing on.
        let idle = record(&[
            ("n1", CopyState::Warming, ORIGIN),
            ("n3", CopyState::Waiting, ""),
        ]);
        assert!(matches!(
            choose(&idle, "n2", &live, STREAM, Some("peer n1"), true),
            Choice::Wait(_)
        ));
    }

    #[test]
    fn streaming_spreads_by_load_then_bytes_done_and_never_closes_a_cycle() {
        let live = peers(&["n1", "n2", "n3", "n4"]);
        let mut nodes = record(&[
            ("n1", CopyState::Warming, ORIGIN),
            ("n2", CopyState::Warming, "peer n1"),
        ]);
        // n1 serves n2 already: n3 reads from n2 (a chain, one transfer each).
        assert_eq!(
            choose(&nodes, "n3", &live, STREAM, None, true),
            Choice::Peer(peers(&["n2"])[0].clone())
        );
        // Equal loads: the one with more bytes.
        nodes.insert("n3".into(), copy(CopyState::Warming, "peer n2"));
        nodes.get_mut("n3").unwrap().bytes_done = 10;
        nodes.get_mut("n2").unwrap().bytes_done = 5;
        assert_eq!(
            choose(&nodes, "n4", &live, STREAM, None, true),
            Choice::Peer(peers(&["n3"])[0].clone())
        );
        // n1's origin read failed it: n1 is re-sourced. The origin slot is
        // its own, so it reads the origin again, never from n2 or n3, which
        // read from n1.
        assert_eq!(
            choose(&nodes, "n1", &live, STREAM, Some(ORIGIN), true),
            Choice::Origin
        );
        assert!(reads_through(&nodes, "n3", "n1"));
        assert!(!reads_through(&nodes, "n1", "n3"));
        // n2 must leave n1 (now waiting): n3 reads through n2, so n2 goes to
        // n4, which reads the origin.
        let full = Limits {
            per_version: 1,
            ..STREAM
        };
        nodes.insert("n4".into(), copy(CopyState::Warming, ORIGIN));
        nodes.insert("n1".into(), copy(CopyState::Waiting, ""));
        assert!(matches!(
            choose(&nodes, "n2", &live, full, Some("peer n1"), true),
            Choice::Peer(p) if p.node == "n4"
        ));
    }

    #[test]
    fn the_first_node_reads_the_origin_and_the_next_waits_for_it() {
        let empty = record(&[]);
        let live = peers(&["n1", "n2", "n3"]);
        assert_eq!(choose(&empty, "n1", &live, ONE, None, true), Choice::Origin);
        // n1 reads the origin: 1 of 1 per version, so n2 waits.
        let one = record(&[("n1", CopyState::Warming, ORIGIN)]);
        assert!(matches!(
            choose(&one, "n2", &live, ONE, None, true),
            Choice::Wait(_)
        ));
        // Two per version: n2 may read the origin too, unless the
        // registry-wide budget says no.
        let two = Limits {
            per_version: 2,
            ..ONE
        };
        assert_eq!(choose(&one, "n2", &live, two, None, true), Choice::Origin);
        assert!(matches!(
            choose(&one, "n2", &live, two, None, false),
            Choice::Wait(w) if w.contains("max-origin-pulls")
        ));
    }

    #[test]
    fn a_waiting_node_goes_to_a_peer_once_one_is_verified() {
        let nodes = record(&[
            ("n1", CopyState::Verified, ORIGIN),
            ("n2", CopyState::Waiting, ""),
        ]);
        let live = peers(&["n1", "n2", "n3"]);
        assert_eq!(
            choose(&nodes, "n2", &live, ONE, None, true),
            Choice::Peer(peers(&["n1"])[0].clone())
        );
        assert_eq!(choose(&nodes, "n1", &live, ONE, None, true), Choice::Holds);
        // Peer warmup off: the origin only, even with a holder.
        let off = Limits {
            peer_warmup: false,
            ..ONE
        };
        assert_eq!(choose(&nodes, "n2", &live, off, None, true), Choice::Origin);
        // A holder that is not live serves nobody.
        assert_eq!(
            choose(&nodes, "n2", &peers(&["n2", "n3"]), ONE, None, true),
            Choice::Origin
        );
    }

    #[test]
    fn load_spreads_over_holders_by_transfers_in_progress() {
        // n1 serves two receivers, n2 one: n5 goes to n2.
        let nodes = record(&[
            ("n1", CopyState::Verified, ORIGIN),
            ("n2", CopyState::Verified, "peer n1"),
            ("n3", CopyState::Warming, "peer n1"),
            ("n4", CopyState::Warming, "peer n1"),
            ("n6", CopyState::Warming, "peer n2"),
        ]);
        let live = peers(&["n1", "n2", "n3", "n4", "n5", "n6"]);
        assert_eq!(
            choose(&nodes, "n5", &live, ONE, None, true),
            Choice::Peer(peers(&["n2"])[0].clone())
        );
        // Equal loads: the first by name.
        let even = record(&[
            ("n2", CopyState::Verified, ORIGIN),
            ("n1", CopyState::Verified, "peer n2"),
        ]);
        assert_eq!(
            choose(&even, "n3", &live, ONE, None, true),
            Choice::Peer(peers(&["n1"])[0].clone())
        );
    }

    #[test]
    fn a_failed_peer_is_avoided_and_the_receiver_resourced() {
        let nodes = record(&[
            ("n1", CopyState::Verified, ORIGIN),
            ("n2", CopyState::Verified, "peer n1"),
            ("n3", CopyState::Warming, "peer n1"),
        ]);
        let live = peers(&["n1", "n2", "n3"]);
        assert_eq!(
            choose(&nodes, "n3", &live, ONE, Some("peer n1"), true),
            Choice::Peer(peers(&["n2"])[0].clone())
        );
        // The only holder failed it: the origin, if admitted.
        let lone = record(&[
            ("n1", CopyState::Verified, ORIGIN),
            ("n3", CopyState::Warming, "peer n1"),
        ]);
        assert_eq!(
            choose(&lone, "n3", &live, ONE, Some("peer n1"), true),
            Choice::Origin
        );
    }

    #[test]
    fn an_origin_read_being_resourced_does_not_count_against_itself() {
        let nodes = record(&[("n1", CopyState::Warming, ORIGIN)]);
        let live = peers(&["n1"]);
        assert_eq!(
            choose(&nodes, "n1", &live, ONE, Some(ORIGIN), true),
            Choice::Origin
        );
        assert_eq!(origin_reads(&nodes), 1);
    }
}
