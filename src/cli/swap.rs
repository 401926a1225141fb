//! `caldera swap SERVICE name:v4`: a service's model swapped in place, and
//! the swap lines `caldera status` prints for a service.
use super::client::{block_on, encode, print_json, ApiClient, ClientOpts, Verb};
use super::fields::{get, items, text};
use super::table::Table;
use super::CliError;
use serde_json::Value;

/// `caldera swap SERVICE name:version [--allow-downtime] [--max-surge 1]`
#[derive(clap::Args, Debug)]
pub struct SwapArgs {
    /// The inference service's task id.
    pub id: String,
    /// The version to serve, `name:version`.
    pub model: String,
    /// A 1-replica service may be swapped with a gap in service.
    #[arg(long)]
    pub allow_downtime: bool,
    /// 1: a 1-replica service first gets one extra replica on the new
    /// version (needs free capacity for it now).
    #[arg(long, default_value_t = 0)]
    pub max_surge: u32,
    /// The service's tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Asks for the swap and says what was accepted (it runs on; `caldera
/// status SERVICE` follows it).
pub fn swap(args: SwapArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let path = format!("/v1/tasks/{}/model", encode(&args.id));
    let query = [("tenant", args.tenant.unwrap_or_default())];
    let body = serde_json::json!({
        "model": args.model,
        "allow_downtime": args.allow_downtime,
        "max_surge": args.max_surge,
    })
    .to_string();
    let answer = block_on(client.call(Verb::Post, &path, &query, Some(body.into_bytes())))?.data;
    if args.opts.json {
        return print_json(&answer);
    }
    match get(&answer, "swap") {
        Some(s) => println!(
            "service {}: swap {} -> {} started, replica by replica ({} replicas); follow it with `caldera status {}`",
            args.id,
            text(s, "from"),
            text(s, "to"),
            items(s, "replicas").len(),
            args.id
        ),
        None => println!("{}", text(&answer, "message")),
    }
    Ok(())
}

/// A service's swap as `caldera status` shows it: one line for the swap,
/// one per replica. Empty when it has never been swapped.
pub fn render_swap(task: &Value) -> String {
    let Some(s) = get(task, "swap") else {
        return String::new();
    };
    let mut out = format!(
        "swap: {} -> {} ({}, by {})\n",
        text(s, "from"),
        text(s, "to"),
        text(s, "phase"),
        text(s, "requested_by")
    );
    if get(s, "reason").is_some() {
        out.push_str(&format!("  reason: {}\n", text(s, "reason")));
    }
    let mut t = Table::new(&["REPLICA", "STEP", "GENERATION", "NODE", "ALLOCATION"]);
    for r in items(s, "replicas") {
        t.row(vec![
            text(r, "replica"),
            text(r, "step"),
            text(r, "generation"),
            text(r, "node"),
            text(r, "allocation_id"),
        ]);
    }
    for line in t.render().lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render_swap;

    #[test]
    fn status_shows_a_line_per_replica_of_a_swap() {
        let task = serde_json::json!({"swap": {
        "from": "llama:v3", "to": "llama:v4", "phase": "rolled_back",
        "requested_by": "tenant alpha", "reason": "replica svc.r0 was not ready",
        "replicas": [
            {"replica": "svc.r0", "step": "rolled_back", "generation": 2, "node": "n1", "allocation_id": "svc.r0.1"},
            {"replica": "svc.r1", "step": "pending", "generation": 0, "node": "n2", "allocation_id": "svc.r1.1"}
        ]}});
        let out = render_swap(&task);
        assert!(
            out.starts_with("swap: llama:v3 -> llama:v4 (rolled_back, by tenant alpha)"),
            "{out}"
        );
        assert!(
            out.contains("reason: replica svc.r0 was not ready"),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("svc.r0") && l.contains("rolled_back")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("svc.r1") && l.contains("pending")),
            "{out}"
        );
        assert_eq!(render_swap(&serde_json::json!({})), "");
    }
}
