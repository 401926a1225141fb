//! Model versions as the API shows them (`/v1/models`).
use crate::WeightsSpec;
use serde::{Deserialize, Serialize};

/// A model version as the caller sees it: its weights, state and copies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionView {
    pub name: String,
    pub version: String,
    pub state: String,
    pub weights: WeightsSpec,
    /// The image a swap onto it runs (absent: each service's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub pinned: bool,
    pub registered_at_ms: u64,
    /// The tenant that registered it; absent: the operator (visible to all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub nodes: Vec<CopyView>,
    /// Tasks that have used it: the caller's own ids (the operator sees
    /// `tenant/id`).
    pub tasks: Vec<String>,
    pub origin_pulls_now: u32,
    /// The retire order, once one was given (who asked, when, replace_with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retire: Option<crate::RetireOrder>,
    /// While retiring (`GET .../versions/{version}` only): the tasks that
    /// still use it, by tenant — every tenant's for the operator, a tenant's
    /// own otherwise. The version becomes `retired` once this is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_by: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

/// The version's copy on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CopyView {
    pub node: String,
    /// `verified`, `warming`, `waiting`, `evicted`, `retrying` (a read
    /// failed; the next waits out its backoff) or `failed` (reads kept
    /// failing; no more until a new task or a prewarm asks).
    pub copy: String,
    pub bytes_done: u64,
    pub source: String,
    /// Failed reads in a row (absent: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// Why the last read failed: its source and the node's words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// While `retrying`: when the next read is due (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One model's versions as the caller sees them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelView {
    pub name: String,
    pub versions: Vec<VersionView>,
}

/// The nodes a prewarm sent the version to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Prewarmed {
    pub nodes: Vec<String>,
}
