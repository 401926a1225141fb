//! Starting, stopping, killing and pausing real caldera processes.
use crate::http::Api;
use crate::{JOIN_TOKEN, OPERATOR_TOKEN};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// Polls `f` every 50 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a pid we spawned; no memory is touched.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// A running `caldera server`. Killed with SIGKILL when dropped.
pub struct ControlPlane {
    bin: PathBuf,
    pub data_dir: PathBuf,
    pub addr: String,
    env: Vec<(String, String)>,
    child: Option<Child>,
    pub log: PathBuf,
}

impl ControlPlane {
    /// Starts a server on a fresh port with fast failure detection (heartbeat
    /// 250 ms, node timeout 1.5 s) and webhooks allowed to 127.0.0.1, unless
    /// `env` overrides it.
    pub fn start(bin: &Path, data_dir: &Path, env: &[(&str, &str)]) -> ControlPlane {
        let mut all: Vec<(String, String)> = vec![
            ("CALDERA_OPERATOR_TOKEN".into(), OPERATOR_TOKEN.into()),
            ("CALDERA_JOIN_TOKEN".into(), JOIN_TOKEN.into()),
            ("CALDERA_HEARTBEAT_INTERVAL_MS".into(), "250".into()),
            ("CALDERA_NODE_TIMEOUT_MS".into(), "1500".into()),
            ("CALDERA_STOP_GRACE_MS".into(), "2000".into()),
            // A short lease, so a lost node's fenced tasks move within seconds.
            ("CALDERA_WORKLOAD_LEASE_MS".into(), "2000".into()),
            // The tests' webhook receivers listen on the loopback, which a
            // control plane refuses unless its operator allows it.
            ("CALDERA_WEBHOOK_ALLOW_HOSTS".into(), "127.0.0.1".into()),
        ];
        for (k, v) in env {
            all.retain(|(key, _)| key != k);
            all.push((k.to_string(), v.to_string()));
        }
        let mut cp = ControlPlane {
            bin: bin.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            addr: format!("127.0.0.1:{}", free_port()),
            env: all,
            child: None,
            log: data_dir.join("server.log"),
        };
        cp.spawn();
        cp
    }

    fn spawn(&mut self) {
        self.launch();
        let api = self.operator();
        let up = wait_until(Duration::from_secs(20), || {
            api.get("/healthz").status == 200
        });
        assert!(
            up,
            "control plane did not answer /healthz; log: {}",
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// Starts the process and returns at once, without waiting for it to answer.
    fn launch(&mut self) {
        std::fs::create_dir_all(&self.data_dir).ok();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .ok();
        let mut cmd = Command::new(&self.bin);
        cmd.args(["server", "--data-dir"])
            .arg(&self.data_dir)
            .args(["--listen", &self.addr]);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::piped())
            .stderr(log.map(Stdio::from).unwrap_or(Stdio::null()))
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        // Drain stdout so the server never blocks on a full pipe.
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || for _ in BufReader::new(out).lines() {});
        }
        self.child = Some(child);
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn operator(&self) -> Api {
        Api::new(&self.addr, Some(OPERATOR_TOKEN))
    }

    pub fn api(&self, token: &str) -> Api {
        Api::new(&self.addr, Some(token))
    }

