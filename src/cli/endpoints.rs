//! `caldera endpoints SERVICE`: where a service's ready replicas are
//! reached (`GET /v1/tasks/{service}/endpoints`), one line each.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts};
use super::display::{or_missing, MISSING};
use super::table::Table;
use super::CliError;
use caldera_spec::views::ServiceEndpoints;

/// `caldera endpoints SERVICE [--wait S --since R]`
#[derive(clap::Args, Debug)]
pub struct EndpointsArgs {
    /// The inference service's task id.
    pub id: String,
    /// Wait up to this many seconds (at most 60) for the list to change from `--since`.
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<u64>,
    /// The revision already seen (from an earlier answer).
    #[arg(long, value_name = "REVISION")]
    pub since: Option<u64>,
    /// The service's tenant (operator token); a tenant token means its own.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Prints a service's ready replicas.
pub fn endpoints(args: EndpointsArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let path = format!("/v1/tasks/{}/endpoints", encode(&args.id));
    let num = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    let query = [
        ("tenant", args.tenant.unwrap_or_default()),
        ("wait", num(args.wait)),
        ("since", num(args.since)),
    ];
    let answer = block_on(client.get(&path, &query))?;
    if args.opts.json {
        return print_json(&answer);
    }
    print!("{}", render_endpoints(&read_view(&answer)?));
    Ok(())
}

/// A table of the ready replicas, then the revision.
pub fn render_endpoints(answer: &ServiceEndpoints) -> String {
    let mut table = Table::new(&["REPLICA", "NODE", "ADDRESS", "MODEL", "GPUS"]);
    for e in &answer.endpoints {
        let gpus: Vec<String> = e.gpu_indices.iter().map(u32::to_string).collect();
        table.row(vec![
            e.replica.clone(),
            e.node.clone(),
            format!("{}:{}", e.address, e.port),
            or_missing(e.model.as_deref()),
            if gpus.is_empty() {
                MISSING.into()
            } else {
                gpus.join(",")
            },
        ]);
    }
    let mut out = table.render();
    out.push_str(&format!(
        "service {}: {} ready, revision {}\n",
        answer.service,
        answer.endpoints.len(),
        answer.revision
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ready_replica_is_one_line_with_its_address() {
        let answer: ServiceEndpoints = serde_json::from_value(serde_json::json!({
            "service": "chat", "revision": 17,
            "endpoints": [{"replica": "chat.r0", "node": "n1", "address": "10.0.0.5",
                "port": 20001, "model": "llm:v3", "allocation_id": "chat.r0.1", "gpu_indices": [0, 1]}]
        }))
        .expect("an endpoints answer");
        let out = render_endpoints(&answer);
        assert!(out.contains("10.0.0.5:20001"), "{out}");
        assert!(out.contains("llm:v3") && out.contains("0,1"), "{out}");
        assert!(out.contains("service chat: 1 ready, revision 17"), "{out}");
    }
}
