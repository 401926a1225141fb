//! The `podman run` command line of one workload's container. Everything the
//! workload may see of the host is listed here: its mounts (the model copy
//! read-only, its task's checkpoint tree, its scratch dir, the data volumes
//! the control plane resolved), the allocated GPUs through CDI, and its
//! claimed port; nothing else. Its environment goes through a file in the
//! shim dir (mode 0600), never the command line, which every user on the
//! host can read in /proc.
use caldera_spec::container::Mount;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Where the model version's weights are inside the container (read-only).
pub const MODEL_PATH: &str = "/caldera/model";
/// Where the task's checkpoint tree is inside the container (read-write).
pub const CHECKPOINTS: &str = "/caldera/checkpoints";
/// The allocation's scratch dir inside the container (read-write; HOME, TMPDIR).
pub const SCRATCH: &str = "/caldera/scratch";
/// Label naming the allocation a container runs.
pub const LABEL_ALLOCATION: &str = "caldera.allocation";
/// Label naming the agent (node name and data dir) that made a container.
pub const LABEL_NODE: &str = "caldera.node";
/// The env file's name in the shim dir.
pub const ENV_FILE: &str = "container.env";
/// How many uids (and gids) a container's user namespace maps, from the
/// tenant's uid up: the 16-bit range images are built for, so files an
/// image gives to other users (a service account, `nobody`) still map. Only
/// uid 0 inside, the tenant's own, is ever used by a process: with every
/// capability dropped and no new privileges, none can become another.
/// One contiguous block: podman 4.3's overlay storage on this kind of host
/// refuses a map of several blocks (its mount of the remapped layers fails
/// with "permission denied"), so the others cannot be moved elsewhere.
pub const USERNS_IDS: u32 = 65536;
/// Processes one container may have at most, when the agent is not told
/// otherwise (`--container-pids-limit`): plenty for a training job's data
/// loader workers, and a fork bomb stops there.
pub const DEFAULT_PIDS_LIMIT: u32 = 4096;

/// Everything one `podman run` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPlan {
    pub name: String,
    pub allocation_id: String,
    /// The agent's identity ([`agent_identity`]).
    pub node: String,
    /// The workload's cgroup, relative to the hierarchy's root.
    pub cgroup_parent: Option<String>,
    pub cpu_milli: u64,
    pub memory_mb: u64,
    pub pids_limit: u32,
    /// The tenant's uid and gid on the host: the container gets a user
    /// namespace whose root is them (None: the image's user, no namespace).
    pub user: Option<(u32, u32)>,
    pub gpu_indices: Vec<u32>,
    pub mounts: Vec<Mount>,
    pub env_file: PathBuf,
    /// Published on the host as the same port (bridge network).
    pub port: Option<u16>,
    pub image: String,
    pub command: Vec<String>,
}

impl RunPlan {
    /// The arguments after `podman`. The container is kept when it ends
    /// (no `--rm`: the shim reads its exit code, then removes it); a small
    /// init (`--init`) is its pid 1, so a SIGTERM reaches the workload as it
    /// does on the host (a pid 1 without a handler ignores it); its output
    /// goes straight to the shim's log file
    /// (`passthrough`: the container holds the file itself, so its output
    /// does not depend on the podman client living); `--pull=never`
    /// because the agent pulled it while the task was Preparing.
    pub fn argv(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["run".into()];
        if init_available() {
            a.push("--init".into());
        }
        a.extend(["--log-driver=passthrough", "--pull=never"].map(String::from));
        let mut add = |flag: &str, value: String| {
            a.push(flag.to_string());
            a.push(value);
        };
        add("--name", self.name.clone());
        add(
            "--label",
            format!("{LABEL_ALLOCATION}={}", self.allocation_id),
        );
        add("--label", format!("{LABEL_NODE}={}", self.node));
        if let Some(parent) = &self.cgroup_parent {
            add("--cgroup-parent", parent.clone());
        }
        if self.cpu_milli > 0 {
            add("--cpus", cpus(self.cpu_milli));
        }
        if self.memory_mb > 0 {
            // No swap beyond the limit: over it, the kernel's OOM killer.
            add("--memory", format!("{}m", self.memory_mb));
            add("--memory-swap", format!("{}m", self.memory_mb));
        }
        add("--pids-limit", self.pids_limit.to_string());
        if let Some((uid, gid)) = self.user {
            // A user namespace of its own: the container's root is the
            // tenant's uid on the host (files it writes to its checkpoint
            // tree are the tenant's), and holds no capability even there.
            add("--uidmap", format!("0:{uid}:{USERNS_IDS}"));
            add("--gidmap", format!("0:{gid}:{USERNS_IDS}"));
            add("--user", "0:0".into());
        }
        add("--security-opt", "no-new-privileges".into());
        add("--cap-drop", "all".into());
        for i in &self.gpu_indices {
            add("--device", format!("nvidia.com/gpu={i}"));
        }
        for m in &self.mounts {
            let mode = if m.read_only { "ro" } else { "rw" };
            add(
                "--volume",
                format!("{}:{}:{mode}", m.host_path, m.container_path),
            );
        }
        if let Some(port) = self.port {
            add("--publish", format!("{port}:{port}"));
        }
        add("--env-file", self.env_file.to_string_lossy().into_owned());
        add("--workdir", SCRATCH.into());
        a.push(self.image.clone());
        a.extend(self.command.iter().cloned());
        a
    }
}

