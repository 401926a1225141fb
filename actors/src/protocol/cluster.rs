//! Messages the Cluster (the root) answers. The root is not in the directory:
//! the gateway's facade holds its address.
use super::node::NodeHandle;
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::wire::{Hello, ServerMessage};
use caldera_spec::{Quota, TaskRecord, TaskSpec, TenantRecord};
use tokio::sync::mpsc::UnboundedSender;

/// Submit a task for `tenant`. Answers once the record is durable; `true` when
/// newly created, `false` when the same spec was already submitted.
#[derive(Message)]
#[rtype(result = "Result<(TaskRecord, bool)>")]
pub struct Submit {
    pub tenant: String,
    pub spec: TaskSpec,
}

/// Create a tenant; returns its record and its token (shown once).
#[derive(Message)]
#[rtype(result = "Result<(TenantRecord, String)>")]
pub struct CreateTenant {
    pub name: String,
    pub quota: Quota,
    pub borrowing_limit: Quota,
}

/// A node agent's first frame: find or create its NodeActor and hand it the session.
#[derive(Message)]
#[rtype(result = "Result<NodeHandle>")]
pub struct NodeSession {
    pub hello: Hello,
    pub session_id: u64,
    pub tx: UnboundedSender<ServerMessage>,
}

/// Register a model version. `owner`: the registering tenant (`None`: the
/// operator). Answers the record once durable, and whether it is new (the
/// identical registration again: `false`; a different one: 409).
#[derive(Message)]
#[rtype(result = "Result<(caldera_spec::ModelVersionRecord, bool)>")]
pub struct RegisterModel {
    pub spec: caldera_spec::ModelVersionSpec,
    pub owner: Option<String>,
    /// A `from_task` registration: where its file must be read.
    pub checkpoint: Option<caldera_spec::weights::ConfinedRead>,
}
