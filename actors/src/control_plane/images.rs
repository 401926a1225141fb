//! The operator's pre-pull: an image onto chosen nodes (or onto N nodes
//! that lack it) before a rollout, so the rollout's starts find it there.
//! Each node's pull takes a pull slot like a start's (`scheduling.max-image-pulls`).
use super::ControlPlane;
use crate::errors::{ActorError, Result};
use crate::protocol::node::{NodeSnapshot, SendPrepull};
use caldera_spec::container::container_up;
use caldera_spec::{SpecError, SpecErrorKind as K};
use futures_util::future::join_all;

/// Which nodes a pre-pull goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepullTarget {
    Nodes(Vec<String>),
    /// This many connected nodes with a container runtime up that do not
    /// hold the image yet, by name.
    Count(u32),
}

/// Where a pre-pull went: sent now, or waiting for a pull slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepulling {
    pub sent: Vec<String>,
    pub waiting: Vec<String>,
}

impl ControlPlane {
    /// `POST /v1/images/prepull`: answers the nodes chosen.
    pub async fn prepull_image(&self, image: &str, target: PrepullTarget) -> Result<Prepulling> {
        caldera_spec::image_ref::parse(image)
            .map_err(|why| ActorError::Invalid(SpecError::new(K::OutOfRange, "image", why)))?;
        let nodes = self.prepull_nodes(image, &target).await?;
        let timeout_ms = self.sh.config.scheduling.preparing_timeout_ms;
        let mut out = Prepulling::default();
        for name in nodes {
            let Some(h) = self.sh.registry.node(&name) else {
                continue;
            };
            let m = SendPrepull {
                image: image.to_string(),
                timeout_ms,
            };
            match h.send(m).await? {
                Ok(true) => out.sent.push(name),
                Ok(false) => out.waiting.push(name),
                Err(why) => return Err(ActorError::Conflict(why.to_string())),
            }
        }
        Ok(out)
    }

    /// The nodes `target` names, each checked: known, connected, with a
    /// container runtime up.
    async fn prepull_nodes(&self, image: &str, target: &PrepullTarget) -> Result<Vec<String>> {
        let mut all = self.sh.registry.nodes();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let snaps = join_all(all.iter().map(|(_, h)| h.send(NodeSnapshot))).await;
        let mut usable = Vec::new();
        let mut why_not = std::collections::HashMap::new();
        for ((name, _), snap) in all.iter().zip(snaps) {
            let (rec, connected, _) = snap?;
            if !connected {
                why_not.insert(name.clone(), "is not connected");
            } else if !container_up(&rec.inventory.runtimes) {
                why_not.insert(name.clone(), "has no container runtime up");
            } else {
                usable.push(name.clone());
            }
        }
        match target {
            PrepullTarget::Nodes(names) => {
                for n in names {
                    if let Some(why) = why_not.get(n) {
                        return Err(ActorError::Unschedulable(format!(
                            "node {n:?} {why}: it cannot pull {image}"
                        )));
                    }
                    if !usable.contains(n) {
                        return Err(ActorError::Invalid(SpecError::new(
                            K::OutOfRange,
                            "nodes",
                            format!("node {n:?} is not known"),
                        )));
                    }
                }
                let mut names = names.clone();
                names.dedup();
                Ok(names)
            }
            PrepullTarget::Count(n) => {
                let chosen: Vec<String> = usable
                    .into_iter()
                    .filter(|name| !self.sh.images.holds(name, image))
                    .take(*n as usize)
                    .collect();
                if chosen.is_empty() {
                    return Err(ActorError::Conflict(format!(
                        "no connected node with a container runtime up lacks {image}"
                    )));
                }
                Ok(chosen)
            }
        }
    }
}
