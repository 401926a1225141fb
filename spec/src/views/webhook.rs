//! Webhook subscriptions and their deliveries as the API shows them
//! (`/v1/webhooks`).
use crate::time::rfc3339;
use crate::webhook::{Attempt, DeliveryRecord, DeliveryState, WebhookRecord};
use serde::{Deserialize, Serialize};

/// A subscription. Its secret is in the creation's answer only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookView {
    /// `wh-` and 16 hex digits.
    pub id: String,
    pub url: String,
    /// Event names (`task.state_changed`, `task.*`, `*`...).
    pub events: Vec<String>,
    /// Only this tenant's events; null: every tenant's and the pool's (the operator's).
    pub tenant: Option<String>,
    /// The tenant that made it, or `operator`.
    pub owner: String,
    /// Made by the control plane for the `idle-webhook-url` config key.
    pub from_config: bool,
    /// RFC 3339.
    pub created_at: String,
    pub created_at_ms: u64,
    /// Only events with a larger id are delivered (a new subscription does not hear the past).
    pub after_event_id: u64,
    /// The HMAC-SHA256 key, hex: in the 201 of its creation only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl WebhookView {
    /// The subscription as its owner sees it, without its secret.
    pub fn of(w: &WebhookRecord) -> WebhookView {
        WebhookView {
            id: w.id.clone(),
            url: w.url.clone(),
            events: w.events.clone(),
            tenant: w.tenant.clone(),
            owner: w.owner.clone().unwrap_or_else(|| "operator".into()),
            from_config: w.from_config,
            created_at: rfc3339(w.created_ms),
            created_at_ms: w.created_ms,
            after_event_id: w.after_seq,
            secret: None,
        }
    }
}

/// `GET /v1/webhooks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

/// `DELETE /v1/webhooks/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookDeleted {
    /// The id of the subscription deleted (with its deliveries).
    pub deleted: String,
}

/// What a tenant reads of an attempt that got no HTTP answer: refused,
/// timed out, not resolved or not allowed all read the same, so the list
/// cannot be used to map which ports and hosts answer.
pub const DELIVERY_FAILED: &str = "delivery failed";

/// One try of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptView {
    /// RFC 3339.
    pub at: String,
    pub at_ms: u64,
    /// The receiver's HTTP status; null when it did not answer.
    pub status: Option<u16>,
    /// Why no answer came: the operator reads the cause (connection
    /// refused, timeout, certificate, not allowed...); a tenant reads
    /// `delivery failed`.
    pub error: Option<String>,
    /// How long it took; null for a tenant when no answer came.
    pub duration_ms: Option<u64>,
}

impl AttemptView {
    /// `a` as the operator (`detail`) or a tenant sees it.
    fn of(a: &Attempt, detail: bool) -> AttemptView {
        let hide = !detail && a.status.is_none();
        AttemptView {
            at: rfc3339(a.at_ms),
            at_ms: a.at_ms,
            status: a.status,
            error: if hide {
                Some(DELIVERY_FAILED.to_string())
            } else {
                a.error.clone()
            },
            duration_ms: (!hide).then_some(a.duration_ms),
        }
    }
}

/// One event on its way to one subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryView {
    /// The event's id (its seq in the event log): what a receiver dedupes by.
    pub event_id: u64,
    pub event_type: String,
    pub state: DeliveryState,
    /// RFC 3339.
    pub created_at: String,
    /// When it is tried next (pending only), RFC 3339.
    pub next_attempt_at: Option<String>,
    pub next_attempt_ms: Option<u64>,
    /// Every attempt so far (the newest 50 are listed).
    pub attempt_count: u32,
    pub attempts: Vec<AttemptView>,
    /// Why it failed without an attempt (its tenant's queue of pending
    /// deliveries was full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_sent: Option<String>,
}

impl DeliveryView {
    /// `d` as the operator (`detail`: every attempt's cause and timing) or
    /// a tenant sees it.
    pub fn of(d: &DeliveryRecord, detail: bool) -> DeliveryView {
        DeliveryView {
            event_id: d.event_id,
            event_type: d.event_type.clone(),
            state: d.state,
            created_at: rfc3339(d.created_ms),
            next_attempt_at: d.next_attempt_ms.map(rfc3339),
            next_attempt_ms: d.next_attempt_ms,
            attempt_count: d.attempt_count,
            attempts: d
                .attempts
                .iter()
                .map(|a| AttemptView::of(a, detail))
                .collect(),
            not_sent: d.not_sent.clone(),
        }
    }
}

/// `GET /v1/webhooks/{id}/deliveries`: a page by event id, ascending.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryPage {
    pub webhook: String,
    pub deliveries: Vec<DeliveryView>,
    /// The `after` of the next page; null: no more.
    pub next_cursor: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_reads_a_failed_attempt_without_its_cause_or_timing() {
        let mut d = DeliveryRecord::new("wh-1", 7, "task.failed", 1_000);
        d.attempts.push(Attempt {
            at_ms: 1_000,
            status: None,
            error: Some("connection refused".into()),
            duration_ms: 12,
        });
        let tenant = DeliveryView::of(&d, false);
        assert_eq!(tenant.attempts[0].error.as_deref(), Some(DELIVERY_FAILED));
        assert_eq!(tenant.attempts[0].duration_ms, None);
        let operator = DeliveryView::of(&d, true);
        assert_eq!(
            operator.attempts[0].error.as_deref(),
            Some("connection refused")
        );
        let wire = serde_json::to_value(&operator).expect("serializes");
        assert_eq!(
            serde_json::from_value::<DeliveryView>(wire).ok(),
            Some(operator)
        );
    }
}
