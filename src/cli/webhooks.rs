//! `caldera webhook create|list|deliveries|delete`: signed webhook
//! subscriptions. A tenant token subscribes to its own tenant's events; the
//! operator to one tenant's (`--tenant`) or all.
use super::client::{block_on, encode, print_json, ApiClient, ClientOpts, Verb};
use super::fields::{items, text};
use super::table::{key_values, Table};
use super::CliError;
use serde_json::{json, Value};

/// `caldera webhook ...`
#[derive(clap::Args, Debug)]
pub struct WebhookArgs {
    #[command(subcommand)]
    pub command: WebhookCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum WebhookCommand {
    /// Subscribe a url to events; prints the signing secret, this once.
    Create {
        /// Where deliveries are POSTed (http://...).
        #[arg(long)]
        url: String,
        /// Event names, comma-separated (`task.failed,idle.warning`, or `*`).
        #[arg(long, value_delimiter = ',', required = true)]
        events: Vec<String>,
        /// Only this tenant's events (operator token; a tenant token means its own).
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// List the subscriptions this token may see.
    List {
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// A subscription's deliveries: each event, its attempts and where it stands.
    Deliveries {
        /// The subscription id (`wh-...`).
        id: String,
        /// Continue after this event id (the `next cursor` of the last page).
        #[arg(long)]
        after: Option<u64>,
        /// At most this many deliveries.
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Delete a subscription and its deliveries.
    Delete {
        id: String,
        #[command(flatten)]
        opts: ClientOpts,
    },
}

pub fn webhook(args: WebhookArgs) -> Result<(), CliError> {
    match args.command {
        WebhookCommand::Create {
            url,
            events,
            tenant,
            opts,
        } => {
            let mut body = json!({"url": url, "events": events});
            if let Some(t) = tenant {
                body["tenant"] = Value::String(t);
            }
            let client = ApiClient::from_opts(&opts)?;
            let w = block_on(client.send_json(Verb::Post, "/v1/webhooks", &body))?.data;
            if opts.json {
                return print_json(&w);
            }
            print!("{}", render_created(&w));
            Ok(())
        }
        WebhookCommand::List { opts } => {
            let client = ApiClient::from_opts(&opts)?;
            let page = block_on(client.get("/v1/webhooks", &[]))?;
            if opts.json {
                return print_json(&page);
            }
            print!("{}", render_list(&page));
            Ok(())
        }
        WebhookCommand::Deliveries {
            id,
            after,
            limit,
            opts,
        } => {
            let client = ApiClient::from_opts(&opts)?;
            let query = [
                ("after", after.map(|a| a.to_string()).unwrap_or_default()),
                ("limit", limit.map(|n| n.to_string()).unwrap_or_default()),
            ];
            let path = format!("/v1/webhooks/{}/deliveries", encode(&id));
            let page = block_on(client.get(&path, &query))?;
            if opts.json {
                return print_json(&page);
            }
            print!("{}", render_deliveries(&page));
            Ok(())
        }
        WebhookCommand::Delete { id, opts } => {
            let client = ApiClient::from_opts(&opts)?;
            let path = format!("/v1/webhooks/{}", encode(&id));
            let gone = block_on(client.call(Verb::Delete, &path, &[], None))?.data;
            if opts.json {
                return print_json(&gone);
            }
            println!("deleted {}", text(&gone, "deleted"));
            Ok(())
        }
    }
}

/// The names a subscription listens to, comma-separated.
fn events_of(w: &Value) -> String {
    let names: Vec<&str> = items(w, "events")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    names.join(",")
}

/// The new subscription, and its secret with the warning that it is shown once.
fn render_created(w: &Value) -> String {
    let mut out = key_values(&[
        ("webhook", text(w, "id")),
        ("url", text(w, "url")),
        ("events", events_of(w)),
        ("tenant", scope(w)),
        ("secret", text(w, "secret")),
    ]);
    out.push_str("the secret is shown this once: keep it to verify Caldera-Signature\n");
    out
}

fn scope(w: &Value) -> String {
    match w.get("tenant").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None => "all".to_string(),
    }
}

fn render_list(page: &Value) -> String {
    let mut t = Table::new(&["ID", "URL", "EVENTS", "TENANT", "OWNER", "CREATED"]);
    for w in items(page, "webhooks") {
        t.row(vec![
            text(w, "id"),
            text(w, "url"),
            events_of(w),
            scope(w),
            text(w, "owner"),
            text(w, "created_at"),
        ]);
    }
    t.render()
}

/// One row per delivery: the last attempt's answer (status or error), or
/// `not sent` for one its tenant's full queue turned away, and when the
/// next is due.
fn render_deliveries(page: &Value) -> String {
    let mut t = Table::new(&["EVENT", "TYPE", "STATE", "ATTEMPTS", "LAST", "NEXT"]);
    for d in items(page, "deliveries") {
        let unsent = d.get("not_sent").is_some_and(Value::is_string);
        let none = if unsent { "not sent" } else { "-" };
        let last = items(d, "attempts").last().map_or(none.to_string(), |a| {
            match a.get("status").and_then(Value::as_u64) {
                Some(s) => s.to_string(),
                None => text(a, "error"),
            }
        });
        t.row(vec![
            text(d, "event_id"),
            text(d, "event_type"),
            text(d, "state"),
            text(d, "attempt_count"),
            last,
            text(d, "next_attempt_at"),
        ]);
    }
    let mut out = t.render();
    if let Some(c) = page.get("next_cursor").filter(|c| !c.is_null()) {
        out.push_str(&format!("next cursor: {c}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_show_the_last_answer_and_the_next_try() {
        let page = json!({"deliveries": [
            {"event_id": 7, "event_type": "task.failed", "state": "delivered", "attempt_count": 2,
             "attempts": [{"status": 500}, {"status": 200}], "next_attempt_at": null},
            {"event_id": 9, "event_type": "idle.warning", "state": "pending", "attempt_count": 1,
             "attempts": [{"error": "connection refused"}], "next_attempt_at": "2026-12-01T10:00:10.000Z"},
            {"event_id": 11, "event_type": "task.failed", "state": "failed", "attempt_count": 0,
             "attempts": [], "next_attempt_at": null, "not_sent": "not sent: queue full"}
        ], "next_cursor": null});
        assert_eq!(
            render_deliveries(&page),
            "EVENT  TYPE          STATE      ATTEMPTS  LAST                NEXT\n\
             7      task.failed   delivered  2         200                 -\n\
             9      idle.warning  pending    1         connection refused  2026-12-01T10:00:10.000Z\n\
             11     task.failed   failed     0         not sent            -\n"
        );
    }

    #[test]
    fn the_secret_is_printed_with_its_warning_and_a_scope_of_none_is_all() {
        let w = json!({"id": "wh-1", "url": "http://h/", "events": ["*"], "tenant": null, "secret": "ab"});
        assert_eq!(
            render_created(&w),
            "webhook:  wh-1\n\
             url:      http://h/\n\
             events:   *\n\
             tenant:   all\n\
             secret:   ab\n\
             the secret is shown this once: keep it to verify Caldera-Signature\n"
        );
    }
}
