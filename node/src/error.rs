//! Errors of the node agent. Every variant has a stable `code()` so logs and
//! the CLI can name a failure without parsing its message.
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
    /// The data dir (logs, checkpoints, workloads.json) cannot be created or written.
    #[error("data dir {path}: {source}")]
    DataDir { path: PathBuf, source: io::Error },
    /// The async runtime or the signal handlers could not be set up.
    #[error("agent runtime: {0}")]
    Runtime(io::Error),
    /// The host could not be probed at all.
    #[error("hardware probe failed: {0}")]
    Probe(String),
}

impl AgentError {
    /// A stable machine-readable name of the failure.
    pub fn code(&self) -> &'static str {
        match self {
            AgentError::Config(_) => "config_invalid",
            AgentError::SimulatedGpus(_) => "simulate_gpus_invalid",
            AgentError::DataDir { .. } => "data_dir_unusable",
            AgentError::Runtime(_) => "runtime_failed",
            AgentError::Probe(_) => "probe_failed",
        }
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
}

impl StartError {
    /// A stable machine-readable name of the failure.
    pub fn code(&self) -> &'static str {
        match self {
            StartError::ProgramNotFound { .. } => "program_not_found",
            StartError::Spawn { .. } => "spawn_failed",
            StartError::Prepare { .. } => "prepare_failed",
            StartError::Duplicate(_) => "duplicate_allocation",
        }
    }
}
