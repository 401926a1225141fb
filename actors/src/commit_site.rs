//! Every place the control plane commits a batch, by name. A name is what
//! an operator reads in a log line ("could not record ... at `grant`") and
//! what a fail-point test arms (`PUT /v1/test/failpoints/{site}`, compiled
//! only into test builds), so each write path can be shown to survive a
//! failed commit: memory unchanged, the caller told 503, the actor rebuilt.

/// A commit path. One per distinct write, not per call site: two calls that
/// write the same record for the same reason share a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommitSite {
    /// Cluster: a new task's record and its "submitted" event.
    TaskSubmit,
    /// Cluster: a new tenant's record (and its token hash).
    TenantCreate,
    /// TaskActor: a lifecycle transition (`queued -> scheduled -> ...`);
    /// ServiceActor: the service's own state.
    TaskTransition,
    /// TaskActor: a change of the record that is not a transition (a
    /// checkpoint pointer, a borrowed mark, a service's note on a replica).
    TaskRecord,
    /// TaskActor or ServiceActor: events that leave the record as it is.
    TaskEvents,
    /// A service's replica count (`PUT /v1/tasks/{id}/replicas`, idle scale-in).
    ServiceScale,
    /// A service's new replica task record.
    ReplicaCreate,
    /// A service's replica move off a drained node: the service's slots with
    /// the replacement's record (started), or the slots alone (finished).
    ReplicaMove,
    /// A service's hot swap: its progress (a step of a replica, the phase),
    /// recorded before the step is acted on.
    ServiceSwap,
    /// Scheduler: a grant — allocation, the task's `scheduled` record, the
    /// epoch and the events in one batch.
    Grant,
    /// Scheduler: an allocation freed from the ledger.
    Free,
    /// Scheduler: allocations re-marked borrowed or guaranteed after a quota change.
    BorrowMarks,
    /// Scheduler: an in-place swap marked in the allocation's billing
    /// record, so cost by model bills each version the time it served.
    ModelMarks,
    /// Scheduler: allocations freed when the ledger is reconciled with the
    /// task records (boot and every Scheduler rebuild).
    LedgerReconcile,
    /// TenantActor: a quota or borrowing-limit change.
    QuotaChange,
    /// NodeActor: a hello that opens a session (new epoch, inventory).
    NodeHello,
    /// NodeActor: a node declared lost (its epoch fenced).
    NodeLoss,
    /// NodeActor: a node revoked by an operator.
    NodeRevoke,
    /// NodeActor: a node's secret rotated by an operator.
    NodeSecretRotate,
    /// NodeActor: a node cordoned, drained or uncordoned (an operator's
    /// `caldera node cordon|drain|uncordon`, or its agent's drain on SIGTERM).
    NodeCordon,
    /// Cluster: a new model version's record and its "registered" event.
    ModelRegister,
    /// ModelVersionActor: a change of the version's state or pin.
    ModelState,
    /// ModelVersionActor: a node's copy (a source chosen, a wait, verified,
    /// failed, evicted), recorded before the node is told.
    ModelWarmup,
    /// An event recorded on its own (a refusal, a fence notice, an idle warning).
    Event,
    /// A webhook subscription made or deleted.
    WebhookSubscribe,
    /// Deliveries of new events recorded with the dispatcher's cursor.
    WebhookFanOut,
    /// A delivery attempt's outcome (delivered, retry at, failed).
    WebhookAttempt,
    /// Scheduler: one inspector pass's usage history samples and roll-ups,
    /// and the idle time measured into open billing records.
    UsageHistory,
    /// A tenant's registry credentials set or deleted.
    RegistryCredential,
}

impl CommitSite {
    /// Every site, in declaration order.
    pub const ALL: &'static [CommitSite] = &[
        CommitSite::TaskSubmit,
        CommitSite::TenantCreate,
        CommitSite::TaskTransition,
        CommitSite::TaskRecord,
        CommitSite::TaskEvents,
        CommitSite::ServiceScale,
        CommitSite::ReplicaCreate,
        CommitSite::ReplicaMove,
        CommitSite::ServiceSwap,
        CommitSite::Grant,
        CommitSite::Free,
        CommitSite::BorrowMarks,
        CommitSite::ModelMarks,
        CommitSite::LedgerReconcile,
        CommitSite::QuotaChange,
        CommitSite::NodeHello,
        CommitSite::NodeLoss,
        CommitSite::NodeRevoke,
        CommitSite::NodeSecretRotate,
        CommitSite::NodeCordon,
        CommitSite::ModelRegister,
        CommitSite::ModelState,
        CommitSite::ModelWarmup,
        CommitSite::Event,
        CommitSite::WebhookSubscribe,
        CommitSite::WebhookFanOut,
        CommitSite::WebhookAttempt,
        CommitSite::UsageHistory,
        CommitSite::RegistryCredential,
    ];

    /// The stable name (logs, the fail-point endpoint).
    pub fn as_str(self) -> &'static str {
        match self {
            CommitSite::TaskSubmit => "task_submit",
            CommitSite::TenantCreate => "tenant_create",
            CommitSite::TaskTransition => "task_transition",
            CommitSite::TaskRecord => "task_record",
            CommitSite::TaskEvents => "task_events",
            CommitSite::ServiceScale => "service_scale",
            CommitSite::ReplicaCreate => "replica_create",
            CommitSite::ReplicaMove => "replica_move",
            CommitSite::ServiceSwap => "service_swap",
            CommitSite::Grant => "grant",
            CommitSite::Free => "free",
            CommitSite::BorrowMarks => "borrow_marks",
            CommitSite::ModelMarks => "model_marks",
            CommitSite::LedgerReconcile => "ledger_reconcile",
            CommitSite::QuotaChange => "quota_change",
            CommitSite::NodeHello => "node_hello",
            CommitSite::NodeLoss => "node_loss",
            CommitSite::NodeRevoke => "node_revoke",
            CommitSite::NodeSecretRotate => "node_secret_rotate",
            CommitSite::NodeCordon => "node_cordon",
            CommitSite::ModelRegister => "model_register",
            CommitSite::ModelState => "model_state",
            CommitSite::ModelWarmup => "model_warmup",
            CommitSite::Event => "event",
            CommitSite::WebhookSubscribe => "webhook_subscribe",
            CommitSite::WebhookFanOut => "webhook_fan_out",
            CommitSite::WebhookAttempt => "webhook_attempt",
            CommitSite::UsageHistory => "usage_history",
            CommitSite::RegistryCredential => "registry_credential",
        }
    }

    /// The site named `name`, if any.
    pub fn parse(name: &str) -> Option<CommitSite> {
        CommitSite::ALL.iter().copied().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for CommitSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::CommitSite;

    #[test]
    fn every_site_parses_back_from_its_name_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for s in CommitSite::ALL {
            assert_eq!(CommitSite::parse(s.as_str()), Some(*s));
            assert!(names.insert(s.as_str()), "{s} twice");
        }
        assert_eq!(CommitSite::parse("nope"), None);
    }
}
