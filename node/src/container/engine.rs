//! Which runtimes this node offers, found once at agent start: the process
//! runtime (the shim running a host process) always, and the container
//! runtime where podman answers `podman info` and the agent is root. What
//! is missing when it is down is said in the inventory, so "why does my
//! image not run here" has an answer on the node page.
use super::podman;
use caldera_spec::container::{RuntimeInfo, RuntimeKind};
use std::path::PathBuf;
use std::time::Duration;

/// Longest `podman info` may take at agent start (a first run migrates its
/// store; a wedged one must not keep the agent from joining).
const INFO_TIMEOUT: Duration = Duration::from_secs(20);

/// `--container-runtime`: whether the agent runs containers at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Detect podman and use it where it works.
    #[default]
    Podman,
    /// No container runtime: tasks with an image are not placed here.
    Off,
}

impl Mode {
    /// `podman` or `off`; anything else names the flag.
    pub fn parse(s: &str) -> Result<Mode, UnknownMode> {
        match s.trim() {
            "podman" => Ok(Mode::Podman),
            "off" => Ok(Mode::Off),
            other => Err(UnknownMode(other.to_string())),
        }
    }
}

/// A `--container-runtime` value that is neither `podman` nor `off`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--container-runtime {0:?} must be podman or off")]
pub struct UnknownMode(pub String);

/// The container engine the agent drives, once found working.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    pub podman: PathBuf,
    pub version: String,
}

/// What detection found: the runtimes to report, and the engine if it is up.
#[derive(Debug, Clone)]
pub struct Runtimes {
    pub reported: Vec<RuntimeInfo>,
    pub engine: Option<Engine>,
}

/// The process runtime: always there.
pub fn process_runtime() -> RuntimeInfo {
    RuntimeInfo {
        kind: RuntimeKind::Process,
        engine: "caldera-shim".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        up: true,
        detail: String::new(),
    }
}

/// [`detect`] on a blocking thread: `podman info` takes a few hundred ms,
/// which must not stall the event loop it shares with timers (and, in
/// tests, with other agents' sessions, which would read it as a silent
/// server). A detection that could not run reports the runtime down.
pub async fn detect_off_loop(mode: Mode) -> Runtimes {
    match tokio::task::spawn_blocking(move || detect(mode)).await {
        Ok(found) => found,
        Err(e) => Runtimes {
            reported: vec![
                process_runtime(),
                RuntimeInfo {
                    kind: RuntimeKind::Container,
                    engine: "podman".into(),
                    version: String::new(),
                    up: false,
                    detail: format!("detecting podman failed: {e}"),
                },
            ],
            engine: None,
        },
    }
}

/// Detects the runtimes (blocking: at agent start).
pub fn detect(mode: Mode) -> Runtimes {
    let container = |version: String, detail: String| RuntimeInfo {
        kind: RuntimeKind::Container,
        engine: "podman".into(),
        version,
        up: detail.is_empty(),
        detail,
    };
    let (info, engine) = match probe(mode) {
        Ok(engine) => (
            container(engine.version.clone(), String::new()),
            Some(engine),
        ),
        Err((version, detail)) => {
            tracing::warn!("container runtime down: {detail}");
            (container(version, detail), None)
        }
    };
    Runtimes {
        reported: vec![info, process_runtime()],
        engine,
    }
}

/// Err: (the version if one was read, what is missing).
fn probe(mode: Mode) -> Result<Engine, (String, String)> {
    let down = |detail: &str| (String::new(), detail.to_string());
    if mode == Mode::Off {
        return Err(down("turned off on this node (--container-runtime off)"));
    }
    let podman = podman::find().ok_or_else(|| down("podman is not installed"))?;
    let out = podman::run(&podman, &["info", "--format", "json"], INFO_TIMEOUT)
        .map_err(|e| down(&format!("podman info failed: {e}")))?;
    if !out.success {
        return Err(down(&format!("podman info failed: {}", out.why())));
    }
    let version =
        version_of(&out.stdout).ok_or_else(|| down("podman info answered without a version"))?;
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Err((
            version,
            "the agent is not root (podman runs each container as root, the workload in it as the tenant's uid)".into(),
        ));
    }
    Ok(Engine { podman, version })
}

/// `version.Version` of `podman info --format json`.
fn version_of(info_json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(info_json).ok()?;
    let version = v.get("version")?.get("Version")?.as_str()?;
    (!version.is_empty()).then(|| version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_podman_info() {
        let info =
            r#"{"host":{"cgroupVersion":"v1"},"version":{"APIVersion":"4.3.1","Version":"4.3.1"}}"#;
        assert_eq!(version_of(info).as_deref(), Some("4.3.1"));
        assert_eq!(version_of("{}"), None);
        assert_eq!(version_of("not json"), None);
    }

    #[test]
    fn off_reports_a_down_container_runtime_saying_why_and_the_process_one_up() {
        let r = detect(Mode::Off);
        assert!(r.engine.is_none());
        assert!(!caldera_spec::container::container_up(&r.reported));
        let c = &r.reported[0];
        assert_eq!((c.kind, c.up), (RuntimeKind::Container, false));
        assert!(c.detail.contains("--container-runtime off"), "{}", c.detail);
        assert!(r.reported[1].up && r.reported[1].kind == RuntimeKind::Process);
        assert!(Mode::parse("docker")
            .unwrap_err()
            .to_string()
            .contains("--container-runtime"));
        assert_eq!(Mode::parse("off"), Ok(Mode::Off));
    }
}
