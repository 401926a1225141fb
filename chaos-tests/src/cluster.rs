//! Clusters of any size: a control plane and N agents, each with its own
//! simulated GPUs and flags (the model tests give theirs a weight cache and a
//! peer server; [`two_nodes`] is the two-agent case).
use crate::process::{nodes_connected, wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

/// One agent to start.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub name: String,
    /// Simulated GPUs, like "1xA100-80GB".
    pub gpus: String,
    /// Flags after the harness's own.
    pub flags: Vec<String>,
    /// Environment variables of the agent's process (and so of its shims
    /// and podman), e.g. its own container store.
    pub env: Vec<(String, String)>,
}

impl AgentSpec {
    /// An agent whose workloads run as its own uid, as [`Agent::start`]'s do.
    pub fn new(name: &str, gpus: &str) -> AgentSpec {
        AgentSpec {
            name: name.into(),
            gpus: gpus.into(),
            flags: vec!["--workload-uid-range".into(), "off".into()],
            env: Vec::new(),
        }
    }

    /// Sets `key=value` in the agent's environment.
    pub fn env(mut self, key: &str, value: &str) -> AgentSpec {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Adds `--{flag} value`.
    pub fn flag(mut self, flag: &str, value: &str) -> AgentSpec {
        self.flags.push(format!("--{flag}"));
        self.flags.push(value.into());
        self
    }

    /// An agent for model tasks: a weight cache of `cache_gb` (decimal GB),
    /// its cache served to peers on an ephemeral port, and a label
    /// `node=<name>` a task can require to land on it.
    pub fn with_cache(name: &str, gpus: &str, cache_gb: &str) -> AgentSpec {
        AgentSpec::new(name, gpus)
            .flag("cache-gb", cache_gb)
            .flag("peer-listen", "127.0.0.1:0")
            .flag("label", &format!("node={name}"))
    }
}

/// Starts `specs` joining `cp` (data dirs under `dir`) and waits until the
/// control plane shows `already + specs.len()` nodes connected.
pub fn start_agents(
    bin: &Path,
    cp: &ControlPlane,
    dir: &Path,
    specs: &[AgentSpec],
    already: usize,
) -> Vec<Agent> {
    let agents: Vec<Agent> = specs
        .iter()
        .map(|s| {
            let flags: Vec<&str> = s.flags.iter().map(String::as_str).collect();
            Agent::start_joining_env(&cp.url(), bin, &s.name, &s.gpus, dir, &flags, &s.env)
        })
        .collect();
    wait_joined(cp, already + specs.len());
    agents
}

/// Panics (with the node list) unless `n` nodes are connected within 30 s.
pub fn wait_joined(cp: &ControlPlane, n: usize) {
    let joined = wait_until(Duration::from_secs(30), || nodes_connected(cp) >= n);
    assert!(
        joined,
        "{n} agents did not join: {:#}",
        cp.operator().get("/v1/nodes").body
    );
}

/// A control plane with `env` (data under `dir/cp`) and the agents of `specs`.
pub fn cluster(
    bin: &Path,
    dir: &Path,
    env: &[(&str, &str)],
    specs: &[AgentSpec],
) -> (ControlPlane, Vec<Agent>) {
    let cp = ControlPlane::start(bin, &dir.join("cp"), env);
    let agents = start_agents(bin, &cp, dir, specs, 0);
    (cp, agents)
}

/// The cluster most process tests start: a control plane with `env` and two
/// joined agents, `node-a` and `node-b`, with simulated `gpus_a` / `gpus_b`
/// (like "2xA100-80GB"), their data dirs under `dir`.
pub fn two_nodes(
    bin: &Path,
    dir: &Path,
    env: &[(&str, &str)],
    gpus_a: &str,
    gpus_b: &str,
) -> (ControlPlane, Agent, Agent) {
    let cp = ControlPlane::start(bin, &dir.join("cp"), env);
    let a = Agent::start(bin, &cp, "node-a", gpus_a, dir);
    let b = Agent::start(bin, &cp, "node-b", gpus_b, dir);
    wait_joined(&cp, 2);
    (cp, a, b)
}
