//! The operator's node commands: `caldera node
//! revoke|rotate-secret|cordon|drain|uncordon NAME`, each one POST to
//! `/v1/nodes/{name}/<verb>`.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::CliError;
use caldera_spec::views::NodeView;

/// Subcommands of `caldera node`.
#[derive(clap::Subcommand, Debug)]
pub enum NodeAction {
    /// Revoke a node (operator token): its secret no longer opens a session,
    /// its live session is closed and its tasks are handled as on node loss.
    Revoke(NodeName),
    /// Give a node a new secret over its live session (operator token): the
    /// old one stops opening sessions at once; the agent keeps the new one.
    /// For a node with no live session, revoke it instead.
    RotateSecret(NodeName),
    /// No new placements on the node (operator token); what runs there stays.
    Cordon(NodeName),
    /// Cordon the node and move its work away as a planned stop (operator
    /// token): training checkpoints and resumes elsewhere, reservations and
    /// replicas are placed again, and no retry is spent.
    Drain(NodeName),
    /// Placements on the node again (operator token).
    Uncordon(NodeName),
}

/// The node a subcommand acts on.
#[derive(clap::Args, Debug)]
pub struct NodeName {
    /// The node's name (as `caldera nodes` shows it).
    pub name: String,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Sends the subcommand and prints what became of the node.
pub fn run(action: NodeAction) -> Result<(), CliError> {
    let (verb, done, args) = match action {
        NodeAction::Revoke(a) => ("revoke", "revoked", a),
        NodeAction::RotateSecret(a) => ("rotate-secret", "has a new secret", a),
        NodeAction::Cordon(a) => ("cordon", "cordoned", a),
        NodeAction::Drain(a) => ("drain", "drained", a),
        NodeAction::Uncordon(a) => ("uncordon", "uncordoned", a),
    };
    let client = ApiClient::from_opts(&args.opts)?;
    let path = format!("/v1/nodes/{}/{verb}", encode(&args.name));
    let data = block_on(client.send_json(Verb::Post, &path, &serde_json::json!({})))?.data;
    if args.opts.json {
        return print_json(&data);
    }
    let node: NodeView = read_view(&data)?;
    println!(
        "node {} {done} (state {}, {}, {} allocation(s) on it)",
        args.name,
        node.state,
        node.cordon.as_deref().unwrap_or("schedulable"),
        node.allocations
    );
    Ok(())
}
