//! Command-line surface of the `caldera` binary.
pub mod node;
pub mod sim;

use clap::{Parser, Subcommand};

/// Errors a CLI command ends with; the exit code says which kind.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The user gave something the command cannot use.
    #[error("{0}")]
    Usage(String),
    /// The command ran and failed.
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    /// Process exit code: 2 for usage errors, 1 for failures.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failed(_) => 1,
        }
    }
}

#[derive(Parser, Debug)]
#[command(name = "caldera", version, about = "Caldera: one pool of heterogeneous compute for training and inference")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Replay a trace through the placement engine and print quality metrics.
    Sim(sim::SimArgs),
    /// Run a node agent: probe this machine, join the cluster, run workloads.
    Node(node::NodeArgs),
}

pub fn dispatch(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Node(args) => node::run(args),
    }
}
