//! Where a service's ready replicas are reached
//! (`GET /v1/tasks/{service}/endpoints`).
use serde::{Deserialize, Serialize};

/// One ready replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndpointView {
    /// The replica's task id (the tenant's own, `svc.r0`).
    pub replica: String,
    pub node: String,
    /// The host its node is reached at.
    pub address: String,
    /// Its port on that host (the workload's CALDERA_PORT).
    pub port: u16,
    /// The `name:version` it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub allocation_id: String,
    pub gpu_indices: Vec<u32>,
}

/// The answer: the service's ready replicas, and the list's revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceEndpoints {
    pub service: String,
    /// Changes whenever `endpoints` changes, and only grows (also across a
    /// control-plane restart): pass it as `since` to wait for the next change.
    pub revision: u64,
    pub endpoints: Vec<EndpointView>,
}
