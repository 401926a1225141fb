//! Command-line surface of the `caldera` binary.
pub mod client;
pub mod context;
pub mod cost;
pub mod display;
pub mod endpoints;
pub mod events;
pub mod follow;
pub mod logging;
pub mod login;
pub mod models;
pub mod node;
pub mod node_images;
pub mod node_ops;
pub mod nodes;
pub mod own_tenant;
pub mod prepull;
pub mod registry_login;
pub mod server;
pub mod server_config;
pub mod sim;
pub mod swap;
pub mod table;
pub mod task_ops;
pub mod tasks;
pub mod tenants;
pub mod top;
pub mod up;
pub mod webhooks;

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
    /// The server answered with an error envelope (kept whole for `--json`).
    #[error("{line}")]
    Api {
        line: String,
        envelope: serde_json::Value,
    },
}

impl CliError {
    /// Process exit code: 2 for usage errors, 1 for failures.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failed(_) | CliError::Api { .. } => 1,
        }
    }

    /// The error as JSON, for `--json` mode: the server's own error envelope
    /// (`code`, `error`, `msg`, `field`, `request_id`), or one in the same
    /// shape for an error of the CLI itself (`code` 0).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            CliError::Api { envelope, .. } => envelope.clone(),
            CliError::Usage(m) => serde_json::json!({"code": 0, "error": "usage", "msg": m}),
            CliError::Failed(m) => serde_json::json!({"code": 0, "error": "failed", "msg": m}),
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
    /// Cancel a task: a queued one ends `cancelled`; a running one is
    /// stopped and released (the same as `release`, under the name
    /// `scancel` users reach for).
    Cancel(tasks::ReleaseArgs),
    /// Set an inference service's replica count.
    Scale(task_ops::ScaleArgs),
    /// Swap an inference service to another model version in place, replica
    /// by replica (2+ replicas: never zero ready; 1 replica: needs
    /// --max-surge 1 with free room, or --allow-downtime).
    Swap(swap::SwapArgs),
    /// Print a task's log.
    Logs(tasks::LogsArgs),
    /// List where an inference service's ready replicas are reached.
    Endpoints(endpoints::EndpointsArgs),
    /// List nodes, or show one.
    Nodes(nodes::NodesArgs),
    /// Show pool capacity, allocation and use.
    Util(nodes::UtilArgs),
    /// A live view of the pool, its nodes and the queue, redrawn every second.
    Top(top::TopArgs),
    /// List events: the allocation history and audit trail.
    Events(events::EventsArgs),
    /// Manage tenants (operator token).
    Tenant(tenants::TenantArgs),
    /// Show a tenant's quota (`show`: a tenant token shows its own), or
    /// change it (`set`: operator token).
    Quota(tenants::QuotaArgs),
    /// Show what a tenant holds now and what it uses (a tenant token: its own).
    Usage(own_tenant::UsageArgs),
    /// What a tenant's allocations cost over a period (a tenant token: its
    /// own), by task, model version or day; `--csv` for a spreadsheet.
    Cost(cost::CostArgs),
    /// Check a server and token and save them as a context, so later
    /// commands need neither `--server` nor `--token`.
    Login(login::LoginArgs),
    /// Model versions: register, list, show, prewarm, pin, deprecate.
    Model(models::ModelArgs),
    /// Pull an image onto nodes before a rollout: named nodes, or N
    /// connected nodes with a container runtime that lack it (operator token).
    Prepull(prepull::PrepullArgs),
    /// Signed webhooks: create (the secret is printed once), list, deliveries, delete.
    Webhook(webhooks::WebhookArgs),
    /// Set a tenant's credentials for an image registry (the password from
    /// stdin); its container tasks pull from that registry with them.
    RegistryLogin(registry_login::LoginArgs),
    /// Delete a tenant's credentials for an image registry.
    RegistryLogout(registry_login::LogoutArgs),
    /// List the registries a tenant has credentials for (never a password).
    RegistryCredentials(registry_login::ListArgs),
    /// Write the generated reference pages (docs/reference), or check them.
    #[command(hide = true)]
    Reference(crate::reference::ReferenceArgs),
}

impl Command {
    /// The commands that talk to a server and print (not the server, the
    /// agent, `up`): their output may go into a pipe a reader closes early
    /// (`caldera tasks --json | head`).
    pub fn prints_for_a_reader(&self) -> bool {
        !matches!(self, Command::Server(_) | Command::Node(_) | Command::Up(_))
    }
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
        Command::Release(args) | Command::Cancel(args) => tasks::release(args),
        Command::Scale(args) => task_ops::scale(args),
        Command::Swap(args) => swap::swap(args),
        Command::Logs(args) => tasks::logs(args),
        Command::Endpoints(args) => endpoints::endpoints(args),
        Command::Nodes(args) => nodes::nodes(args),
        Command::Util(args) => nodes::util(args),
        Command::Top(args) => top::run(args),
        Command::Events(args) => events::run(args),
        Command::Tenant(args) => tenants::tenant(args),
        Command::Quota(args) => tenants::quota(args),
        Command::Usage(args) => own_tenant::usage(args),
        Command::Cost(args) => cost::run(args),
        Command::Login(args) => login::run(args),
        Command::Model(args) => models::model(args),
        Command::Prepull(args) => prepull::run(args),
        Command::Webhook(args) => webhooks::webhook(args),
        Command::RegistryLogin(args) => registry_login::login(args),
        Command::RegistryLogout(args) => registry_login::logout(args),
        Command::RegistryCredentials(args) => registry_login::list(args),
        Command::Reference(args) => {
            crate::reference::run(args, <Cli as clap::CommandFactory>::command())
                .map_err(|e| CliError::Failed(e.to_string()))
        }
    }
}
