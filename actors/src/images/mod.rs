//! Images on the nodes, as the control plane keeps them: each node's last
//! image report (for `caldera nodes`, the node page and placement), and the
//! stagger of pulls of one image across nodes ([`pulls`]). The NodeActors
//! are the writers; placement hears through the Scheduler
//! (`NodeImagesUpdate`), the gateway reads [`Images::report`].
pub mod pulls;

use caldera_scheduling::placement::NodeImages;
use caldera_spec::images::ImageReport;
use pulls::PullSlots;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, RwLock};

/// Every node's images and the pulls under way.
#[derive(Debug, Default)]
pub struct Images {
    reports: RwLock<HashMap<String, ImageReport>>,
    slots: Mutex<PullSlots>,
}

impl Images {
    /// `node`'s new report; answers whether placement's view of it changed.
    pub fn update(&self, node: &str, report: &ImageReport) -> bool {
        let mut reports = match self.reports.write() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        let before = reports.insert(node.to_string(), report.clone());
        before.is_none_or(|b| node_images(&b) != node_images(report))
    }

    /// `node`'s last report (None: it never sent one).
    pub fn report(&self, node: &str) -> Option<ImageReport> {
        let reports = match self.reports.read() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        reports.get(node).cloned()
    }

    /// Whether `node`'s last report holds `image` (as a task names it).
    pub fn holds(&self, node: &str, image: &str) -> bool {
        self.report(node).is_some_and(|r| r.holds(image).is_some())
    }

    /// The pulls under way and waiting.
    pub fn slots(&self) -> MutexGuard<'_, PullSlots> {
        match self.slots.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Placement's view of a report: every name, and `repo@digest` for each
/// name's repository, with the image's bytes.
pub fn node_images(report: &ImageReport) -> NodeImages {
    let mut held = std::collections::BTreeMap::new();
    for e in &report.images {
        for name in &e.names {
            held.insert(name.clone(), e.size_bytes);
            if !e.digest.is_empty() {
                if let Some(repo) = repo_of(name) {
                    held.insert(format!("{repo}@{}", e.digest), e.size_bytes);
                }
            }
        }
    }
    NodeImages { held }
}

/// `registry/repo` of `registry/repo:tag` (a port's colon is not a tag's).
fn repo_of(name: &str) -> Option<&str> {
    let slash = name.rfind('/').unwrap_or(0);
    name[slash..].rfind(':').map(|i| &name[..slash + i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::images::ImageEntry;

    #[test]
    fn placement_sees_names_and_digests_with_sizes() {
        let report = ImageReport {
            known: true,
            images: vec![ImageEntry {
                id: "i".into(),
                digest: "sha256:ab".into(),
                names: vec!["127.0.0.1:5555/x/y:1".into()],
                size_bytes: 42,
                ..ImageEntry::default()
            }],
            ..ImageReport::default()
        };
        let v = node_images(&report);
        assert_eq!(v.held.get("127.0.0.1:5555/x/y:1"), Some(&42));
        assert_eq!(v.held.get("127.0.0.1:5555/x/y@sha256:ab"), Some(&42));
        assert_eq!(v.held.len(), 2);
        let images = Images::default();
        assert!(images.update("n1", &report));
        assert!(!images.update("n1", &report));
        assert!(images.holds("n1", "127.0.0.1:5555/x/y:1"));
        assert!(!images.holds("n2", "127.0.0.1:5555/x/y:1"));
    }
}
