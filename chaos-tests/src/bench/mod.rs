//! The control plane's benchmarks, run against real processes on 127.0.0.1: the
//! `bench` binary's subcommands call into these modules. Each starts its own
//! control plane (and agents) in a scratch directory, is bounded in time, and
//! prints its figures as lines and as a Markdown table.
pub mod fleet;
pub mod node_loss;
pub mod portal;
pub mod restart;
pub mod start_latency;
pub mod stats;
pub mod submit;
pub mod swap;
pub mod warmup;

use crate::process::ControlPlane;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The server's own defaults for failure detection (see `ServerConfig`),
/// restored over the harness's fast test settings so that every figure is
/// measured as a user would run the server.
pub const SERVER_DEFAULTS: &[(&str, &str)] = &[
    ("CALDERA_HEARTBEAT_INTERVAL_MS", "1000"),
    ("CALDERA_NODE_TIMEOUT_MS", "4000"),
    ("CALDERA_STOP_GRACE_MS", "10000"),
];

/// Where and how the benchmarks run.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The `caldera` binary under test.
    pub bin: PathBuf,
    /// Scratch directories are created under here.
    pub base: PathBuf,
    /// `KEY=VALUE` server environment added after [`SERVER_DEFAULTS`].
    pub env: Vec<(String, String)>,
    /// Upper bound on any one load phase.
    pub deadline: Duration,
    /// Keep the scratch directories (logs, sled files) after the run.
    pub keep: bool,
}

impl Setup {
    /// A fresh, empty scratch directory named `name`.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let dir = self.base.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    pub fn clean(&self, dir: &Path) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Starts a control plane with data under `dir/cp`: server defaults, then
    /// the user's `--env`, then `env`.
    pub fn control_plane(&self, dir: &Path, env: &[(&str, &str)]) -> ControlPlane {
        let mut all: Vec<(&str, &str)> = SERVER_DEFAULTS.to_vec();
        all.extend(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        all.extend_from_slice(env);
        ControlPlane::start(&self.bin, &dir.join("cp"), &all)
    }
}
