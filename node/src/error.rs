//! Errors of the node agent. Every variant maps to one entry of the registry
//! (`caldera_spec::codes`) so logs and the CLI can name a failure without
//! parsing its message.
use caldera_spec::codes::{self, ErrorCode};
use std::io;
use std::path::PathBuf;

/// Why the agent could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A configuration value is unusable; the message names it.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// `--simulate-gpus` could not be parsed.
    #[error("invalid --simulate-gpus: {0}")]
    SimulatedGpus(#[from] crate::sim_gpus::SimGpuError),
    /// The data dir (logs, checkpoints, shim dirs) cannot be created or written.
    #[error("data dir {path}: {source}")]
    DataDir { path: PathBuf, source: io::Error },
    /// The async runtime or the signal handlers could not be set up.
    #[error("agent runtime: {0}")]
    Runtime(io::Error),
    /// The host could not be probed at all.
    #[error("hardware probe failed: {0}")]
    Probe(String),
    /// The node secret file cannot be read or written.
    #[error("node secret {path}: {source}")]
    NodeSecret { path: PathBuf, source: io::Error },
    /// The weight cache dir cannot be created or written.
    #[error("weight cache {path}: {source}")]
    Cache { path: PathBuf, source: io::Error },
}

impl AgentError {
    /// This error's entry in the registry (a process error: never an HTTP answer).
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            AgentError::Config(_) => &codes::AGENT_CONFIG_INVALID,
            AgentError::SimulatedGpus(_) => &codes::SIMULATE_GPUS_INVALID,
            AgentError::DataDir { .. } => &codes::DATA_DIR_UNUSABLE,
            AgentError::Runtime(_) => &codes::RUNTIME_FAILED,
            AgentError::Probe(_) => &codes::PROBE_FAILED,
            AgentError::NodeSecret { .. } => &codes::NODE_SECRET_UNUSABLE,
            AgentError::Cache { .. } => &codes::CACHE_UNUSABLE,
        }
    }

    /// A stable machine-readable name of the failure.
    pub fn code(&self) -> &'static str {
        self.error_code().name
    }
}

/// Why a workload could not be prepared or started (reported as `StartFailed`).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The command's program does not exist or is not executable.
    #[error("program {program:?} not found or not executable: {source}")]
    ProgramNotFound { program: String, source: io::Error },
    /// The process could not be spawned for another reason.
    #[error("spawning {program:?} failed: {source}")]
    Spawn { program: String, source: io::Error },
    /// A directory or the log file of the workload could not be created.
    #[error("preparing {path}: {source}")]
    Prepare { path: PathBuf, source: io::Error },
    /// A command for this allocation was already accepted (never run a task twice).
    #[error("allocation {0} already has a workload on this node")]
    Duplicate(String),
    /// The tenant needs a uid of its own and the range has none left.
    #[error("tenant {tenant} needs a uid of its own and every uid of {range} is taken")]
    UidsExhausted { tenant: String, range: String },
    /// The shim could not be started or did not say the workload started.
    #[error("workload shim: {0}")]
    Shim(String),
    /// The task names a model and this node has no weight cache.
    #[error("the task needs model {0} and this node has no weight cache (--cache-gb 0)")]
    NoCache(String),
    /// The image could not be made present (pulled) on the node.
    #[error("{0}")]
    Pull(#[from] crate::container::pull::PullError),
    /// The start runs in a container and cannot: the runtime is down here,
    /// or something of the start cannot be handed to podman.
    #[error("container: {0}")]
    Container(String),
    /// Every port of `replica-ports` is taken.
    #[error(
        "every port of replica-ports {range} is held by another workload or in use on the host"
    )]
    PortsExhausted { range: String },
}

impl StartError {
    /// This error's entry in the registry.
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            StartError::ProgramNotFound { .. } => &codes::PROGRAM_NOT_FOUND,
            StartError::Spawn { .. } => &codes::SPAWN_FAILED,
            StartError::Prepare { .. } => &codes::PREPARE_FAILED,
            StartError::Duplicate(_) => &codes::DUPLICATE_ALLOCATION,
            StartError::UidsExhausted { .. } => &codes::WORKLOAD_UIDS_EXHAUSTED,
            StartError::Shim(_) => &codes::SHIM_FAILED,
            StartError::NoCache(_) => &codes::CACHE_UNUSABLE,
            StartError::PortsExhausted { .. } => &codes::REPLICA_PORTS_EXHAUSTED,
            StartError::Pull(e) => e.error_code(),
            StartError::Container(_) => &codes::CONTAINER_UNUSABLE,
        }
    }

    /// A stable machine-readable name of the failure.
    pub fn code(&self) -> &'static str {
        self.error_code().name
    }
}
