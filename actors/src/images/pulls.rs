//! The stagger of image pulls: at most `scheduling.max-image-pulls` nodes pull the
//! same image at once; the starts (and pre-pulls) of the others wait, first
//! come first served, until one of those pulls ends.
//!
//! Why: a rollout of one image onto many nodes would otherwise hit the
//! registry with every node's pull together, each reading every layer. Two
//! starts of the image on one node share that node's slot (podman pulls a
//! layer once per store), so the limit counts nodes, not starts.
//!
//! A holder is let go when its pull ended (the workload is ready, started or
//! failed, it was stopped, the pre-pull answered), when its node went away,
//! or at its deadline (the start's prepare timeout: a pull past it has
//! failed anyway), so a lost message never keeps a slot for good.
//!
//! Pure bookkeeping, no clock of its own: the NodeActors hold it (in
//! `Images`) and send the starts it lets go.
use std::collections::{BTreeMap, VecDeque};

/// One start or pre-pull that pulls, or waits to pull, an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Puller {
    pub node: String,
    /// The allocation id of a start, or [`prepull_key`] of a pre-pull.
    pub key: String,
    /// Let go at this instant (unix ms) whatever happened.
    pub until_ms: u64,
}

/// The key a pre-pull of `image` holds its slot under.
pub fn prepull_key(image: &str) -> String {
    format!("prepull {image}")
}

/// The answer to a start that needs to pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Pull now.
    Go,
    /// Wait: `pulling` nodes pull it now, `ahead` others wait before this one.
    Wait { pulling: Vec<String>, ahead: usize },
}

/// A waiting puller let go: its node sends what it held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LetGo {
    pub image: String,
    pub puller: Puller,
}

#[derive(Debug, Default)]
struct Pulls {
    pulling: Vec<Puller>,
    waiting: VecDeque<Puller>,
}

impl Pulls {
    fn nodes_pulling(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self.pulling.iter().map(|p| p.node.clone()).collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    fn pulls_on(&self, node: &str) -> bool {
        self.pulling.iter().any(|p| p.node == node)
    }

    /// Moves waiters to pulling while there is room (a waiter whose node
    /// already pulls the image goes at once).
    fn admit(&mut self, image: &str, limit: usize, out: &mut Vec<LetGo>) {
        let mut i = 0;
        while i < self.waiting.len() {
            let node = &self.waiting[i].node;
            if self.pulls_on(node) || self.nodes_pulling().len() < limit {
                if let Some(p) = self.waiting.remove(i) {
                    out.push(LetGo {
                        image: image.to_string(),
                        puller: p.clone(),
                    });
                    self.pulling.push(p);
                }
            } else {
                i += 1;
            }
        }
    }
}

/// Every image being pulled somewhere, and who waits for it.
#[derive(Debug, Default)]
pub struct PullSlots {
    images: BTreeMap<String, Pulls>,
}

impl PullSlots {
    /// `puller` needs to pull `image`: go now, or wait its turn. `limit`
    /// nodes (at least 1) may pull one image at once.
    pub fn ask(&mut self, image: &str, puller: Puller, limit: usize) -> Admission {
        let limit = limit.max(1);
        let pulls = self.images.entry(image.to_string()).or_default();
        pulls.pulling.retain(|p| p.key != puller.key);
        pulls.waiting.retain(|p| p.key != puller.key);
        let nodes = pulls.nodes_pulling();
        if pulls.pulls_on(&puller.node) || nodes.len() < limit {
            pulls.pulling.push(puller);
            return Admission::Go;
        }
        pulls.waiting.push_back(puller);
        Admission::Wait {
            pulling: nodes,
            ahead: pulls.waiting.len() - 1,
        }
    }

    /// The pull (or the wait) of `key` on `node` ended: whom that lets go.
    pub fn release(&mut self, node: &str, key: &str, limit: usize) -> Vec<LetGo> {
        self.drop_where(|p| p.node == node && p.key == key, limit)
    }

    /// `node` went away (lost, its session closed or new): its pulls and
    /// waits end.
    pub fn release_node(&mut self, node: &str, limit: usize) -> Vec<LetGo> {
        self.drop_where(|p| p.node == node, limit)
    }

    /// Pulls and waits past their deadline end.
    pub fn expire(&mut self, now_ms: u64, limit: usize) -> Vec<LetGo> {
        self.drop_where(|p| p.until_ms <= now_ms, limit)
    }

    /// Nodes pulling `image` now.
    pub fn pulling(&self, image: &str) -> Vec<String> {
        self.images
            .get(image)
            .map(Pulls::nodes_pulling)
            .unwrap_or_default()
    }

