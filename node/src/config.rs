//! Configuration of one node agent, as the `caldera node` flags fill it.
use crate::error::AgentError;
use crate::sim_gpus::{self, SimGpuGroup};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Everything the agent needs to join a cluster and run workloads.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    /// Base URL of the control plane, `http://host:port` (or `ws://`). Default `http://127.0.0.1:7070`.
    pub join_url: String,
    /// The cluster join token (sent as `Authorization: Bearer`). No default.
    pub token: String,
    /// Node name, unique in the cluster. Default: the hostname.
    pub node_name: String,
    /// Where logs, checkpoints, shim dirs and the tenant uid map live. Default `./caldera-node-data/<name>`.
    pub data_dir: PathBuf,
    /// `--simulate-gpus`, e.g. `8xA100-80GB,2xT4-16GB`. Default: none (probe with NVML).
    pub simulate_gpus: Option<String>,
    /// Declared CPU cores instead of the probed ones. Default: probed.
    pub simulate_cpu_cores: Option<u32>,
    /// Declared memory, GB, instead of the probed amount. Default: probed.
    pub simulate_memory_gb: Option<u64>,
    /// Declared disk for workloads, GB, instead of the data dir's filesystem. Default: probed.
    pub simulate_disk_gb: Option<u64>,
    /// Node labels offered to placement (`--label k=v`). Default: none.
    pub labels: BTreeMap<String, String>,
    /// Heartbeat period until the control plane's welcome sets its own; also the
    /// WebSocket ping period. Default 1000 ms.
    pub heartbeat_ms: u64,
    /// Grace between SIGTERM and SIGKILL when the agent itself shuts down, and
    /// when a shim's lease runs out. Default 2000 ms.
    pub shutdown_grace_ms: u64,
    /// On SIGINT/SIGTERM, how long the agent waits for the control plane to
    /// drain the node (move its work away) before it stops what is left.
    /// Longer than the control plane's stop grace (10 s by default), so
    /// training gets its checkpoint window. Default 15000 ms.
    pub drain_timeout_ms: u64,
    /// Workloads run as one uid per tenant from this range, when the agent is
    /// root (`--workload-uid-range FIRST-LAST`, or `off`). Default 61000-61999.
    pub workload_uid_range: Option<(u32, u32)>,
    /// How workload shims are started (not a flag). Default: `caldera shim`
    /// of the running binary; tests that embed the agent name `caldera-shim`.
    pub shim: Option<crate::runtime::ShimCommand>,
    /// Capacity of the weight cache, GB (10^9 bytes; fractions allowed),
    /// `--cache-gb`. 0: no cache (no task with a model runs here). Default 50.
    pub cache_gb: f64,
    /// Serve verified cached weights to peers on this address
    /// (`--peer-listen`, e.g. `127.0.0.1:0`). Default: off.
    pub peer_listen: Option<String>,
    /// The URL peers are told to fetch from (`--peer-advertise`). Default
    /// `http://<bound address>`.
    pub peer_advertise: Option<String>,
    /// Cap on what the peer server sends, megabits per second, all
    /// transfers together (`--peer-max-mbps`). Default: none.
    pub peer_max_mbps: Option<f64>,
    /// PEM certificates trusted for `https://` origins besides the host's
    /// store (`--origin-ca`: a private CA's object store). Default: none.
    pub origin_ca: Option<PathBuf>,
    /// Ports handed to workloads as CALDERA_PORT, one per workload on the
    /// node (`--replica-ports FIRST-LAST`). Default 20000-29999.
    pub replica_ports: (u16, u16),
    /// The host the control plane lists this node's replicas at
    /// (`--advertise-host`). Default: the address the control plane sees
    /// the agent's connection come from.
    pub advertise_host: Option<String>,
    /// Bytes the images the agent pulled may take in the container store,
    /// GB (GiB; fractions allowed), `--image-cache-gb`: past it the least
    /// recently used ones not in use are removed. 0: no cap. Default 100.
    pub image_cache_gb: f64,
    /// How often the agent reads its image store for its reports
    /// (`--image-refresh-ms`). Default 10000.
    pub image_refresh_ms: u64,
    /// Whether tasks with an image run here in containers
    /// (`--container-runtime podman|off`). Default podman, where `podman
    /// info` answers and the agent is root; else the inventory says why not.
    pub container_runtime: crate::container::engine::Mode,
    /// Processes one container may have at most (`--container-pids-limit`).
    /// Default 4096.
    pub container_pids_limit: u32,
}

