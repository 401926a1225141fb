//! What the core knows of images: what each node holds (from its image
//! reports). A task that runs in an image some node holds carries it in its
//! demand, with the size those nodes report, and placement prefers the
//! nodes that hold it (see `placement::score::locality`). Unlike weights,
//! an image never filters a node out: any node can pull it.
use caldera_spec::images::canonical;
use caldera_spec::TaskSpec;

use super::core::Core;
use crate::placement::{ImageNeed, NodeImages};

impl Core {
    /// What `node` holds, from its last image report. Kept across the
    /// node's other updates until the next report replaces it.
    pub fn set_node_images(&mut self, node: &str, images: NodeImages) {
        if self.node_images.get(node) == Some(&images) {
            return;
        }
        self.node_images.insert(node.to_string(), images);
        self.refresh_node(node);
    }

    /// What `node` held at its last report (empty when unknown).
    pub(in crate::queue) fn node_images(&self, node: &str) -> NodeImages {
        self.node_images.get(node).cloned().unwrap_or_default()
    }

    /// The image `spec` runs in, when it runs in a container and some node
    /// holds that image (its size is then known); else None.
    pub(in crate::queue) fn image_for(&self, spec: &TaskSpec) -> Option<ImageNeed> {
        if spec.runtime_kind() != caldera_spec::container::RuntimeKind::Container {
            return None;
        }
        let image = canonical(spec.image.as_deref()?);
        let size_bytes = self
            .node_images
            .values()
            .filter_map(|n| n.held.get(&image))
            .copied()
            .max()?;
        Some(ImageNeed { image, size_bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::core::{Core, CoreConfig};
    use crate::queue::fixtures::{node, placements, spec, submit};
    use caldera_spec::container::{RuntimeInfo, RuntimeKind};

    const IMAGE: &str = "registry.internal/deeplearning/pytorch:2.1-cu12.1";

    fn holding(bytes: u64) -> NodeImages {
        NodeImages {
            held: [(IMAGE.to_string(), bytes)].into(),
        }
    }

    fn in_image(id: &str) -> TaskSpec {
        let mut s = spec(id, 1, "low", None);
        s.image = Some(IMAGE.into());
        s
    }

    /// A best-fit core with these nodes of 2 GPUs up, podman up on each.
    fn core_with(names: &[&str]) -> Core {
        let mut c = Core::new(
            crate::placement::PolicyName::BestFit,
            1,
            CoreConfig::default(),
        );
        for n in names {
            let mut inv = node(2);
            inv.runtimes = vec![RuntimeInfo {
                kind: RuntimeKind::Container,
                engine: "podman".into(),
                version: "4.3.1".into(),
                up: true,
                detail: String::new(),
            }];
            c.node_up(n, inv);
        }
        c
    }

    #[test]
    fn a_task_goes_to_the_node_that_holds_its_image_and_says_so() {
        let mut c = core_with(&["a", "b", "c"]);
        c.set_node_images("b", holding(2 << 30));
        submit(&mut c, "t", in_image("s1"), 1, 1);
        assert_eq!(
            placements(&c.cycle(0)),
            [("b".to_string(), Some("image present"))]
        );
        // The placement refreshed b's view; its image report stayed.
        submit(&mut c, "t", in_image("s2"), 2, 1);
        assert_eq!(
            placements(&c.cycle(1)),
            [("b".to_string(), Some("image present"))]
        );
    }

    #[test]
    fn an_image_no_node_holds_or_a_process_task_carries_no_image_need() {
        let mut c = core_with(&["a", "b"]);
        assert_eq!(c.image_for(&in_image("t")), None);
        c.set_node_images("a", holding(7));
        c.set_node_images("b", holding(9));
        assert_eq!(
            c.image_for(&in_image("t")),
            Some(ImageNeed {
                image: IMAGE.into(),
                size_bytes: 9
            })
        );
        let mut process = in_image("p");
        process.runtime = Some(RuntimeKind::Process);
        assert_eq!(c.image_for(&process), None);
        // A short name reads as podman names it.
        let mut short = in_image("s");
        short.image = Some("alpine".into());
        c.set_node_images(
            "a",
            NodeImages {
                held: [("docker.io/library/alpine:latest".to_string(), 3)].into(),
            },
        );
        assert_eq!(c.image_for(&short).map(|n| n.size_bytes), Some(3));
    }
}
