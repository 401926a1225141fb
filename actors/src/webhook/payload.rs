//! What one delivery sends: the JSON body (the same bytes on every attempt,
//! so the event id and the body a receiver stored never disagree) and its
//! headers.
use super::signature::signature_header;
use caldera_spec::Event;
use serde_json::json;

/// The body of a delivery of event `e` as webhook type `kind`:
/// `{id, type, created_at_ms, tenant, data}`, `data` the event as
/// `GET /v1/events` shows it (an idle warning's `detail` is the body the
/// direct idle POST sent before webhooks existed).
pub fn body(e: &Event, kind: &str) -> Vec<u8> {
    let v = json!({
        "id": e.seq,
        "type": kind,
        "created_at_ms": e.at_ms,
        "tenant": e.tenant,
        "data": e.view(),
    });
    // A `Value` always serializes (its map keys are strings).
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The headers of one attempt sent at `t` (unix seconds).
pub fn headers(
    webhook_id: &str,
    e: &Event,
    secret: &str,
    t: u64,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "application/json".to_string()),
        (
            "User-Agent",
            concat!("caldera-webhooks/", env!("CARGO_PKG_VERSION")).to_string(),
        ),
        ("Caldera-Webhook-Id", webhook_id.to_string()),
        ("Caldera-Event-Id", e.seq.to_string()),
        ("Caldera-Timestamp", t.to_string()),
        ("Caldera-Signature", signature_header(secret, t, body)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::EventKind;

    #[test]
    fn the_body_is_the_event_under_its_id_and_type_and_the_same_every_time() {
        let mut e = Event::new(
            1_700_000_000_123,
            EventKind::TaskTransition,
            "running -> failed",
        )
        .task("acme/train")
        .tenant("acme");
        e.seq = 42;
        let b = body(&e, "task.failed");
        assert_eq!(b, body(&e, "task.failed"), "retries send the same bytes");
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], 42);
        assert_eq!(v["type"], "task.failed");
        assert_eq!(v["tenant"], "acme");
        assert_eq!(v["created_at_ms"], 1_700_000_000_123u64);
        assert_eq!(v["data"]["task"], "train", "the tenant's own id");
        assert_eq!(v["data"]["kind"], "task_transition");
        let h = headers("wh-1", &e, "k", 5, &b);
        assert!(h.contains(&("Caldera-Event-Id", "42".into())));
        assert!(h
            .iter()
            .any(|(n, v)| *n == "Caldera-Signature" && v.starts_with("t=5,v1=")));
    }
}
