//! The node's weight cache as the control plane sees it: each cache report
//! (hello, heartbeats) goes into the fleet directory and placement's node
//! view; warmup reports go to the versions whose weights they are about.
use super::NodeActor;
use crate::model::fleet::node_weights;
use crate::node_trust::{self, Refusal};
use crate::protocol::model::{NodeCacheSeen, NodeGone, WarmupFrom};
use crate::protocol::scheduler::NodeWeightsUpdate;
use caldera_spec::weights::{CacheReport, WarmupReport};

impl NodeActor {
    /// Records the report in the fleet directory. Placement hears when what
    /// it weighs changed; the versions hear when the verified copies did
    /// (or at a hello: the session is new, so is the node as a peer).
    pub(super) fn cache_seen(
        &mut self,
        report: &CacheReport,
        peer_url: Option<String>,
        hello: bool,
    ) {
        let name = self.rec.name.clone();
        let before = self.sh.fleet.get(&name);
        let now = self.sh.fleet.update(&name, |c| {
            c.live = true;
            if hello {
                c.peer_url = peer_url;
            }
            c.report = report.clone();
        });
        let weights = node_weights(&now.report);
        let weights_before = before.as_ref().map(|b| node_weights(&b.report));
        if hello || weights_before.as_ref() != Some(&weights) {
            self.sh.scheduler.do_send(NodeWeightsUpdate {
                name: name.clone(),
                weights,
            });
        }
        let changed = before.is_none_or(|b| !b.live || b.verified() != now.verified());
        if hello || changed {
            for (_, m) in self.sh.registry.models() {
                m.do_send(NodeCacheSeen {
                    node: name.clone(),
                    hello,
                });
            }
        }
    }

    /// A warmup report, believed only under the current epoch.
    pub(super) fn on_warmup(&mut self, w: WarmupReport) {
        if w.epoch != self.rec.epoch {
            let reason = format!(
                "warmup report under stale epoch {} (current {})",
                w.epoch, self.rec.epoch
            );
            node_trust::refuse(&self.sh, &self.rec.name, Refusal::StaleEpoch, &reason);
            return;
        }
        for m in self.sh.registry.models_with_sha(&w.sha256) {
            m.do_send(WarmupFrom {
                node: self.rec.name.clone(),
                report: w.clone(),
            });
        }
    }

    /// The node is lost: no version counts on it, as a peer or a receiver.
    pub(super) fn weights_gone(&mut self) {
        let name = self.rec.name.clone();
        self.sh.fleet.update(&name, |c| c.live = false);
        for (_, m) in self.sh.registry.models() {
            m.do_send(NodeGone { node: name.clone() });
        }
    }
}
