//! Containers: how a task's `image` runs. The control plane resolves what a
//! task asks for (image, pull policy, prepare timeout, data volumes from the
//! operator's allow-list, the tenant's registry credentials) into a
//! [`ContainerStart`] inside the start command; the agent pulls the image
//! while the task is Preparing and runs the workload in a container on its
//! slice. Nodes report which runtimes they have ([`RuntimeInfo`]) and placement
//! sends a task with an image only where the container runtime is up.
use serde::{Deserialize, Serialize};

/// Which runtime a task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// In a container of the task's `image` (the default when it names one).
    Container,
    /// As a process on the host, under the agent's cgroup and uid isolation
    /// (the default without an image; with one, the image is only recorded).
    Process,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Container => "container",
            RuntimeKind::Process => "process",
        }
    }
}

/// When the agent pulls a task's image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Only when the node does not hold the image yet.
    #[default]
    IfNotPresent,
    /// At every start (a moving tag is looked up again).
    Always,
}

/// A data volume a task asks for: `name` from the operator's allow-list,
/// mounted at `path` inside the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VolumeRequest {
    pub name: String,
    /// Absolute path inside the container.
    pub path: String,
    /// Ask for write access (granted only where the operator's entry allows).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_write: bool,
}

/// One bind mount the agent makes, resolved by the control plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub host_path: String,
    pub container_path: String,
    pub read_only: bool,
}

/// What the agent needs to run a start in a container. Its `Debug` leaves
/// the registry credentials out, so a start command written to a log never
/// carries them.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStart {
    /// The image exactly as the task names it.
    pub image: String,
    #[serde(default)]
    pub pull: PullPolicy,
    /// How long pulling may take before the start fails, ms.
    pub prepare_timeout_ms: u64,
    /// Data volumes (the weights, checkpoint and scratch mounts are the
    /// agent's own and not listed here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Mount>,
    /// The tenant's registry credentials for the image's registry, as a
    /// podman/docker auth file's JSON; written to a file only the agent can
    /// read and never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_auth: Option<String>,
}

impl std::fmt::Debug for ContainerStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerStart")
            .field("image", &self.image)
            .field("pull", &self.pull)
            .field("prepare_timeout_ms", &self.prepare_timeout_ms)
            .field("volumes", &self.volumes)
            .field(
                "registry_auth",
                &self.registry_auth.as_ref().map(|_| "(set, not shown)"),
            )
            .finish()
    }
}

/// A runtime a node offers, as its inventory reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuntimeInfo {
    pub kind: RuntimeKind,
    /// `podman` for containers; `caldera-shim` for processes.
    pub engine: String,
    /// The engine's version, where it has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Whether it can run workloads now.
    pub up: bool,
    /// Why not, when it is down (what is missing), else empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Whether `runtimes` has a container runtime that is up.
pub fn container_up(runtimes: &[RuntimeInfo]) -> bool {
    runtimes
        .iter()
        .any(|r| r.kind == RuntimeKind::Container && r.up)
}

/// A pull's progress, as Preparing events report it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PullProgress {
    pub image: String,
    pub layers_done: u32,
    /// 0 while not yet known.
    pub layers_total: u32,
    pub bytes_done: u64,
}

impl PullProgress {
    /// How far the pull got, as a person reads it: "2 of 5 layers, 40 MB
    /// done", or that no layer started (it is still reaching the registry).
    pub fn summary(&self) -> String {
        let layers = match (self.layers_done, self.layers_total) {
            (_, 0) => "no layer started yet (still reaching the registry)".to_string(),
            (done, total) => format!("{done} of {total} layers"),
        };
        format!("{layers}, {} done", human_bytes(self.bytes_done))
    }

    /// "pulling registry.internal/x:1: 2 of 5 layers, 40 MB done".
    pub fn describe(&self) -> String {
        format!("pulling {}: {}", self.image, self.summary())
    }
}

/// Bytes in decimal units, whole below a GB: "40 MB", "1.2 GB", "512 B".
pub fn human_bytes(n: u64) -> String {
    const MB: u64 = 1_000_000;
    match n {
        n if n >= 1_000 * MB => format!("{:.1} GB", n as f64 / (1_000 * MB) as f64),
        n if n >= MB => format!("{} MB", n / MB),
        n if n >= 1_000 => format!("{} kB", n / 1_000),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_without_optional_fields_reads_with_defaults() {
        let c: ContainerStart =
            serde_json::from_str(r#"{"image":"registry.internal/x:1","prepare_timeout_ms":5000}"#)
                .unwrap();
        assert_eq!(c.pull, PullPolicy::IfNotPresent);
        assert!(c.volumes.is_empty() && c.registry_auth.is_none());
        let v: VolumeRequest =
            serde_json::from_str(r#"{"name":"datasets","path":"/data"}"#).unwrap();
        assert!(!v.read_write);
        assert!(
            serde_json::from_str::<VolumeRequest>(r#"{"name":"d","path":"/d","rw":1}"#).is_err()
        );
    }

    #[test]
    fn a_pull_says_how_far_it_got() {
        let mut p = PullProgress {
            image: "registry.internal/x:1".into(),
            ..Default::default()
        };
        assert_eq!(
            p.describe(),
            "pulling registry.internal/x:1: no layer started yet (still reaching the registry), 0 B done"
        );
        p.layers_done = 2;
        p.layers_total = 5;
        p.bytes_done = 40_500_000;
        assert_eq!(p.summary(), "2 of 5 layers, 40 MB done");
        assert_eq!(human_bytes(1_250_000_000), "1.2 GB");
        assert_eq!(human_bytes(4_096), "4 kB");
    }

    #[test]
    fn a_start_written_to_a_log_leaves_the_credentials_out() {
        let c = ContainerStart {
            image: "registry.internal/x:1".into(),
            pull: PullPolicy::IfNotPresent,
            prepare_timeout_ms: 1000,
            volumes: Vec::new(),
            registry_auth: Some(r#"{"auths":{"r":{"auth":"c2VjcmV0"}}}"#.into()),
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
        assert!(shown.contains("registry.internal/x:1") && shown.contains("set, not shown"));
    }

    #[test]
    fn only_an_up_container_runtime_counts() {
        let process = RuntimeInfo {
            kind: RuntimeKind::Process,
            engine: "caldera-shim".into(),
            version: String::new(),
            up: true,
            detail: String::new(),
        };
        let mut podman = RuntimeInfo {
            kind: RuntimeKind::Container,
            engine: "podman".into(),
            version: "4.3.1".into(),
            up: false,
            detail: "podman info failed".into(),
        };
        assert!(!container_up(&[process.clone(), podman.clone()]));
        podman.up = true;
        assert!(container_up(&[process, podman]));
    }
}
