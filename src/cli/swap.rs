//! `caldera swap SERVICE name:v4`: a service's model swapped in place, and
//! the swap lines `caldera status` prints for a service.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::display::MISSING;
use super::table::Table;
use super::CliError;
use caldera_spec::{SwapAnswer, SwapProgress, SwapReplica};

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
    match read_view(&answer)? {
        SwapAnswer::Started { swap: s } => println!(
            "service {}: swap {} -> {} started, replica by replica ({} replicas); follow it with `caldera status {}`",
            args.id,
            s.from,
            s.to,
            s.replicas.len(),
            args.id
        ),
        SwapAnswer::AlreadyServing { message, .. } => println!("{message}"),
    }
    Ok(())
}

/// A service's swap as `caldera status` shows it: one line for the swap,
/// one per replica. Empty when it has never been swapped.
pub fn render_swap(swap: Option<&SwapProgress>) -> String {
    let Some(s) = swap else {
        return String::new();
    };
    let mut out = format!(
        "swap: {} -> {} ({}, by {})\n",
        s.from,
        s.to,
        s.phase.as_str(),
        s.requested_by
    );
    if let Some(reason) = &s.reason {
        out.push_str(&format!("  reason: {reason}\n"));
    }
    // Replicas in containers: the image (and digest) each runs after its step.
    let images = s.replicas.iter().any(|r| r.image.is_some());
    let mut columns = vec!["REPLICA", "STEP", "GENERATION", "NODE", "ALLOCATION"];
    if images {
        columns.push("IMAGE");
    }
    let mut t = Table::new(&columns);
    for r in &s.replicas {
        let mut row = vec![
            r.replica.clone(),
            r.step.as_str().to_string(),
            r.generation.to_string(),
            r.node.clone(),
            r.allocation_id.clone(),
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
fn image_with_digest(r: &SwapReplica) -> String {
    let Some(image) = &r.image else {
        return MISSING.to_string();
    };
    match &r.image_digest {
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
    use caldera_spec::SwapProgress;
    use serde_json::{json, Value};

    /// A swap as the server records it: `replicas` (each over a pending one)
    /// and `fields` over one from m:v3 to m:v4.
    fn swap(fields: Value, replicas: Vec<Value>) -> SwapProgress {
        let replicas: Vec<Value> = replicas
            .into_iter()
            .map(|r| {
                let mut base = json!({"replica": "svc.r0", "allocation_id": "svc.r0.1",
                    "node": "n1", "step": "pending", "generation": 0, "since_ms": 0});
                for (k, v) in r.as_object().into_iter().flatten() {
                    base[k] = v.clone();
                }
                base
            })
            .collect();
        let mut v = json!({"from": "m:v3", "to": "m:v4", "requested_by": "x",
            "allow_downtime": false, "max_surge": 0, "phase": "swapping",
            "replicas": replicas, "started_ms": 0});
        for (k, x) in fields.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).expect("a swap")
    }

    #[test]
    fn status_shows_a_line_per_replica_of_a_swap() {
        let s = swap(
            json!({"from": "llama:v3", "to": "llama:v4", "phase": "rolled_back",
                "requested_by": "tenant alpha", "reason": "replica svc.r0 was not ready"}),
            vec![
                json!({"replica": "svc.r0", "step": "rolled_back", "generation": 2, "node": "n1", "allocation_id": "svc.r0.1"}),
                json!({"replica": "svc.r1", "step": "pending", "generation": 0, "node": "n2", "allocation_id": "svc.r1.1"}),
            ],
        );
        let out = render_swap(Some(&s));
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
        assert_eq!(render_swap(None), "");
    }

    #[test]
    fn status_shows_the_image_and_digest_each_replica_runs_in_a_container() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let s = swap(
            json!({"phase": "done", "requested_by": "tenant alpha"}),
            vec![
                json!({"replica": "svc.r0", "step": "done", "generation": 1, "node": "n1",
                 "allocation_id": "svc.r0.1", "image": "registry.internal/app:2", "image_digest": digest}),
                json!({"replica": "svc.r1", "step": "pending", "generation": 0, "node": "n2", "allocation_id": "svc.r1.1"}),
            ],
        );
        let out = render_swap(Some(&s));
        assert!(out.contains("IMAGE"), "{out}");
        assert!(
            out.lines().any(|l| l.contains("svc.r0")
                && l.contains("registry.internal/app:2@sha256:abababababab")),
            "{out}"
        );
        let plain = render_swap(Some(&swap(
            json!({"phase": "done"}),
            vec![json!({"replica": "svc.r0", "step": "done"})],
        )));
        assert!(!plain.contains("IMAGE"), "{plain}");
    }
}
