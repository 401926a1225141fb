//! `caldera scale`: what a cluster user reaches for (`kubectl scale`) on top
//! of the replicas API.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::CliError;
use caldera_spec::views::TaskView;

/// `caldera scale SERVICE N`
#[derive(clap::Args, Debug)]
pub struct ScaleArgs {
    /// The inference service's task id.
    pub id: String,
    /// How many replicas it should run.
    pub replicas: u32,
    /// The service's tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Sets a service's replica count and says what it is now.
pub fn scale(args: ScaleArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let path = format!("/v1/tasks/{}/replicas", encode(&args.id));
    let query = [("tenant", args.tenant.unwrap_or_default())];
    let body = serde_json::json!({ "replicas": args.replicas }).to_string();
    let task = block_on(client.call(Verb::Put, &path, &query, Some(body.into_bytes())))?.data;
    if args.opts.json {
        return print_json(&task);
    }
    let task: TaskView = read_view(&task)?;
    let want = task.replicas.unwrap_or(args.replicas);
    println!(
        "service {}: {want} replicas wanted ({})",
        task.task_id, task.state
    );
    Ok(())
}
