//! Running the podman CLI with a bound on how long it may take: the agent
//! and the shim shell out to podman (its CLI is the interface podman keeps
//! stable), and a podman wedged on a lock must not wedge them with it.
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The podman binary the agent uses: `podman` from these directories, the
/// first that has it (the agent's own PATH is not trusted to a tenant's
/// choice, and a shim's is fixed).
const SEARCH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"];

/// PATH for podman itself (it finds conmon and runc through its own config,
/// and helpers such as netavark and iptables through PATH).
pub const PODMAN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Podman's own configuration variables that the agent's environment may
/// set (an operator's registries.conf, storage.conf or containers.conf for
/// the agent's podman). Every podman the agent and its shims run gets them,
/// so a pull, a run and a listing all see the same image store.
pub const CONFIG_ENV: &[&str] = &[
    "CONTAINERS_REGISTRIES_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_CONF",
];

/// [`CONFIG_ENV`] as this process has them.
pub fn config_env() -> Vec<(String, String)> {
    CONFIG_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// Where podman is installed, if it is.
pub fn find() -> Option<PathBuf> {
    SEARCH
        .iter()
        .map(|d| Path::new(d).join("podman"))
        .find(|p| p.is_file())
}

/// What one podman command printed and how it ended.
#[derive(Debug, Clone)]
pub struct Output {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The first line of stderr, for a sentence that says why it failed.
    pub fn why(&self) -> String {
        let line = self.stderr.lines().find(|l| !l.trim().is_empty());
        match (line, self.code) {
            (Some(l), _) => l.trim().to_string(),
            (None, Some(c)) => format!("exit code {c}"),
            (None, None) => "killed by a signal".to_string(),
        }
    }
}

/// Why a podman call did not give an answer to act on.
#[derive(Debug, thiserror::Error)]
pub enum PodmanError {
    #[error("{}: {source}", podman.display())]
    Spawn {
        podman: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("podman {verb} did not answer within {timeout:?}")]
    Timeout { verb: String, timeout: Duration },
    #[error("waiting for podman: {0}")]
    Wait(#[source] std::io::Error),
    #[error("podman {verb} failed: {why}")]
    Failed { verb: &'static str, why: String },
    #[error("podman {verb} answered unreadable JSON: {why}")]
    Unreadable { verb: &'static str, why: String },
    #[error("podman {verb} {name} failed: {why}")]
    Refused {
        verb: &'static str,
        name: String,
        why: String,
    },
}

/// Runs `podman args...` and waits at most `timeout` (then kills it: Err).
/// Blocking: for the shim, and for the agent at start or off its loop.
pub fn run(podman: &Path, args: &[&str], timeout: Duration) -> Result<Output, PodmanError> {
    let mut child = Command::new(podman)
        .args(args)
        .env_clear()
        .env("PATH", PODMAN_PATH)
        .envs(config_env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PodmanError::Spawn {
            podman: podman.to_path_buf(),
            source,
        })?;
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PodmanError::Timeout {
                    verb: args.first().copied().unwrap_or("").to_string(),
                    timeout,
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(PodmanError::Wait(e)),
        }
    };
    let text = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    Ok(Output {
        success: status.success(),
        code: status.code(),
        stdout: text(out),
        stderr: text(err),
    })
}

/// Longest a `podman kill` or `podman rm` may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

/// Removes container `name`, killing it at once if it runs
/// (`rm -f -t 0`); a container already gone is no error.
pub fn remove(podman: &Path, name: &str) -> Result<(), PodmanError> {
    let out = run(
        podman,
        &["rm", "--force", "--ignore", "--time", "0", name],
        CONTROL_TIMEOUT,
    )?;
    match out.success {
        true => Ok(()),
        false => Err(PodmanError::Refused {
            verb: "rm",
            name: name.to_string(),
            why: out.why(),
        }),
    }
}

/// Sends `signal` (e.g. `TERM`) to the container's main process; a
/// container already gone is no error (Err only when podman failed).
pub fn signal(podman: &Path, name: &str, signal: &str) -> Result<(), PodmanError> {
    let out = run(podman, &["kill", "--signal", signal, name], CONTROL_TIMEOUT)?;
    let gone = out.stderr.contains("no such container") || out.stderr.contains("not running");
    match out.success || gone {
        true => Ok(()),
        false => Err(PodmanError::Refused {
            verb: "kill",
            name: name.to_string(),
            why: out.why(),
        }),
    }
}

/// Reads a pipe to its end on a thread of its own (a full pipe would
/// otherwise stop podman before it exits).
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_timeout_is_killed_and_said_so() {
        let err = run(Path::new("/bin/sleep"), &["5"], Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, PodmanError::Timeout { .. }), "{err}");
        assert!(err.to_string().contains("did not answer"), "{err}");
        let ok = run(Path::new("/bin/echo"), &["hi"], Duration::from_secs(5)).unwrap();
        assert!(ok.success && ok.stdout.trim() == "hi", "{ok:?}");
        let bad = run(
            Path::new("/bin/sh"),
            &["-c", "echo nope >&2; exit 3"],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            (bad.success, bad.code, bad.why().as_str()),
            (false, Some(3), "nope")
        );
    }
}