impl Default for AgentConfig {
    fn default() -> Self {
        let node_name = default_node_name();
        AgentConfig {
            join_url: "http://127.0.0.1:7070".to_string(),
            token: String::new(),
            data_dir: default_data_dir(&node_name),
            node_name,
            simulate_gpus: None,
            simulate_cpu_cores: None,
            simulate_memory_gb: None,
            simulate_disk_gb: None,
            labels: BTreeMap::new(),
            heartbeat_ms: 1000,
            shutdown_grace_ms: 2000,
            drain_timeout_ms: 15_000,
            workload_uid_range: Some((61000, 61999)),
            shim: None,
            cache_gb: 50.0,
            peer_listen: None,
            peer_advertise: None,
            peer_max_mbps: None,
            origin_ca: None,
            replica_ports: crate::runtime::ports::DEFAULT_RANGE,
            advertise_host: None,
            image_cache_gb: 100.0,
            image_refresh_ms: 10_000,
            container_runtime: crate::container::engine::Mode::Podman,
            container_pids_limit: crate::container::run_args::DEFAULT_PIDS_LIMIT,
        }
    }
}

/// The hostname, or `node` when it cannot be read.
pub fn default_node_name() -> String {
    sysinfo::System::host_name()
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_string())
}

/// `./caldera-node-data/<name>`.
pub fn default_data_dir(node_name: &str) -> PathBuf {
    PathBuf::from("caldera-node-data").join(node_name)
}

impl AgentConfig {
    /// Probes this node's hardware: the host, with the figures declared by
    /// the `simulate-*` flags in place of probed ones, and the GPUs (real
    /// ones through NVML, or the simulated ones `simulate-gpus` names).
    pub fn probe(&self) -> Result<crate::probe::Probe, AgentError> {
        let groups = self.simulated_gpu_groups()?;
        let declared = crate::probe::DeclaredHost {
            cpu_cores: self.simulate_cpu_cores,
            memory_mb: self.simulate_memory_gb.map(|gb| gb * 1024),
            disk_mb: self.simulate_disk_gb.map(|gb| gb * 1024),
        };
        let gpus =
            crate::probe::GpuProbe::detect(sim_gpus::simulated_gpus(&groups, &self.node_name));
        crate::probe::Probe::new(&self.data_dir, declared, gpus, default_node_name())
    }