/// The agent's identity on its host, as the `caldera.node` label says it:
/// its node name and a hash of its data dir (two agents of one name on a
/// host, in two clusters or parallel tests, are two identities).
pub fn agent_identity(node_name: &str, data_dir: &Path) -> String {
    format!(
        "{node_name}-{:08x}",
        fnv1a(data_dir.as_os_str().as_encoded_bytes())
    )
}

/// FNV-1a, 32 bits: stable across builds, for names.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Where podman looks for its init (catatonit) by default: without one,
/// `--init` would fail every start, so it is left out (and a workload's pid
/// 1 then ignores SIGTERM unless it handles it).
const INIT_PATHS: &[&str] = &[
    "/usr/local/libexec/podman/catatonit",
    "/usr/local/lib/podman/catatonit",
    "/usr/libexec/podman/catatonit",
    "/usr/lib/podman/catatonit",
];

/// Whether podman's init is installed (looked up once per process).
pub fn init_available() -> bool {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        let found = INIT_PATHS.iter().any(|p| Path::new(p).is_file());
        if !found {
            tracing::warn!(
                "podman's init (catatonit) is not installed: containers run without --init, \
                 and a workload's pid 1 ignores SIGTERM unless it handles it"
            );
        }
        found
    })
}

/// `--cpus` for thousandths of a core: 1500 -> "1.5", 250 -> "0.25".
fn cpus(cpu_milli: u64) -> String {
    let mut s = format!("{}.{:03}", cpu_milli / 1000, cpu_milli % 1000);
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.pop();
    }
    s
}

/// A container's name for an allocation: `caldera-`, the id made safe, and
/// a hash of the agent's identity and the id (ids repeat across clusters,
/// and two agents may share a host's podman).
pub fn container_name(node: &str, allocation_id: &str) -> String {
    let safe: String = allocation_id
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '.' | '-' => c,
            _ => '_',
        })
        .take(80)
        .collect();
    let hash = fnv1a(format!("{node}\n{allocation_id}").as_bytes());
    format!("caldera-{safe}-{hash:08x}")
}

/// Why a mount or a variable cannot be handed to podman as given; each
/// names the path or variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("volume {what} {path:?} must be an absolute path without ':', ',' or a line break")]
    MountPath { what: &'static str, path: String },
    #[error("env variable {0:?}: a container's variable name cannot be empty, hold '=' or whitespace, or start with '#'")]
    EnvName(String),
    #[error("env variable {0}: a container's variable cannot hold a line break")]
    EnvValue(String),
}

/// A mount podman can take: absolute paths without `:` (its separator) or
/// a line break; Err names the path.
pub fn check_mount(m: &Mount) -> Result<(), Unfit> {
    for (what, p) in [
        ("host path", &m.host_path),
        ("container path", &m.container_path),
    ] {
        if !p.starts_with('/') || p.contains(':') || p.contains('\n') || p.contains(',') {
            return Err(Unfit::MountPath {
                what,
                path: p.clone(),
            });
        }
    }
    Ok(())
}

/// Writes the container's environment as podman's env file (`KEY=VALUE`
/// per line, mode 0600). A line break cannot be said in that format, so a
/// value holding one is refused (Err names the variable), as is a name with
/// `=` or whitespace.
pub fn write_env_file(path: &Path, env: &[(String, String)]) -> io::Result<()> {
    let mut text = String::new();
    for (k, v) in env {
        check_env_var(k, v).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let _ = writeln!(text, "{k}={v}");
    }
    crate::secret::write_private(path, text.as_bytes())
}

