//! `caldera events`: the allocation history and audit trail.
use super::client::{block_on, print_json, ApiClient, ClientOpts};
use super::fields::{self, get, items, text};
use super::table::Table;
use super::CliError;
use serde_json::Value;

/// `caldera events [--task T] [--tenant T] [--node N] [--cursor C] [--limit N]`
#[derive(clap::Args, Debug)]
pub struct EventsArgs {
    /// Only events of this task.
    #[arg(long)]
    pub task: Option<String>,
    /// Only events of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only events of this node.
    #[arg(long)]
    pub node: Option<String>,
    /// Continue after the `next cursor` printed by the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// At most this many events.
    #[arg(long)]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Lists events, oldest first, one page at a time.
pub fn run(args: EventsArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let query = [
        ("task", args.task.unwrap_or_default()),
        ("tenant", args.tenant.unwrap_or_default()),
        ("node", args.node.unwrap_or_default()),
        ("cursor", args.cursor.unwrap_or_default()),
        (
            "limit",
            args.limit.map(|n| n.to_string()).unwrap_or_default(),
        ),
    ];
    let page = block_on(client.get("/v1/events", &query))?;
    if args.opts.json {
        return print_json(&page);
    }
    print!("{}", render_events(&page));
    Ok(())
}

/// The events table plus the cursor of the next page, if any.
pub fn render_events(page: &Value) -> String {
    let mut table = Table::new(&["SEQ", "AT", "KIND", "TASK", "TENANT", "NODE", "MESSAGE"]);
    for event in items(page, "events") {
        table.row(vec![
            text(event, "seq"),
            text(event, "at"),
            text(event, "kind"),
            text(event, "task"),
            text(event, "tenant"),
            text(event, "node"),
            text(event, "message"),
        ]);
    }
    let mut out = table.render();
    if let Some(cursor) = get(page, "next_cursor") {
        out.push_str(&format!("next cursor: {}\n", fields::show(cursor)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_one_row_each_with_missing_parts_as_dashes() {
        let page = json!({"events": [
            {"seq": 1, "at": "2026-11-29T10:00:00Z", "kind": "node_joined", "node": "node-1", "message": "node-1 joined"},
            {"seq": 2, "at": "2026-11-29T10:00:02Z", "kind": "task_state", "task": "t1", "tenant": "demo", "message": "queued -> scheduled"}
        ], "next_cursor": 2});
        assert_eq!(
            render_events(&page),
            "SEQ  AT                    KIND         TASK  TENANT  NODE    MESSAGE\n\
             1    2026-11-29T10:00:00Z  node_joined  -     -       node-1  node-1 joined\n\
             2    2026-11-29T10:00:02Z  task_state   t1    demo    -       queued -> scheduled\n\
             next cursor: 2\n"
        );
    }
}
