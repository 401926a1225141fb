//! The container host the container tests need: podman with runc, the local
//! registry on 127.0.0.1, the seed's image name pulling from it, the
//! simulated-GPU CDI spec. [`ensure`] runs the project's
//! `scripts/container-host` once per test process (idempotent: it changes
//! only what is missing), so `cargo test --workspace` works on a fresh
//! machine as root. A test that needs containers calls it first and FAILS
//! when it cannot be set up: it never passes by skipping.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The image the seed's request names, served by the local registry: a
/// busybox root filesystem whose `/etc/os-release` says `Caldera test image`.
pub const SEED_IMAGE: &str = "registry.internal/deeplearning/pytorch:2.1-cu12.1";
/// What that image's `/etc/os-release` holds, and the host's never does.
pub const SEED_IMAGE_OS: &str = "Caldera test image";
/// The local registry's address (`CALDERA_TEST_REGISTRY_PORT` moves it).
pub fn registry() -> String {
    let port = std::env::var("CALDERA_TEST_REGISTRY_PORT").unwrap_or_else(|_| "5555".into());
    format!("127.0.0.1:{port}")
}

/// The project's script, found from this crate's manifest.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/container-host")
}

/// Why the container host could not be set up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostSetupError {
    /// The script could not be started at all (no bash, no file).
    #[error("running {script}: {error}")]
    NotRun { script: String, error: String },
    /// The script ran and failed; its stderr says why.
    #[error("scripts/container-host failed: {stderr}")]
    Failed { stderr: String },
}

/// Why a podman command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum PodmanError {
    /// podman could not be started.
    #[error("podman: {0}")]
    NotRun(std::io::Error),
    /// podman ran and failed; its stderr, trimmed.
    #[error("{0}")]
    Failed(String),
}

/// Sets the container host up (once per process); Err says what failed.
pub fn ensure() -> Result<(), HostSetupError> {
    static DONE: OnceLock<Result<(), HostSetupError>> = OnceLock::new();
    DONE.get_or_init(|| {
        let out =
            Command::new("bash")
                .arg(script())
                .output()
                .map_err(|e| HostSetupError::NotRun {
                    script: script().display().to_string(),
                    error: e.to_string(),
                })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(HostSetupError::Failed {
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    })
    .clone()
}

/// [`ensure`], panicking with its reason: for a test's first line.
pub fn require() {
    if let Err(e) = ensure() {
        panic!("this test needs a container host: {e}");
    }
}

/// Runs `podman` with `args`; its stdout, or Err with its stderr.
pub fn podman(args: &[&str]) -> Result<String, PodmanError> {
    podman_with(&[], args)
}

/// [`podman`] with `env` added to its environment (a store of its own:
/// `CONTAINERS_STORAGE_CONF`).
pub fn podman_with(env: &[(&str, &Path)], args: &[&str]) -> Result<String, PodmanError> {
    let out = Command::new("podman")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(PodmanError::NotRun)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(PodmanError::Failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// Names of the containers (running or not) carrying `label` (`k=v`).
pub fn containers_labelled(label: &str) -> Vec<String> {
    let filter = format!("label={label}");
    podman(&["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"])
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}