/// Whether one variable fits an env file; Err says which and why.
pub fn check_env_var(k: &str, v: &str) -> Result<(), Unfit> {
    if k.is_empty() || k.contains('=') || k.chars().any(char::is_whitespace) || k.starts_with('#') {
        return Err(Unfit::EnvName(k.to_string()));
    }
    if v.contains('\n') || v.contains('\r') || v.contains('\0') {
        return Err(Unfit::EnvValue(k.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RunPlan {
        RunPlan {
            name: "caldera-a1-0000".into(),
            allocation_id: "acme/a1".into(),
            node: "n1-1234abcd".into(),
            cgroup_parent: Some("/caldera-n1-1234abcd/acme+a1".into()),
            cpu_milli: 1500,
            memory_mb: 512,
            pids_limit: 64,
            user: Some((61000, 61000)),
            gpu_indices: vec![1, 3],
            mounts: vec![Mount {
                host_path: "/d/cache/m".into(),
                container_path: MODEL_PATH.into(),
                read_only: true,
            }],
            env_file: "/d/shims/a1/container.env".into(),
            port: Some(20001),
            image: "registry.internal/x:1".into(),
            command: vec!["sh".into(), "-c".into(), "echo hi".into()],
        }
    }

    #[test]
    fn the_command_line_carries_limits_identity_devices_mounts_and_no_env_values() {
        let argv = plan().argv().join(" ");
        let start = match init_available() {
            true => "run --init --log-driver",
            false => "run --log-driver",
        };
        assert!(argv.starts_with(start), "{argv}");
        for want in [
            "--log-driver=passthrough --pull=never",
            "--name caldera-a1-0000",
            "--label caldera.allocation=acme/a1 --label caldera.node=n1-1234abcd",
            "--cgroup-parent /caldera-n1-1234abcd/acme+a1",
            "--cpus 1.5 --memory 512m --memory-swap 512m --pids-limit 64",
            "--uidmap 0:61000:65536 --gidmap 0:61000:65536 --user 0:0",
            "--security-opt no-new-privileges --cap-drop all",
            "--device nvidia.com/gpu=1 --device nvidia.com/gpu=3",
            "--volume /d/cache/m:/caldera/model:ro",
            "--publish 20001:20001 --env-file /d/shims/a1/container.env",
            "--workdir /caldera/scratch registry.internal/x:1 sh -c echo hi",
        ] {
            assert!(argv.contains(want), "{want:?} missing from {argv}");
        }
        let mut bare = plan();
        (bare.cpu_milli, bare.memory_mb, bare.user, bare.port) = (0, 0, None, None);
        let argv = bare.argv().join(" ");
        for absent in ["--cpus", "--memory", "--user", "--uidmap", "--publish"] {
            assert!(!argv.contains(absent), "{absent} in {argv}");
        }
    }

    #[test]
    fn cpus_are_written_as_podman_reads_them() {
        assert_eq!(cpus(1500), "1.5");
        assert_eq!(cpus(250), "0.25");
        assert_eq!(cpus(2000), "2");
        assert_eq!(cpus(1), "0.001");
    }

    #[test]
    fn names_are_podman_safe_and_differ_per_agent() {
        let a = container_name("n1-aaaa", "acme/train 1");
        assert!(a.starts_with("caldera-acme_train_1-"), "{a}");
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)));
        assert_ne!(a, container_name("n1-bbbb", "acme/train 1"));
        assert_eq!(a, container_name("n1-aaaa", "acme/train 1"));
    }

    #[test]
    fn env_files_refuse_what_they_cannot_say() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(ENV_FILE);
        let ok = vec![("A".to_string(), "x=y z".to_string())];
        write_env_file(&p, &ok).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "A=x=y z\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let bad = vec![("TOKEN".to_string(), "a\nb".to_string())];
        let e = write_env_file(&p, &bad).unwrap_err().to_string();
        assert!(e.contains("TOKEN") && e.contains("line break"), "{e}");
        assert!(check_env_var("A B", "x")
            .unwrap_err()
            .to_string()
            .contains("\"A B\""));
        let m = Mount {
            host_path: "/a:b".into(),
            container_path: "/data".into(),
            read_only: true,
        };
        assert!(check_mount(&m)
            .unwrap_err()
            .to_string()
            .contains("\"/a:b\""));
    }
}
