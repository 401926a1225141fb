//! Readiness probes, run by the agent beside each workload that has one: a
//! tokio task per workload that sends an HTTP GET to 127.0.0.1:$CALDERA_PORT
//! (a plain TCP client: one request, `Connection: close`) or runs a command
//! (as the workload's uid, killed at its timeout; inside the container with
//! `podman exec` for a container workload), every `period_s`. It tells
//! the runtime only when readiness changes: ready after one success; not
//! ready again after `failure_threshold` consecutive failures. The runtime
//! turns that into `Readiness` events (see [`super::Note::Readiness`]).
use super::Note;
use caldera_spec::ReadinessProbe;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedSender;

/// The workload a probe watches, as its notes name it.
#[derive(Debug, Clone)]
pub struct Target {
    pub allocation_id: String,
    /// The runtime's run of the workload: a note of an older run is dropped.
    pub run: u64,
    pub generation: u32,
    pub port: Option<u16>,
    pub uid: Option<u32>,
}

/// The container a command probe runs in: its files, its processes and its
/// loopback are not the host's, so a probe such as `test -f /tmp/ready`
/// must look inside it.
#[derive(Debug, Clone)]
pub struct InContainer {
    pub podman: PathBuf,
    pub name: String,
}

/// Starts probing `target` with `probe`; the handle stops it (the workload
/// ended or was swapped). None outside a tokio runtime.
pub fn watch(
    probe: ReadinessProbe,
    target: Target,
    notes: UnboundedSender<Note>,
) -> Option<tokio::task::AbortHandle> {
    watch_in(probe, target, None, notes)
}

/// [`watch`] for a workload in `container` (its command probes run there).
pub fn watch_in(
    probe: ReadinessProbe,
    target: Target,
    container: Option<InContainer>,
    notes: UnboundedSender<Note>,
) -> Option<tokio::task::AbortHandle> {
    let rt = tokio::runtime::Handle::try_current().ok()?;
    Some(
        rt.spawn(run(probe, target, container, notes))
            .abort_handle(),
    )
}

async fn run(
    probe: ReadinessProbe,
    target: Target,
    container: Option<InContainer>,
    notes: UnboundedSender<Note>,
) {
    let period = Duration::from_secs(u64::from(probe.period_s));
    let mut ready = false;
    let mut failures = 0u32;
    loop {
        let (ok, detail) = once_in(&probe, &target, container.as_ref()).await;
        let change = match (ready, ok) {
            (false, true) => Some(true),
            (true, false) => {
                failures += 1;
                (failures >= probe.failure_threshold).then_some(false)
            }
            _ => None,
        };
        if ok {
            failures = 0;
        }
        if let Some(now) = change {
            ready = now;
            failures = 0;
            let note = Note::Readiness {
                allocation_id: target.allocation_id.clone(),
                run: target.run,
                generation: target.generation,
                ready: now,
                detail,
            };
            if notes.send(note).is_err() {
                return;
            }
        }
        tokio::time::sleep(period).await;
    }
}

/// One probe: passed or not, and what was seen (for the event's detail).
pub async fn once(probe: &ReadinessProbe, target: &Target) -> (bool, String) {
    once_in(probe, target, None).await
}

