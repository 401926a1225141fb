//! Webhooks: the event names a subscription may ask for, how each event-log
//! event maps to one of them, and the records the control plane keeps of
//! subscriptions and their deliveries. No I/O: the delivery itself (HTTP,
//! signing, retries) lives in the control plane.
//!
//! A webhook event IS one event-log event: its id is the event's `seq`, so
//! every retry and every restart sends the same id, and a receiver that has
//! seen an id already can drop the repeat (delivery is at-least-once).
use crate::event::{Event, EventKind};
use serde::{Deserialize, Serialize};

/// Every event name a subscription may list, with what it covers. `*`
/// (every name the subscriber may see) is accepted besides these.
pub const EVENT_TYPES: &[(&str, &str)] = &[
    ("task.submitted", "a task was accepted"),
    (
        "task.state_changed",
        "a task moved from one state to another (also every task.placed, task.failed and idle.reclaimed)",
    ),
    ("task.placed", "a task was given an allocation (-> scheduled)"),
    ("task.failed", "a task ended failed"),
    ("task.preempted", "a task was preempted by another"),
    ("allocation.granted", "an allocation entered the ledger"),
    ("allocation.released", "an allocation left the ledger"),
    ("idle.warning", "an allocation was idle for idle-window-ms"),
    (
        "idle.reclaimed",
        "an idle allocation was reclaimed (released, or its service scaled in)",
    ),
    (
        "quota.changed",
        "a tenant's quota changed, or its allocations were re-marked borrowed",
    ),
    ("model.registered", "a model version was registered"),
    (
        "model.version_changed",
        "a model version changed state (active, deprecated, retiring...) or pin",
    ),
    (
        "service.model_swap",
        "a service's hot swap started, swapped a replica, finished or rolled back (the message says which and why)",
    ),
    ("node.lost", "a node went silent past nodes.timeout-ms (operator only)"),
    (
        "node.state_changed",
        "a node joined, was cordoned, drained, uncordoned, fenced or revoked; also every node.lost (operator only)",
    ),
];

/// The name that stands for every event the subscriber may see.
pub const ALL_EVENTS: &str = "*";

/// Whether `name` is one of [`EVENT_TYPES`] or `*`.
pub fn is_known(name: &str) -> bool {
    name == ALL_EVENTS || EVENT_TYPES.iter().any(|(n, _)| *n == name)
}

/// Names only the operator may subscribe to: a node's events say nothing of
/// one tenant and would tell a tenant about the whole pool.
pub fn operator_only(name: &str) -> bool {
    name.starts_with("node.")
}

/// The broader name an event of type `name` is also delivered under: a
/// subscription to `task.state_changed` hears every transition, the placed
/// and failed ones included.
fn parent(name: &str) -> Option<&'static str> {
    match name {
        "task.placed" | "task.failed" | "idle.reclaimed" => Some("task.state_changed"),
        "node.lost" => Some("node.state_changed"),
        _ => None,
    }
}

/// The start of a reclaim's reason (`reclaimed: idle for 1800s`): the idle
/// inspector writes it, and [`webhook_type`] recognises a reclaim by it.
pub const RECLAIM_REASON: &str = "reclaimed: idle";

/// The webhook event type of one event-log event; `None` for the kinds no
/// subscription can ask for (a server start, warmup progress, refusals).
pub fn webhook_type(e: &Event) -> Option<&'static str> {
    Some(match e.kind {
        EventKind::TaskSubmitted => "task.submitted",
        EventKind::TaskTransition => transition_type(&e.message),
        EventKind::Preempted => "task.preempted",
        EventKind::AllocationGranted => "allocation.granted",
        EventKind::AllocationReleased => "allocation.released",
        EventKind::IdleWarning => "idle.warning",
        EventKind::QuotaChanged => "quota.changed",
        EventKind::ModelRegistered => "model.registered",
        EventKind::ModelStateChanged | EventKind::ModelRenamed => "model.version_changed",
        EventKind::ModelSwap => "service.model_swap",
        EventKind::NodeLost => "node.lost",
        EventKind::NodeJoined
        | EventKind::NodeCordoned
        | EventKind::NodeFenced
        | EventKind::NodeRevoked
        | EventKind::NodeSecretRotated => "node.state_changed",
        EventKind::NodeRefused
        | EventKind::NodeResynced
        | EventKind::TenantCreated
        | EventKind::WorkloadExited
        | EventKind::CheckpointRequested
        | EventKind::CheckpointSaved
        | EventKind::ReplicaMoved
        | EventKind::ServerStarted
        | EventKind::StorageDegraded
        | EventKind::StorageRecovered
        | EventKind::ModelWarmup
        | EventKind::WarmingProgress
        | EventKind::PullProgress
        | EventKind::ImagePull => return None,
    })
}