    /// Checks every field; the error names the one that is wrong.
    pub fn validate(&self) -> Result<(), AgentError> {
        let url = self.join_url.trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("ws://")) {
            return Err(AgentError::Config(format!(
                "join URL {:?} must start with http:// or ws:// (TLS is not built into the agent)",
                self.join_url
            )));
        }
        if self.token.is_empty() {
            return Err(AgentError::Config(
                "join token is empty (--token or CALDERA_JOIN_TOKEN)".into(),
            ));
        }
        if self.node_name.is_empty()
            || self.node_name.len() > 128
            || !self
                .node_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(AgentError::Config(format!(
                "node name {:?} must be 1-128 characters of [A-Za-z0-9._-]",
                self.node_name
            )));
        }
        if !(50..=60_000).contains(&self.heartbeat_ms) {
            return Err(AgentError::Config(format!(
                "heartbeat {} ms is outside 50..=60000",
                self.heartbeat_ms
            )));
        }
        if self.simulate_cpu_cores == Some(0)
            || self.simulate_memory_gb == Some(0)
            || self.simulate_disk_gb == Some(0)
        {
            return Err(AgentError::Config(
                "simulated CPU cores, memory and disk must be > 0".into(),
            ));
        }
        for key in self.labels.keys() {
            if key.is_empty() {
                return Err(AgentError::Config("a label has an empty key".into()));
            }
        }
        self.simulated_gpu_groups()?;
        self.validate_serving()?;
        self.validate_cache()
    }

    /// `replica-ports` and `advertise-host`.
    fn validate_serving(&self) -> Result<(), AgentError> {
        crate::runtime::ports::check_range(self.replica_ports)
            .map_err(|e| AgentError::Config(e.to_string()))?;
        if let Some(host) = &self.advertise_host {
            let plain = !host.is_empty()
                && host.len() <= 253
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
            if !plain {
                return Err(AgentError::Config(format!(
                    "advertise-host {host:?} must be a host name or IP address (no scheme, no port)"
                )));
            }
        }
        Ok(())
    }

    fn validate_cache(&self) -> Result<(), AgentError> {
        if !self.image_cache_gb.is_finite() || self.image_cache_gb < 0.0 {
            return Err(AgentError::Config(format!(
                "image-cache-gb {} must be a number >= 0 (0: no cap)",
                self.image_cache_gb
            )));
        }
        if self.container_pids_limit < 16 {
            return Err(AgentError::Config(format!(
                "container-pids-limit {} must be at least 16 (a container's init and shell need some)",
                self.container_pids_limit
            )));
        }
        if self.image_refresh_ms < 100 {
            return Err(AgentError::Config(format!(
                "image-refresh-ms {} must be at least 100",
                self.image_refresh_ms
            )));
        }
        if !self.cache_gb.is_finite() || self.cache_gb < 0.0 {
            return Err(AgentError::Config(format!(
                "cache-gb {} must be a number >= 0 (0: no weight cache)",
                self.cache_gb
            )));
        }
        if let Some(listen) = &self.peer_listen {
            if listen.parse::<std::net::SocketAddr>().is_err() {
                return Err(AgentError::Config(format!(
                    "peer-listen {listen:?} must be an IP:port, e.g. 127.0.0.1:0"
                )));
            }
        }
        if let Some(url) = &self.peer_advertise {
            if !url.starts_with("http://") {
                return Err(AgentError::Config(format!(
                    "peer-advertise {url:?} must start with http://"
                )));
            }
        }
        if let Some(mbps) = self.peer_max_mbps {
            if !mbps.is_finite() || mbps <= 0.0 {
                return Err(AgentError::Config(format!(
                    "peer-max-mbps {mbps} must be a number > 0"
                )));
            }
        }
        Ok(())
    }

    /// The weight cache's capacity in bytes. GB are GiB, as every other
    /// size in Caldera (`memory_gb`, `disk_gb`), so `--cache-gb 50` reads
    /// back as 50G in `caldera nodes`.
    pub fn cache_capacity_bytes(&self) -> u64 {
        (self.cache_gb * (1u64 << 30) as f64) as u64
    }

    /// `--image-cache-gb` in bytes (0: no cap).
    pub fn image_cap_bytes(&self) -> u64 {
        (self.image_cache_gb * (1u64 << 30) as f64) as u64
    }

    /// The parsed `--simulate-gpus` groups (empty when not given).
    pub fn simulated_gpu_groups(&self) -> Result<Vec<SimGpuGroup>, AgentError> {
        match &self.simulate_gpus {
            Some(spec) => Ok(sim_gpus::parse(spec)?),
            None => Ok(Vec::new()),
        }
    }

    /// The WebSocket endpoint: `<join URL>/v1/nodes/connect`.
    pub fn connect_url(&self) -> String {
        format!("{}/v1/nodes/connect", self.join_url.trim_end_matches('/'))
    }

    /// Heartbeat period before a welcome says otherwise.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> AgentConfig {
        AgentConfig {
            token: "t".into(),
            node_name: "n1".into(),
            ..AgentConfig::default()
        }
    }

    #[test]
    fn defaults_with_a_token_validate() {
        valid().validate().unwrap();
        assert_eq!(
            valid().connect_url(),
            "http://127.0.0.1:7070/v1/nodes/connect"
        );
    }

    #[test]
    fn bad_values_are_named() {
        let cases: Vec<(AgentConfig, &str)> = vec![
            (
                AgentConfig {
                    token: String::new(),
                    ..valid()
                },
                "token",
            ),
            (
                AgentConfig {
                    join_url: "ftp://x".into(),
                    ..valid()
                },
                "join URL",
            ),
            (
                AgentConfig {
                    node_name: "a/b".into(),
                    ..valid()
                },
                "node name",
            ),
            (
                AgentConfig {
                    heartbeat_ms: 1,
                    ..valid()
                },
                "heartbeat",
            ),
            (
                AgentConfig {
                    replica_ports: (30000, 20000),
                    ..valid()
                },
                "replica-ports",
            ),
            (
                AgentConfig {
                    advertise_host: Some("http://x".into()),
                    ..valid()
                },
                "advertise-host",
            ),
            (
                AgentConfig {
                    simulate_cpu_cores: Some(0),
                    ..valid()
                },
                "simulated",
            ),
            (
                AgentConfig {
                    simulate_gpus: Some("8xA100".into()),
                    ..valid()
                },
                "8xA100",
            ),
            (
                AgentConfig {
                    cache_gb: -1.0,
                    ..valid()
                },
                "cache-gb",
            ),
            (
                AgentConfig {
                    peer_listen: Some("localhost".into()),
                    ..valid()
                },
                "peer-listen",
            ),
            (
                AgentConfig {
                    peer_advertise: Some("ftp://x".into()),
                    ..valid()
                },
                "peer-advertise",
            ),
            (
                AgentConfig {
                    peer_max_mbps: Some(0.0),
                    ..valid()
                },
                "peer-max-mbps",
            ),
            (
                AgentConfig {
                    container_pids_limit: 3,
                    ..valid()
                },
                "container-pids-limit",
            ),
            (
                AgentConfig {
                    image_cache_gb: f64::NAN,
                    ..valid()
                },
                "image-cache-gb",
            ),
            (
                AgentConfig {
                    image_refresh_ms: 5,
                    ..valid()
                },
                "image-refresh-ms",
            ),
        ];
        for (config, needle) in cases {
            let err = config.validate().expect_err(needle);
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