/// [`once`] for a workload that may run in `container`.
pub async fn once_in(
    probe: &ReadinessProbe,
    target: &Target,
    container: Option<&InContainer>,
) -> (bool, String) {
    let timeout = Duration::from_secs(u64::from(probe.timeout_s));
    let attempt = async {
        match (&probe.http_path, container) {
            (Some(path), _) => http_get(target.port, path).await,
            (None, Some(c)) => exec(&probe.command, c).await,
            (None, None) => command(&probe.command, target).await,
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(outcome) => outcome,
        Err(_) => (false, format!("no answer within {} s", probe.timeout_s)),
    }
}

async fn http_get(port: Option<u16>, path: &str) -> (bool, String) {
    let Some(port) = port else {
        return (false, "the workload has no port".into());
    };
    let what = format!("GET {path} on port {port}");
    let mut stream = match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
        Ok(s) => s,
        Err(e) => return (false, format!("{what}: {e}")),
    };
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()).await {
        return (false, format!("{what}: {e}"));
    }
    // The status line is all a probe needs: read until it is complete.
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.contains(&b'\n') && head.len() < 4096 {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return (false, format!("{what}: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let status = line
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok());
    match status {
        Some(code) => ((200..300).contains(&code), format!("{what}: {code}")),
        None => (false, format!("{what}: not an HTTP answer")),
    }
}

/// A command probe inside the container (`podman exec`, as the container's
/// user, with its environment); killed at the timeout like any probe.
async fn exec(argv: &[String], c: &InContainer) -> (bool, String) {
    let Some(program) = argv.first() else {
        return (false, "the probe has no command".into());
    };
    let status = tokio::process::Command::new(&c.podman)
        .arg("exec")
        .arg(&c.name)
        .args(argv)
        .env_clear()
        .env("PATH", crate::container::podman::PODMAN_PATH)
        .envs(crate::container::podman::config_env())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status()
        .await;
    match status {
        Ok(s) if s.success() => (true, format!("{program} exited 0 in the container")),
        Ok(s) => (false, format!("{program} in the container ended with {s}")),
        Err(e) => (false, format!("podman exec {program}: {e}")),
    }
}

async fn command(argv: &[String], target: &Target) -> (bool, String) {
    let Some((program, args)) = argv.split_first() else {
        return (false, "the probe has no command".into());
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // A timed-out probe is dropped by the timeout: kill it then.
        .kill_on_drop(true);
    if let Some(port) = target.port {
        cmd.env("CALDERA_PORT", port.to_string());
    }
    // SAFETY: geteuid has no memory effects.
    if let Some(uid) = target.uid.filter(|_| unsafe { libc::geteuid() } == 0) {
        // As the workload it probes: its uid, and a /proc of its own where
        // the workload has one (hidden first: that takes root).
        let hide = crate::proc_hiding::check()
            .is_ok()
            .then(crate::proc_hiding::ProcMount::new);
        // SAFETY: async-signal-safe syscalls only, on values made before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(m) = &hide {
                    m.hide_other_processes()?;
                }
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(uid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    match cmd.status().await {
        Ok(s) if s.success() => (true, format!("{program} exited 0")),
        Ok(s) => (false, format!("{program} ended with {s}")),
        Err(e) => (false, format!("{program}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(port: Option<u16>) -> Target {
        Target {
            allocation_id: "a".into(),
            run: 1,
            generation: 0,
            port,
            uid: None,
        }
    }

    /// Answers every connection with `status`.
    async fn server(status: &'static str) -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        port
    }

    #[tokio::test]
    async fn http_probes_pass_on_2xx_only() {
        let probe = ReadinessProbe::http("/ready");
        let ok = server("200 OK").await;
        assert_eq!(
            once(&probe, &target(Some(ok))).await,
            (true, format!("GET /ready on port {ok}: 200"))
        );
        let busy = server("503 Service Unavailable").await;
        assert!(!once(&probe, &target(Some(busy))).await.0);
        // Nothing listens there any more.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        assert!(!once(&probe, &target(Some(port))).await.0);
    }

    #[tokio::test]
    async fn command_probes_pass_on_exit_0_and_are_killed_at_their_timeout() {
        let mut probe = ReadinessProbe::http("/");
        probe.http_path = None;
        probe.command = vec![
            "sh".into(),
            "-c".into(),
            "test \"$CALDERA_PORT\" = 7".into(),
        ];
        assert!(once(&probe, &target(Some(7))).await.0);
        assert!(!once(&probe, &target(Some(8))).await.0);
        probe.command = vec!["sleep".into(), "30".into()];
        let begun = std::time::Instant::now();
        let (ok, detail) = once(&probe, &target(None)).await;
        assert!(!ok && detail.contains("within 1 s"), "{detail}");
        assert!(begun.elapsed() < Duration::from_secs(5));
    }
}