    /// Whether `key` of `node` waits for a slot.
    pub fn waits(&self, node: &str, key: &str) -> bool {
        self.images
            .values()
            .any(|p| p.waiting.iter().any(|w| w.node == node && w.key == key))
    }

    fn drop_where(&mut self, gone: impl Fn(&Puller) -> bool, limit: usize) -> Vec<LetGo> {
        let limit = limit.max(1);
        let mut out = Vec::new();
        for (image, pulls) in self.images.iter_mut() {
            let before = pulls.pulling.len() + pulls.waiting.len();
            pulls.pulling.retain(|p| !gone(p));
            pulls.waiting.retain(|p| !gone(p));
            if pulls.pulling.len() + pulls.waiting.len() != before {
                pulls.admit(image, limit, &mut out);
            }
        }
        self.images
            .retain(|_, p| !p.pulling.is_empty() || !p.waiting.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "registry.internal/big:1";

    fn p(node: &str, key: &str) -> Puller {
        Puller {
            node: node.into(),
            key: key.into(),
            until_ms: 1_000,
        }
    }

    fn nodes(l: &[LetGo]) -> Vec<&str> {
        l.iter().map(|g| g.puller.node.as_str()).collect()
    }

    #[test]
    fn eight_nodes_with_a_limit_of_two_pull_two_at_a_time_in_arrival_order() {
        let mut s = PullSlots::default();
        let mut waited = 0;
        for i in 0..8 {
            let a = s.ask(IMAGE, p(&format!("n{i}"), &format!("a{i}")), 2);
            match (i, a) {
                (0 | 1, Admission::Go) => {}
                (_, Admission::Wait { pulling, ahead }) => {
                    assert_eq!(pulling, ["n0", "n1"]);
                    // n2 is first in line (0 ahead), n7 has n2..n6 ahead.
                    assert_eq!(ahead, i - 2);
                    waited += 1;
                }
                (i, a) => panic!("n{i}: {a:?}"),
            }
        }
        assert_eq!(waited, 6);
        // Each end lets exactly one more go, first come first served; never
        // more than two nodes pull at once.
        let mut order = vec![];
        for i in 0..8 {
            let go = s.release(&format!("n{i}"), &format!("a{i}"), 2);
            assert!(s.pulling(IMAGE).len() <= 2);
            order.extend(nodes(&go).into_iter().map(String::from));
        }
        assert_eq!(order, ["n2", "n3", "n4", "n5", "n6", "n7"]);
        assert!(s.pulling(IMAGE).is_empty());
    }

    #[test]
    fn a_second_start_on_a_node_that_pulls_shares_its_slot() {
        let mut s = PullSlots::default();
        assert_eq!(s.ask(IMAGE, p("n1", "a1"), 1), Admission::Go);
        assert_eq!(s.ask(IMAGE, p("n1", "a2"), 1), Admission::Go);
        assert!(matches!(
            s.ask(IMAGE, p("n2", "b1"), 1),
            Admission::Wait { .. }
        ));
        // n1's first pull ends, its second still pulls: n2 still waits.
        assert!(s.release("n1", "a1", 1).is_empty());
        assert!(s.waits("n2", "b1"));
        assert_eq!(nodes(&s.release("n1", "a2", 1)), ["n2"]);
        // Other images have their own slots.
        assert_eq!(s.ask("r.io/other:1", p("n3", "c1"), 1), Admission::Go);
    }

    #[test]
    fn a_lost_node_a_cancelled_wait_and_a_deadline_free_slots() {
        let mut s = PullSlots::default();
        s.ask(IMAGE, p("n1", "a1"), 1);
        s.ask(IMAGE, p("n2", "b1"), 1);
        s.ask(IMAGE, p("n3", "c1"), 1);
        // n2's start is stopped while waiting: it leaves the line.
        assert!(s.release("n2", "b1", 1).is_empty());
        // n1 is lost: n3 goes.
        assert_eq!(nodes(&s.release_node("n1", 1)), ["n3"]);
        s.ask(
            IMAGE,
            Puller {
                until_ms: 5_000,
                ..p("n4", "d1")
            },
            1,
        );
        // n3's deadline (1000) passes; n4's (5000) not yet.
        assert_eq!(nodes(&s.expire(1_000, 1)), ["n4"]);
        assert!(s.expire(4_999, 1).is_empty());
        assert_eq!(s.pulling(IMAGE), ["n4"]);
        assert!(s.expire(5_000, 1).is_empty());
        assert!(s.pulling(IMAGE).is_empty());
    }
}
