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
    // Replicas in containers: the image (and digest) each runs after its step.
    let images = items(s, "replicas")
        .iter()
        .any(|r| get(r, "image").is_some());
    let mut columns = vec!["REPLICA", "STEP", "GENERATION", "NODE", "ALLOCATION"];
    if images {
        columns.push("IMAGE");
    }
    let mut t = Table::new(&columns);
    for r in items(s, "replicas") {
        let mut row = vec![
            text(r, "replica"),
            text(r, "step"),
            text(r, "generation"),
            text(r, "node"),
            text(r, "allocation_id"),
        ];
        if images {
            row.push(image_with_digest(r));
        }
        t.row(row);
    }
    for line in t.render().lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `IMAGE@sha256:abcdef123456` (the digest cut to 12 digits), the image
/// alone without a digest, or the missing mark.
fn image_with_digest(r: &Value) -> String {
    let Some(image) = get(r, "image").and_then(Value::as_str) else {
        return text(r, "image");
    };
    match get(r, "image_digest").and_then(Value::as_str) {
        Some(d) => {
            let short: String = d.chars().take("sha256:".len() + 12).collect();
            format!("{image}@{short}")
        }
        None => image.to_string(),
    }
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

    #[test]
    fn status_shows_the_image_and_digest_each_replica_runs_in_a_container() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let task = serde_json::json!({"swap": {
        "from": "m:v3", "to": "m:v4", "phase": "done", "requested_by": "tenant alpha",
        "replicas": [
            {"replica": "svc.r0", "step": "done", "generation": 1, "node": "n1",
             "allocation_id": "svc.r0.1", "image": "registry.internal/app:2", "image_digest": digest},
            {"replica": "svc.r1", "step": "pending", "generation": 0, "node": "n2", "allocation_id": "svc.r1.1"}
        ]}});
        let out = render_swap(&task);
        assert!(out.contains("IMAGE"), "{out}");
        assert!(
            out.lines().any(|l| l.contains("svc.r0")
                && l.contains("registry.internal/app:2@sha256:abababababab")),
            "{out}"
        );
        let plain = render_swap(&serde_json::json!({"swap": {"from": "m:v3", "to": "m:v4",
            "phase": "done", "requested_by": "x", "replicas": [{"replica": "svc.r0", "step": "done"}]}}));
        assert!(!plain.contains("IMAGE"), "{plain}");
    }
}
