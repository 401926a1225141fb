//! `caldera events`: the allocation history and audit trail.
use super::client::{block_on, print_json, read_view, ApiClient, ClientOpts};
use super::display::{or_missing, MISSING};
use super::table::Table;
use super::CliError;
use caldera_spec::views::EventPage;
use caldera_spec::EventKind;

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
    print!("{}", render_events(&read_view(&page)?));
    Ok(())
}

/// The events table plus the cursor of the next page, if any.
pub fn render_events(page: &EventPage) -> String {
    let mut table = Table::new(&["SEQ", "AT", "KIND", "TASK", "TENANT", "NODE", "MESSAGE"]);
    for view in &page.events {
        let e = &view.event;
        table.row(vec![
            e.seq.to_string(),
            view.at.clone(),
            kind_name(e.kind),
            or_missing(e.task.as_deref()),
            or_missing(e.tenant.as_deref()),
            or_missing(e.node.as_deref()),
            e.message.clone(),
        ]);
    }
    let mut out = table.render();
    if let Some(cursor) = page.next_cursor {
        out.push_str(&format!("next cursor: {cursor}\n"));
    }
    out
}

/// An event kind as the API writes it (`node_joined`).
fn kind_name(kind: EventKind) -> String {
    match serde_json::to_value(kind) {
        Ok(serde_json::Value::String(name)) => name,
        _ => MISSING.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_one_row_each_with_missing_parts_as_dashes() {
        let page: EventPage = serde_json::from_value(json!({"events": [
            {"seq": 1, "at_ms": 0, "at": "2026-11-29T10:00:00Z", "kind": "node_joined", "node": "node-1", "message": "node-1 joined"},
            {"seq": 2, "at_ms": 2_000, "at": "2026-11-29T10:00:02Z", "kind": "task_transition", "task": "t1", "tenant": "demo", "message": "queued -> scheduled"}
        ], "next_cursor": 2}))
        .expect("an event page");
        assert_eq!(
            render_events(&page),
            "SEQ  AT                    KIND             TASK  TENANT  NODE    MESSAGE\n\
             1    2026-11-29T10:00:00Z  node_joined      -     -       node-1  node-1 joined\n\
             2    2026-11-29T10:00:02Z  task_transition  t1    demo    -       queued -> scheduled\n\
             next cursor: 2\n"
        );
    }
}
