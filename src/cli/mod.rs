//! Command-line surface of the `caldera` binary.
pub mod client;
pub mod events;
pub mod fields;
pub mod follow;
pub mod logging;
pub mod models;
pub mod node;
pub mod node_ops;
pub mod nodes;
pub mod server;
pub mod server_config;
pub mod sim;
pub mod table;
pub mod tasks;
pub mod tenants;
pub mod up;

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
#[command(
    name = "caldera",
    version,
    about = "Caldera: one pool of heterogeneous compute for training and inference"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Replay a trace through the placement engine and print quality metrics.
    Sim(sim::SimArgs),
    /// Run a node agent: probe this machine, join the cluster, run workloads.
    ///
    /// SIGTERM or SIGINT drains the node (its work moves away, no retry
    /// spent), then the agent exits. SIGUSR2 hands over for an in-place
    /// upgrade: the agent exits at once and its workloads keep running under
    /// their shims for the next agent on the same data dir to adopt.
    Node(node::NodeArgs),
    /// Run the control plane: actors, sled storage and the HTTP gateway.
    Server(server::ServerArgs),
    /// Run the embedded default: a control plane plus local node agents, with a demo tenant.
    Up(up::UpArgs),
    /// Submit a task spec (JSON file, or - for stdin).
    Submit(tasks::SubmitArgs),
    /// Show a task: state, history, allocation, pending reason, exit code.
    Status(tasks::StatusArgs),
    /// List tasks.
    Tasks(tasks::TasksArgs),
    /// Release a task: stop its workload and free what it holds.
    Release(tasks::ReleaseArgs),
    /// Print a task's log.
    Logs(tasks::LogsArgs),
    /// List nodes, or show one.
    Nodes(nodes::NodesArgs),
    /// Show pool capacity, allocation and use.
    Util(nodes::UtilArgs),
    /// List events: the allocation history and audit trail.
    Events(events::EventsArgs),
    /// Manage tenants (operator token).
    Tenant(tenants::TenantArgs),
    /// Change a tenant's quota (operator token).
    Quota(tenants::QuotaArgs),
    /// Model versions: register, list, show, prewarm, pin, deprecate.
    Model(models::ModelArgs),
}

pub fn dispatch(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Node(args) => node::run(args),
        Command::Server(args) => server::run(args),
        Command::Up(args) => up::run(args),
        Command::Submit(args) => tasks::submit(args),
        Command::Status(args) => tasks::status(args),
        Command::Tasks(args) => tasks::list(args),
        Command::Release(args) => tasks::release(args),
        Command::Logs(args) => tasks::logs(args),
        Command::Nodes(args) => nodes::nodes(args),
        Command::Util(args) => nodes::util(args),
        Command::Events(args) => events::run(args),
        Command::Tenant(args) => tenants::tenant(args),
        Command::Quota(args) => tenants::quota(args),
        Command::Model(args) => models::model(args),
    }
}