/// A transition's message is `from -> to` or `from -> to: reason` (the
/// task actor's `move_to` writes it); a service's scale note
/// (`replicas 2 -> 1: ...`) is a state change of the service too.
fn transition_type(message: &str) -> &'static str {
    let (_, after) = message.split_once(" -> ").unwrap_or(("", ""));
    let (to, reason) = after.split_once(": ").unwrap_or((after, ""));
    if reason.starts_with(RECLAIM_REASON) {
        "idle.reclaimed"
    } else if to == "scheduled" {
        "task.placed"
    } else if to == "failed" {
        "task.failed"
    } else {
        "task.state_changed"
    }
}

/// A subscription: where to POST which events, and the secret they are
/// signed with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookRecord {
    /// `wh-` and 16 hex digits.
    pub id: String,
    pub url: String,
    /// Names of [`EVENT_TYPES`], or `*`.
    pub events: Vec<String>,
    /// Only this tenant's events; `None`: every tenant's and the pool's
    /// (operator subscriptions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The tenant that created it; `None`: the operator. A tenant sees and
    /// deletes only its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// HMAC-SHA256 key, hex. Kept in plain (it signs every delivery); shown
    /// to the caller once, at creation, never in a later view.
    pub secret: String,
    pub created_ms: u64,
    /// Only events with a larger seq are delivered: a new subscription does
    /// not hear the past.
    pub after_seq: u64,
    /// Made by the control plane for the `idle-webhook-url` config key.
    #[serde(default)]
    pub from_config: bool,
}

impl WebhookRecord {
    /// Whether event `e` of webhook type `kind` goes to this subscription.
    pub fn wants(&self, e: &Event, kind: &str) -> bool {
        if e.seq <= self.after_seq {
            return false;
        }
        if let Some(t) = &self.tenant {
            // A version the operator registered is every user's to use and
            // see (`GET /v1/models`): its events are every tenant's too.
            let public_model = kind.starts_with("model.") && e.tenant.is_none();
            if e.tenant.as_deref() != Some(t.as_str()) && !public_model {
                return false;
            }
        }
        let named = |n: &str| self.events.iter().any(|s| s == n);
        named(ALL_EVENTS) || named(kind) || parent(kind).is_some_and(named)
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Not yet answered with a 2xx; `next_attempt_ms` says when it is tried.
    Pending,
    /// A 2xx came back.
    Delivered,
    /// No 2xx within webhook-retry-for-ms of the first attempt; no more tries.
    Failed,
}

/// One try of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub at_ms: u64,
    /// The receiver's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why no answer came (connection refused, timeout...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// Attempts a delivery record keeps (the newest); `attempt_count` counts all.
pub const MAX_ATTEMPTS_KEPT: usize = 50;

/// One event on its way to one subscription. Recorded before the first
/// attempt, so a control plane killed meanwhile tries it again on restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    pub webhook_id: String,
    /// The event's seq: the webhook event id.
    pub event_id: u64,
    pub event_type: String,
    pub state: DeliveryState,
    pub created_ms: u64,
    /// When it is tried next (pending only): its key in the delivery queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_attempt_ms: Option<u64>,
    #[serde(default)]
    pub attempt_count: u32,
    /// The newest [`MAX_ATTEMPTS_KEPT`] attempts, oldest first.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Why it was never attempted (recorded `failed` at once): its
    /// tenant's queue of pending deliveries was full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_sent: Option<String>,
}

impl DeliveryRecord {
    /// A delivery of event `seq` to `webhook_id`, due at once.
    pub fn new(webhook_id: &str, seq: u64, event_type: &str, now_ms: u64) -> Self {
        DeliveryRecord {
            webhook_id: webhook_id.to_string(),
            event_id: seq,
            event_type: event_type.to_string(),
            state: DeliveryState::Pending,
            created_ms: now_ms,
            next_attempt_ms: Some(now_ms),
            first_attempt_ms: None,
            attempt_count: 0,
            attempts: Vec::new(),
            not_sent: None,
        }
    }

    /// A delivery of event `seq` recorded `failed` without an attempt, for
    /// `why`.
    pub fn unsent(webhook_id: &str, seq: u64, event_type: &str, now_ms: u64, why: &str) -> Self {
        DeliveryRecord {
            state: DeliveryState::Failed,
            next_attempt_ms: None,
            not_sent: Some(why.to_string()),
            ..DeliveryRecord::new(webhook_id, seq, event_type, now_ms)
        }
    }

    /// Whether it is done with: delivered, or failed for good.
    pub fn finished(&self) -> bool {
        self.state != DeliveryState::Pending
    }

