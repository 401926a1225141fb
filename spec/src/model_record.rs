//! What the control plane keeps of a registered model version (sled
//! `v/<name>:<version>`): the immutable spec, its life state, and where its
//! copies are. Written only by the version's `ModelVersionActor`, always
//! before it acts on a change (a warm source chosen, a copy verified).
use crate::model::{ModelRef, ModelState, ModelVersionSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A version as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelVersionRecord {
    pub spec: ModelVersionSpec,
    pub state: ModelState,
    /// Copies are pinned on every node that holds one (a prewarm or `PUT .../pin`).
    #[serde(default)]
    pub pinned: bool,
    pub registered_at_ms: u64,
    /// The tenant that registered it; `None`: the operator (visible to all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Each node's copy, by node name.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeCopy>,
    /// Keys of the tasks that have used it (`tenant/task_id`).
    #[serde(default)]
    pub tasks: BTreeSet<String>,
    /// The retire control message, recorded before it is acted on: from
    /// then the version takes no new tasks, and it becomes `retired` once no
    /// task uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retire: Option<RetireOrder>,
    /// A `from_task` registration: its file is a tenant's checkpoint, read
    /// only inside that task's tree and with that tenant's rights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<crate::weights::ConfinedRead>,
}

/// Who asked for a version's retirement, when, and what replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetireOrder {
    /// Who asked (`operator`, or `tenant NAME` for a tenant's own version).
    pub by: String,
    pub at_ms: u64,
    /// `name:version` the services still on this version move to, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_with: Option<String>,
    /// Services (keys) already told to swap to `replace_with`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub swaps_asked: BTreeSet<String>,
}

impl ModelVersionRecord {
    /// `name:version`, the record's key.
    pub fn key(&self) -> String {
        self.spec.model_ref().to_string()
    }

    pub fn model_ref(&self) -> ModelRef {
        self.spec.model_ref()
    }
}

/// One node's copy of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCopy {
    pub copy: CopyState,
    /// Bytes on the node (progress while warming; the size once verified).
    #[serde(default)]
    pub bytes_done: u64,
    /// [`WeightSource::label`](crate::weights::WeightSource::label) of the
    /// source it is reading (or was verified from); empty while waiting.
    #[serde(default)]
    pub source: String,
    /// Reads of this copy that failed in a row without getting further;
    /// 0 once it is verified. Drives the retry backoff and its budget.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// Why the last read failed (the node's words, with its source).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// While [`CopyState::Retrying`]: when the next read is due (clock ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<u64>,
    /// A prewarm (or a need naming no task) asked for this copy: it is
    /// wanted on the node even when no task there uses the version.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prewarm: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl NodeCopy {
    /// A copy in `copy` state read from `source`, with no failures behind it.
    pub fn new(copy: CopyState, bytes_done: u64, source: impl Into<String>) -> NodeCopy {
        NodeCopy {
            copy,
            bytes_done,
            source: source.into(),
            failures: 0,
            reason: String::new(),
            retry_at_ms: None,
            prewarm: false,
        }
    }
}

/// Where one node's copy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyState {
    /// In the node's cache, its SHA-256 checked.
    Verified,
    /// Being fetched from `source`.
    Warming,
    /// Needed, but no source may serve it yet (origin budget spent, no peer).
    Waiting,
    /// Was there, and is gone (evicted, corrupt, deleted).
    Evicted,
    /// A read failed and the next one waits out its backoff (`retry_at_ms`).
    Retrying,
    /// Reads kept failing until the retry budget was spent: no more tries
    /// until a new task needs it on the node or a prewarm asks again
    /// (`reason` says why the last one failed).
    Failed,
}

impl CopyState {
    pub fn as_str(self) -> &'static str {
        match self {
            CopyState::Verified => "verified",
            CopyState::Warming => "warming",
            CopyState::Waiting => "waiting",
            CopyState::Evicted => "evicted",
            CopyState::Retrying => "retrying",
            CopyState::Failed => "failed",
        }
    }
}
