//! The append-only event log: the allocation history and audit trail.
use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    TaskSubmitted,
    TaskTransition,
    AllocationGranted,
    AllocationReleased,
    NodeJoined,
    NodeLost,
    NodeFenced,
    /// A hello, event or report of a node was refused (not its allocation,
    /// stale epoch, wrong secret, a checkpoint outside the task's dir...).
    NodeRefused,
    NodeRevoked,
    /// An operator rotated a node's secret.
    NodeSecretRotated,
    /// A node was cordoned, drained or uncordoned.
    NodeCordoned,
    /// A node's session was resynced: a gap in its events (or a task that
    /// may have missed what its workload did) had what the node holds
    /// compared with the books; says why and what was repaired.
    NodeResynced,
    TenantCreated,
    QuotaChanged,
    WorkloadExited,
    CheckpointRequested,
    CheckpointSaved,
    Preempted,
    IdleWarning,
    /// A service replica moved make-before-break off a drained node:
    /// its replacement started, waited for room, or ran and the old one stopped.
    ReplicaMoved,
    ServerStarted,
    /// Storage stopped taking writes (a full disk, an I/O error): changes
    /// are refused with 503 until it recovers. Recorded once it has.
    StorageDegraded,
    /// Storage takes writes again, by itself (reopened if sled had latched
    /// the error); says for how long it was degraded.
    StorageRecovered,
    /// A model version was registered.
    ModelRegistered,
    /// A tenant's version named outside its namespace was moved into it at
    /// boot (`llama:v9` -> `@TENANT.llama:v9`); `detail` has `old` and `new`.
    ModelRenamed,
    /// A model version changed state (`registered -> active`, deprecated...)
    /// or was pinned or unpinned.
    ModelStateChanged,
    /// A node's copy of a version: a source chosen (origin, a peer), a wait
    /// for one, verified, failed, evicted.
    ModelWarmup,
    /// A task in `warming`: bytes arriving (at most about one a second).
    WarmingProgress,
    /// A task in `preparing`: its image's pull, layers and bytes done (at
    /// most about one a second); and the digest its container runs, when
    /// that was reported after the task was already running.
    PullProgress,
    /// A service's hot swap: started, a replica swapped (or rolled back),
    /// done, rolled back (with the replica and the reason).
    ModelSwap,
    /// An image's pulls: a start waiting for a pull slot (`max-image-pulls`
    /// nodes pull one image at once), a pre-pull sent, done or failed.
    ImagePull,
}

/// One entry of the event log. `seq` is assigned by storage, strictly increasing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    pub seq: u64,
    pub at_ms: u64,
    pub kind: EventKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub message: String,
    /// Structured facts of the event, for receivers that should not parse
    /// `message` (an idle warning's allocation and idle time). Absent in
    /// events recorded before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

impl Event {
    /// An event not yet numbered by storage.
    pub fn new(at_ms: u64, kind: EventKind, message: impl Into<String>) -> Self {
        Event {
            seq: 0,
            at_ms,
            kind,
            task: None,
            tenant: None,
            node: None,
            message: message.into(),
            detail: None,
        }
    }
    pub fn detail(mut self, d: serde_json::Value) -> Self {
        self.detail = Some(d);
        self
    }

    /// The event as the API shows it (`GET /v1/events`, webhook `data`):
    /// `at` in RFC 3339 beside `at_ms`, and the task as its tenant's own id
    /// (the tenant is its own field).
    pub fn view(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self.clone().for_its_tenant()).unwrap_or_default();
        v["at"] = serde_json::Value::String(crate::time::rfc3339(self.at_ms));
        v
    }

    /// The event with its task as the tenant's own id (`tenant/id` -> `id`;
    /// the tenant is its own field): what the API and webhooks show.
    pub fn for_its_tenant(mut self) -> Self {
        self.task = self.task.map(|t| crate::local_id(&t).to_string());
        self
    }
    pub fn task(mut self, t: &str) -> Self {
        self.task = Some(t.to_string());
        self
    }
    pub fn tenant(mut self, t: &str) -> Self {
        self.tenant = Some(t.to_string());
        self
    }
    pub fn node(mut self, n: &str) -> Self {
        self.node = Some(n.to_string());
        self
    }
}