    /// Records `attempt`, keeping the newest [`MAX_ATTEMPTS_KEPT`].
    pub fn push_attempt(&mut self, attempt: Attempt) {
        self.first_attempt_ms.get_or_insert(attempt.at_ms);
        self.attempt_count = self.attempt_count.saturating_add(1);
        self.attempts.push(attempt);
        if self.attempts.len() > MAX_ATTEMPTS_KEPT {
            self.attempts.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, msg: &str) -> Event {
        let mut e = Event::new(1, kind, msg).tenant("acme");
        e.seq = 10;
        e
    }

    /// Each row: an event-log event and the webhook type it is sent as.
    #[test]
    fn every_mapped_kind_has_one_documented_name() {
        let rows = [
            (
                EventKind::TaskSubmitted,
                "submitted",
                Some("task.submitted"),
            ),
            (
                EventKind::TaskTransition,
                "queued -> scheduled: placed on node-a",
                Some("task.placed"),
            ),
            (
                EventKind::TaskTransition,
                "running -> failed: exited with code 3",
                Some("task.failed"),
            ),
            (
                EventKind::TaskTransition,
                "running -> released: reclaimed: idle for 3s",
                Some("idle.reclaimed"),
            ),
            (
                EventKind::TaskTransition,
                "replicas 2 -> 1: reclaimed: idle for 3s",
                Some("idle.reclaimed"),
            ),
            (
                EventKind::TaskTransition,
                "scheduled -> preparing",
                Some("task.state_changed"),
            ),
            (
                EventKind::TaskTransition,
                "replica svc.r1 ended (failed); replaced in 1s",
                Some("task.state_changed"),
            ),
            (EventKind::Preempted, "x", Some("task.preempted")),
            (EventKind::IdleWarning, "x", Some("idle.warning")),
            (EventKind::QuotaChanged, "x", Some("quota.changed")),
            (
                EventKind::ModelStateChanged,
                "x",
                Some("model.version_changed"),
            ),
            (EventKind::ModelRenamed, "x", Some("model.version_changed")),
            (EventKind::ModelSwap, "x", Some("service.model_swap")),
            (EventKind::NodeLost, "x", Some("node.lost")),
            (EventKind::NodeCordoned, "x", Some("node.state_changed")),
            (EventKind::ServerStarted, "x", None),
            (EventKind::WarmingProgress, "x", None),
        ];
        for (kind, msg, want) in rows {
            let got = webhook_type(&ev(kind, msg));
            assert_eq!(got, want, "{kind:?} {msg:?}");
            if let Some(name) = got {
                assert!(is_known(name), "{name} is not in EVENT_TYPES");
            }
        }
    }

    fn sub(events: &[&str], tenant: Option<&str>) -> WebhookRecord {
        WebhookRecord {
            id: "wh-1".into(),
            url: "http://127.0.0.1:1/".into(),
            events: events.iter().map(|s| s.to_string()).collect(),
            tenant: tenant.map(str::to_string),
            owner: None,
            secret: "00".into(),
            created_ms: 0,
            after_seq: 5,
            from_config: false,
        }
    }

    #[test]
    fn a_subscription_hears_its_names_their_children_its_tenant_and_nothing_older() {
        let failed = ev(EventKind::TaskTransition, "running -> failed");
        assert!(sub(&["task.state_changed"], None).wants(&failed, "task.failed"));
        assert!(sub(&["task.failed"], Some("acme")).wants(&failed, "task.failed"));
        assert!(sub(&["*"], Some("acme")).wants(&failed, "task.failed"));
        assert!(!sub(&["task.placed"], None).wants(&failed, "task.failed"));
        assert!(!sub(&["*"], Some("other")).wants(&failed, "task.failed"));
        let mut old = failed.clone();
        old.seq = 5;
        assert!(
            !sub(&["*"], None).wants(&old, "task.failed"),
            "seq 5 <= after_seq 5"
        );
        let mut public = ev(
            EventKind::ModelStateChanged,
            "llama:v1 registered -> active",
        );
        public.tenant = None;
        assert!(
            sub(&["model.version_changed"], Some("acme")).wants(&public, "model.version_changed")
        );
        let mut theirs = public.clone();
        theirs.tenant = Some("other".into());
        assert!(!sub(&["*"], Some("acme")).wants(&theirs, "model.version_changed"));
        let lost = ev(EventKind::NodeLost, "node-a lost");
        assert!(sub(&["node.state_changed"], None).wants(&lost, "node.lost"));
    }

    #[test]
    fn only_node_names_are_the_operators_and_star_is_known() {
        assert!(operator_only("node.lost") && operator_only("node.state_changed"));
        assert!(!operator_only("task.failed") && !operator_only("*"));
        assert!(is_known("*") && is_known("idle.warning") && !is_known("task.exploded"));
    }

    #[test]
    fn a_delivery_keeps_the_newest_attempts_and_counts_all() {
        let mut d = DeliveryRecord::new("wh-1", 7, "task.failed", 100);
        for i in 0..(MAX_ATTEMPTS_KEPT as u64 + 3) {
            d.push_attempt(Attempt {
                at_ms: 200 + i,
                status: Some(500),
                error: None,
                duration_ms: 1,
            });
        }
        assert_eq!(d.first_attempt_ms, Some(200));
        assert_eq!(d.attempt_count as usize, MAX_ATTEMPTS_KEPT + 3);
        assert_eq!(d.attempts.len(), MAX_ATTEMPTS_KEPT);
        assert_eq!(d.attempts[0].at_ms, 203);
    }
}
