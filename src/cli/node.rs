//! `caldera node --join URL --token T`: run a node agent on this machine
//! (the operator's `caldera node revoke|cordon|drain|uncordon NAME` are in
//! `node_ops.rs`).
use super::node_ops::NodeAction;
use super::CliError;
use caldera_node::{AgentConfig, AgentError};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Flags of `caldera node` (running an agent), or one of its subcommands.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct NodeArgs {
    #[command(subcommand)]
    pub action: Option<NodeAction>,
    /// Control plane URL, e.g. http://10.0.0.5:7070.
    #[arg(long, value_name = "URL", required = true)]
    pub join: Option<String>,
    /// Cluster join token (registers a new node name; later joins use the
    /// node secret kept in the data dir).
    #[arg(
        long,
        env = "CALDERA_JOIN_TOKEN",
        hide_env_values = true,
        required = true
    )]
    pub token: Option<String>,
    /// Node name, unique in the cluster [default: the hostname].
    #[arg(long)]
    pub name: Option<String>,
    /// Logs, checkpoints and shim dirs [default: ./caldera-node-data/<name>].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Declare GPUs this machine does not have, e.g. "8xA100-80GB,2xT4-16GB".
    #[arg(long, value_name = "SPEC")]
    pub simulate_gpus: Option<String>,
    /// Declare the CPU cores offered instead of probing them.
    #[arg(long, value_name = "N")]
    pub simulate_cpu_cores: Option<u32>,
    /// Declare the memory offered, GB, instead of probing it.
    #[arg(long, value_name = "GB")]
    pub simulate_memory_gb: Option<u64>,
    /// Declare the disk offered, GB, instead of probing the data dir's filesystem.
    #[arg(long, value_name = "GB")]
    pub simulate_disk_gb: Option<u64>,
    /// A node label for placement, key=value (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Heartbeat period until the control plane sets one, ms.
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// On SIGINT/SIGTERM, and when a workload's lease runs out: grace
    /// between SIGTERM and SIGKILL for workloads, ms.
    #[arg(long, default_value_t = 2000)]
    pub shutdown_grace_ms: u64,
    /// On SIGINT/SIGTERM the node is drained first: how long to wait for the
    /// control plane to move its work away before stopping what is left, ms.
    /// Longer than the control plane's stop-grace-ms (10 s by default), so
    /// training has its checkpoint window.
    #[arg(long, default_value_t = 15000)]
    pub drain_timeout_ms: u64,
    /// Run workloads as one unprivileged uid per tenant from FIRST-LAST
    /// (needs a root agent), or "off".
    #[arg(long, value_name = "FIRST-LAST", default_value = "61000-61999")]
    pub workload_uid_range: String,
    /// Capacity of the model weight cache in the data dir, GB (fractions
    /// allowed); 0: no cache, so no task that names a model runs here.
    #[arg(
        long,
        value_name = "GB",
        env = "CALDERA_CACHE_GB",
        default_value_t = 50.0
    )]
    pub cache_gb: f64,
    /// Serve verified cached weights to peer nodes over HTTP on ADDR
    /// (IP:port; port 0 picks a free one). Off by default.
    #[arg(long, value_name = "ADDR", env = "CALDERA_PEER_LISTEN")]
    pub peer_listen: Option<String>,
    /// The URL peers fetch from [default: http://<bound address>].
    #[arg(long, value_name = "URL", env = "CALDERA_PEER_ADVERTISE")]
    pub peer_advertise: Option<String>,
    /// Cap on the bandwidth used to serve peers, megabits per second, all
    /// transfers together [default: unlimited].
    #[arg(long, value_name = "MBPS", env = "CALDERA_PEER_MAX_MBPS")]
    pub peer_max_mbps: Option<f64>,
    /// PEM certificates to trust for https:// weight origins, besides the
    /// host's certificate store (an object store behind a private CA).
    #[arg(long, value_name = "FILE", env = "CALDERA_ORIGIN_CA")]
    pub origin_ca: Option<PathBuf>,
    /// Ports given to workloads as CALDERA_PORT, one per workload on this
    /// node, FIRST-LAST.
    #[arg(
        long,
        value_name = "FIRST-LAST",
        env = "CALDERA_REPLICA_PORTS",
        default_value = "20000-29999"
    )]
    pub replica_ports: String,
    /// The host the control plane lists this node's replicas at
    /// [default: the address it sees this agent connect from].
    #[arg(long, value_name = "HOST", env = "CALDERA_ADVERTISE_HOST")]
    pub advertise_host: Option<String>,
    /// Room the images this agent pulled may take in the container store,
    /// GB (fractions allowed): past it the least recently used ones that no
    /// container uses are removed; 0: no cap. Images put there by others
    /// are neither counted nor removed.
    #[arg(
        long,
        value_name = "GB",
        env = "CALDERA_IMAGE_CACHE_GB",
        default_value_t = 100.0
    )]
    pub image_cache_gb: f64,
    /// How often the agent reads its image store for its reports, ms.
    #[arg(
        long,
        value_name = "MS",
        env = "CALDERA_IMAGE_REFRESH_MS",
        default_value_t = 10_000
    )]
    pub image_refresh_ms: u64,
    /// Run tasks that name an image in containers through podman
    /// ("podman": where it works; the node's runtimes say why not), or
    /// "off" (such tasks are placed elsewhere).
    #[arg(
        long,
        value_name = "podman|off",
        env = "CALDERA_CONTAINER_RUNTIME",
        default_value = "podman"
    )]
    pub container_runtime: String,
    /// Processes one container may have at most (a fork bomb stops there).
    #[arg(
        long,
        value_name = "N",
        env = "CALDERA_CONTAINER_PIDS_LIMIT",
        default_value_t = 4096
    )]
    pub container_pids_limit: u32,
}

