//! The agent's side of the image store: the report in hellos and
//! heartbeats (sent again only when it changed), starts that name an image
//! (the image becomes the agent's once it is in the store), and the
//! operator's pre-pulls.
use super::Agent;
use crate::config::AgentConfig;
use crate::container::images::{ImageCache, ImageCacheConfig, Prepulled};
use caldera_spec::images::{ImageReport, PrepullCommand, PrepullReport};
use caldera_spec::wire::{NodeMessage, StartCommand};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How long after a start's prepare timeout its image is still looked for.
const USE_SLACK: Duration = Duration::from_secs(60);

/// Starts the image task for `config`; none without a container runtime
/// (`--container-runtime off`, or no podman installed).
pub(super) fn open(config: &AgentConfig, prepulled: UnboundedSender<Prepulled>) -> ImageCache {
    let podman = match config.container_runtime {
        crate::container::engine::Mode::Off => None,
        crate::container::engine::Mode::Podman => crate::container::podman::find(),
    };
    let Some(podman) = podman else {
        return ImageCache::disabled();
    };
    ImageCache::start(
        ImageCacheConfig {
            podman: podman.display().to_string(),
            data_dir: config.data_dir.clone(),
            cap_bytes: config.image_cap_bytes(),
            refresh: Duration::from_millis(config.image_refresh_ms),
        },
        prepulled,
    )
}

impl Agent {
    /// The whole report, for a hello.
    pub(super) fn hello_images(&mut self) -> ImageReport {
        self.images.report.borrow_and_update().clone()
    }

    /// The report when it changed since the last one sent, for a heartbeat.
    pub(super) fn changed_images(&mut self) -> Option<ImageReport> {
        match self.images.report.has_changed() {
            Ok(true) => Some(self.images.report.borrow_and_update().clone()),
            _ => None,
        }
    }

    /// A start naming an image: look for it in the store until it is
    /// there (pulled by the start) and count it as used now.
    pub(super) fn image_used(&mut self, cmd: &StartCommand) {
        if let Some(c) = &cmd.container {
            let within = Duration::from_millis(c.prepare_timeout_ms) + USE_SLACK;
            self.images.used(&c.image, within);
        }
    }

    /// The operator's pre-pull, under this session's epoch only.
    pub(super) fn prepull(&mut self, cmd: PrepullCommand) {
        if !self.current_epoch(cmd.epoch, "prepull", &cmd.image) {
            return;
        }
        if !self.images.enabled() {
            self.on_prepulled(Prepulled {
                image: cmd.image,
                outcome: Err(crate::container::images::ImageError::NoRuntime),
            });
            return;
        }
        tracing::info!(image = %cmd.image, "pre-pulling");
        let timeout = Duration::from_millis(cmd.timeout_ms.max(1000));
        self.images.prepull(&cmd.image, timeout);
    }

    /// A pre-pull ended: the control plane hears how, under the epoch now.
    pub(super) fn on_prepulled(&mut self, p: Prepulled) {
        let Some(epoch) = self.live_epoch() else {
            return;
        };
        let (ok, digest, detail) = match p.outcome {
            Ok(digest) => (true, digest, String::new()),
            Err(why) => {
                tracing::warn!(image = %p.image, "pre-pull failed: {why}");
                (false, String::new(), why.to_string())
            }
        };
        self.send(NodeMessage::Prepulled(PrepullReport {
            epoch,
            image: p.image,
            ok,
            digest,
            detail,
        }));
    }
}
