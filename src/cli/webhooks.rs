//! `caldera webhook create|list|deliveries|delete`: signed webhook
//! subscriptions. A tenant token subscribes to its own tenant's events; the
//! operator to one tenant's (`--tenant`) or all.
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::display::{or_missing, MISSING};
use super::table::{key_values, Table};
use super::CliError;
use caldera_spec::views::{DeliveryPage, WebhookDeleted, WebhookList, WebhookView};
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
            print!("{}", render_created(&read_view(&w)?));
            Ok(())
        }
        WebhookCommand::List { opts } => {
            let client = ApiClient::from_opts(&opts)?;
            let page = block_on(client.get("/v1/webhooks", &[]))?;
            if opts.json {
                return print_json(&page);
            }
            print!("{}", render_list(&read_view(&page)?));
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
            print!("{}", render_deliveries(&read_view(&page)?));
            Ok(())
        }
        WebhookCommand::Delete { id, opts } => {
            let client = ApiClient::from_opts(&opts)?;
            let path = format!("/v1/webhooks/{}", encode(&id));
            let gone = block_on(client.call(Verb::Delete, &path, &[], None))?.data;
            if opts.json {
                return print_json(&gone);
            }
            let gone: WebhookDeleted = read_view(&gone)?;
            println!("deleted {}", gone.deleted);
            Ok(())
        }
    }
}

/// The new subscription, and its secret with the warning that it is shown once.
fn render_created(w: &WebhookView) -> String {
    let mut out = key_values(&[
        ("webhook", w.id.clone()),
        ("url", w.url.clone()),
        ("events", w.events.join(",")),
        ("tenant", scope(w)),
        ("secret", or_missing(w.secret.as_deref())),
    ]);
    out.push_str("the secret is shown this once: keep it to verify Caldera-Signature\n");
    out
}

fn scope(w: &WebhookView) -> String {
    w.tenant.clone().unwrap_or_else(|| "all".to_string())
}

fn render_list(page: &WebhookList) -> String {
    let mut t = Table::new(&["ID", "URL", "EVENTS", "TENANT", "OWNER", "CREATED"]);
    for w in &page.webhooks {
        t.row(vec![
            w.id.clone(),
            w.url.clone(),
            w.events.join(","),
            scope(w),
            w.owner.clone(),
            w.created_at.clone(),
        ]);
    }
    t.render()
}

/// One row per delivery: the last attempt's answer (status or error), or
/// `not sent` for one its tenant's full queue turned away, and when the
/// next is due.
fn render_deliveries(page: &DeliveryPage) -> String {
    let mut t = Table::new(&["EVENT", "TYPE", "STATE", "ATTEMPTS", "LAST", "NEXT"]);
    for d in &page.deliveries {
        let none = if d.not_sent.is_some() {
            "not sent"
        } else {
            MISSING
        };
        let last = d
            .attempts
            .last()
            .map_or(none.to_string(), |a| match a.status {
                Some(s) => s.to_string(),
                None => or_missing(a.error.as_deref()),
            });
        let state = match serde_json::to_value(d.state) {
            Ok(Value::String(s)) => s,
            _ => MISSING.into(),
        };
        t.row(vec![
            d.event_id.to_string(),
            d.event_type.clone(),
            state,
            d.attempt_count.to_string(),
            last,
            or_missing(d.next_attempt_at.as_deref()),
        ]);
    }
    let mut out = t.render();
    if let Some(c) = page.next_cursor {
        out.push_str(&format!("next cursor: {c}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_show_the_last_answer_and_the_next_try() {
        let attempt = |status: Value, error: Value| json!({"at": "-", "at_ms": 0, "status": status, "error": error, "duration_ms": 1});
        let page: DeliveryPage = serde_json::from_value(json!({"webhook": "wh-1", "deliveries": [
            {"event_id": 7, "event_type": "task.failed", "state": "delivered", "attempt_count": 2,
             "created_at": "-", "next_attempt_ms": null,
             "attempts": [attempt(json!(500), json!(null)), attempt(json!(200), json!(null))],
             "next_attempt_at": null},
            {"event_id": 9, "event_type": "idle.warning", "state": "pending", "attempt_count": 1,
             "created_at": "-", "next_attempt_ms": 1,
             "attempts": [attempt(json!(null), json!("connection refused"))],
             "next_attempt_at": "2026-12-01T10:00:10.000Z"},
            {"event_id": 11, "event_type": "task.failed", "state": "failed", "attempt_count": 0,
             "created_at": "-", "next_attempt_ms": null,
             "attempts": [], "next_attempt_at": null, "not_sent": "not sent: queue full"}
        ], "next_cursor": null}))
        .expect("a delivery page");
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
        let w: WebhookView = serde_json::from_value(json!({"id": "wh-1", "url": "http://h/",
            "events": ["*"], "tenant": null, "owner": "operator", "from_config": false,
            "created_at": "-", "created_at_ms": 0, "after_event_id": 0, "secret": "ab"}))
        .expect("a webhook view");
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