impl NodeArgs {
    /// The agent configuration these flags describe (validated).
    pub fn into_config(self) -> Result<AgentConfig, CliError> {
        let mut labels = BTreeMap::new();
        for label in &self.labels {
            let (k, v) = label
                .split_once('=')
                .ok_or_else(|| CliError::Usage(format!("--label {label:?}: expected KEY=VALUE")))?;
            labels.insert(k.trim().to_string(), v.trim().to_string());
        }
        let node_name = self
            .name
            .unwrap_or_else(caldera_node::config::default_node_name);
        let missing =
            |flag: &str| CliError::Usage(format!("{flag} is required to run a node agent"));
        let config = AgentConfig {
            join_url: self.join.ok_or_else(|| missing("--join"))?,
            token: self.token.ok_or_else(|| missing("--token"))?,
            data_dir: self
                .data_dir
                .unwrap_or_else(|| caldera_node::config::default_data_dir(&node_name)),
            node_name,
            simulate_gpus: self.simulate_gpus,
            simulate_cpu_cores: self.simulate_cpu_cores,
            simulate_memory_gb: self.simulate_memory_gb,
            simulate_disk_gb: self.simulate_disk_gb,
            labels,
            heartbeat_ms: self.heartbeat_ms,
            shutdown_grace_ms: self.shutdown_grace_ms,
            drain_timeout_ms: self.drain_timeout_ms,
            workload_uid_range: caldera_node::tenancy::parse_range(&self.workload_uid_range)
                .map_err(|e| CliError::Usage(e.to_string()))?,
            shim: None,
            cache_gb: self.cache_gb,
            peer_listen: self.peer_listen,
            peer_advertise: self.peer_advertise,
            peer_max_mbps: self.peer_max_mbps,
            origin_ca: self.origin_ca,
            replica_ports: caldera_node::runtime::ports::parse_range(&self.replica_ports)
                .map_err(|e| CliError::Usage(e.to_string()))?,
            advertise_host: self.advertise_host,
            image_cache_gb: self.image_cache_gb,
            image_refresh_ms: self.image_refresh_ms,
            container_runtime: caldera_node::container::engine::Mode::parse(
                &self.container_runtime,
            )
            .map_err(|e| CliError::Usage(e.to_string()))?,
            container_pids_limit: self.container_pids_limit,
        };
        config.validate().map_err(agent_error)?;
        Ok(config)
    }
}

fn agent_error(e: AgentError) -> CliError {
    match e {
        AgentError::Config(_) | AgentError::SimulatedGpus(_) => CliError::Usage(e.to_string()),
        _ => CliError::Failed(format!("{e} [{}]", e.code())),
    }
}

/// Runs the agent until SIGINT/SIGTERM, or the subcommand given.
pub fn run(args: NodeArgs) -> Result<(), CliError> {
    if let Some(action) = args.action {
        return super::node_ops::run(action);
    }
    init_logs();
    let config = args.into_config()?;
    caldera_node::run(config).map_err(agent_error)
}

/// Logs to stderr; filter from CALDERA_LOG, else RUST_LOG, else `info`.
fn init_logs() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("CALDERA_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    // A subscriber installed earlier (e.g. by `caldera up`) stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Not a word about a log line it could not write: it says so with
        // `eprintln!`, which panics when stderr cannot be written either (a
        // log file on a full disk), and a panic kills the actor that logged.
        .log_internal_errors(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn config(args: &[&str]) -> Result<caldera_node::AgentConfig, String> {
        let base = [
            "caldera",
            "node",
            "--join",
            "http://h:1",
            "--token",
            "t",
            "--name",
            "n1",
        ];
        let cli = Cli::try_parse_from(base.iter().chain(args)).map_err(|e| e.to_string())?;
        let Command::Node(node) = cli.command else {
            unreachable!()
        };
        node.into_config().map_err(|e| e.to_string())
    }

    #[test]
    fn the_container_flags_reach_the_agent_config_and_a_bad_one_is_named() {
        use caldera_node::container::engine::Mode;
        let defaults = config(&[]).unwrap();
        assert_eq!(defaults.container_runtime, Mode::Podman);
        assert_eq!(defaults.container_pids_limit, 4096);
        let c = config(&[
            "--container-runtime",
            "off",
            "--container-pids-limit",
            "128",
        ])
        .unwrap();
        assert_eq!(
            (c.container_runtime, c.container_pids_limit),
            (Mode::Off, 128)
        );
        let bad = config(&["--container-runtime", "docker"]).unwrap_err();
        assert!(bad.contains("--container-runtime"), "{bad}");
        let bad = config(&["--container-pids-limit", "2"]).unwrap_err();
        assert!(bad.contains("container-pids-limit"), "{bad}");
    }

    #[test]
    fn the_cache_flags_reach_the_agent_config() {
        let defaults = config(&[]).unwrap();
        assert_eq!(defaults.cache_gb, 50.0);
        assert_eq!(defaults.peer_listen, None, "no peer server unless asked");
        let c = config(&[
            "--cache-gb",
            "0.5",
            "--peer-listen",
            "127.0.0.1:0",
            "--peer-advertise",
            "http://10.0.0.2:9000",
            "--peer-max-mbps",
            "800",
        ])
        .unwrap();
        assert_eq!(c.cache_capacity_bytes(), 512 << 20, "GB are GiB");
        assert_eq!(c.peer_listen.as_deref(), Some("127.0.0.1:0"));
        assert_eq!(c.peer_advertise.as_deref(), Some("http://10.0.0.2:9000"));
        assert_eq!(c.peer_max_mbps, Some(800.0));
        let bad = config(&["--peer-listen", "nowhere"]).unwrap_err();
        assert!(bad.contains("peer-listen"), "{bad}");
    }
}