    /// Creates a tenant and returns its token.
    pub fn tenant(&self, name: &str) -> String {
        let r = self
            .operator()
            .post("/v1/tenants", &format!(r#"{{"name":"{name}"}}"#));
        assert_eq!(r.status, 201, "{:?}", r.body);
        r.data()["token"].as_str().unwrap_or_default().to_string()
    }

    /// SIGKILL: no chance to flush or say goodbye.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal(&c, libc::SIGKILL);
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same address and data.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// Starts the server again on the same address and data with `env`
    /// changed: an operator's new configuration.
    pub fn restart_with(&mut self, env: &[(&str, &str)]) {
        for (k, v) in env {
            self.env.retain(|(key, _)| key != k);
            self.env.push((k.to_string(), v.to_string()));
        }
        self.restart();
    }

    /// kill -9, then start the server again on the same address and data
    /// without waiting for it: for timing how long it takes to answer.
    pub fn relaunch(&mut self) {
        self.kill9();
        self.launch();
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A running `caldera node`. Killed with SIGKILL when dropped, and so are the
/// shims of its workloads (which outlive a killed agent by design).
pub struct Agent {
    pub name: String,
    pub data_dir: PathBuf,
    child: Option<Child>,
    args: Vec<String>,
    /// Set in the agent's environment (on top of the test's).
    env: Vec<(String, String)>,
    bin: PathBuf,
    pub log: PathBuf,
}

impl Agent {
    /// Starts an agent with simulated GPUs (`gpus` like "2xA100-80GB") and
    /// declared host size, joining `cp`. Its workloads run as the agent's uid
    /// (`--workload-uid-range off`): tests count starts through files that
    /// workloads of several tenants share. [`Agent::start_with`] sets flags.
    pub fn start(bin: &Path, cp: &ControlPlane, name: &str, gpus: &str, dir: &Path) -> Agent {
        Self::start_with(bin, cp, name, gpus, dir, &["--workload-uid-range", "off"])
    }

    /// [`Agent::start`] with `extra` flags instead of the uid range being off.
    pub fn start_with(
        bin: &Path,
        cp: &ControlPlane,
        name: &str,
        gpus: &str,
        dir: &Path,
        extra: &[&str],
    ) -> Agent {
        Self::start_joining(bin, &cp.url(), name, gpus, dir, extra)
    }

    /// [`Agent::start_with`] joining through `join_url` (e.g. a [`crate::proxy::Proxy`]'s).
    pub fn start_joining(
        bin: &Path,
        join_url: &str,
        name: &str,
        gpus: &str,
        dir: &Path,
        extra: &[&str],
    ) -> Agent {
        Self::start_joining_env(join_url, bin, name, gpus, dir, extra, &[])
    }

    /// [`Agent::start_joining`] with `env` set in the agent's environment.
    pub fn start_joining_env(
        join_url: &str,
        bin: &Path,
        name: &str,
        gpus: &str,
        dir: &Path,
        extra: &[&str],
        env: &[(String, String)],
    ) -> Agent {
        let data_dir = dir.join(name);
        std::fs::create_dir_all(&data_dir).ok();
        let mut args = vec![
            "node".to_string(),
            "--join".into(),
            join_url.to_string(),
            "--token".into(),
            JOIN_TOKEN.into(),
            "--name".into(),
            name.into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--simulate-gpus".into(),
            gpus.into(),
        ];
        // A simulated host of 16 cores, 64 GB and 100 GB of disk, unless
        // `extra` declares another (the agent takes each flag once).
        for (flag, default) in [
            ("--simulate-cpu-cores", "16"),
            ("--simulate-memory-gb", "64"),
            ("--simulate-disk-gb", "100"),
        ] {
            if !extra.contains(&flag) {
                args.extend([flag.to_string(), default.to_string()]);
            }
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let mut a = Agent {
            name: name.into(),
            log: data_dir.join("agent.log"),
            data_dir,
            child: None,
            args,
            env: env.to_vec(),
            bin: bin.to_path_buf(),
        };
        a.spawn();
        a
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .ok();
        let err = log.as_ref().and_then(|f| f.try_clone().ok());
        // Its own process group: a SIGSTOPped agent in the test runner's group
        // would make the kernel SIGHUP that whole group (cargo included) once
        // the group is orphaned, e.g. when the tests run in a background job.
        let child = Command::new(&self.bin)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(log.map(Stdio::from).unwrap_or(Stdio::null()))
            .stderr(err.map(Stdio::from).unwrap_or(Stdio::null()))
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start agent: {e}"));
        self.child = Some(child);
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal(&c, libc::SIGKILL);
            let _ = c.wait();
        }
    }

    /// SIGSTOP: the agent freezes (a network partition seen from the server).
    pub fn pause(&self) {
        if let Some(c) = &self.child {
            signal(c, libc::SIGSTOP);
        }
    }

    pub fn resume(&self) {
        if let Some(c) = &self.child {
            signal(c, libc::SIGCONT);
        }
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// SIGUSR2: the agent hands its workloads over (an in-place upgrade): it
    /// exits at once and leaves them running under their shims.
    pub fn hand_over(&self) {
        if let Some(c) = &self.child {
            signal(c, libc::SIGUSR2);
        }
    }

    /// Starts the same agent again once it has exited (after a handover or
    /// a drain): the same command on the same data dir.
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.spawn();
        }
    }

    /// SIGTERM: the agent is asked to stop (it drains its node first).
    pub fn terminate(&self) {
        if let Some(c) = &self.child {
            signal(c, libc::SIGTERM);
        }
    }

    /// Waits up to `timeout` for the agent to exit by itself; its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Some(status);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            signal(c, libc::SIGCONT);
        }
        self.kill9();
        crate::shims::kill_shims(&self.data_dir);
    }
}

/// The lines of a file the test's workloads append to (none while it is missing).
pub fn file_lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// How many nodes the control plane shows as connected.
pub fn nodes_connected(cp: &ControlPlane) -> usize {
    cp.operator().get("/v1/nodes").data()["nodes"]
        .as_array()
        .map_or(0, |n| n.iter().filter(|n| n["connected"] == true).count())
}
