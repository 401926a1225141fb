//! Errors of the placement engine, each with a stable code for APIs and logs.
use super::types::NodeId;
use caldera_spec::codes::{self, ErrorCode};

/// Why a placement could not be committed to (or read from) the pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The placement names a node the pool does not know.
    #[error("node {0:?} is not in the pool")]
    UnknownNode(NodeId),
    /// The placement names a GPU index the node does not have.
    #[error("node {node:?} has no GPU with index {gpu}")]
    UnknownGpu { node: NodeId, gpu: u32 },
    /// The node no longer has room for the demand (stale decision or a race).
    #[error("node {node:?} has no room: {reason}")]
    NoRoom { node: NodeId, reason: String },
    /// The placement does not match its demand (wrong GPU count or amounts).
    #[error("placement does not match the demand: {0}")]
    Mismatch(String),
}

impl PlacementError {
    /// Its entry in the one error registry (`caldera_spec::codes`).
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            PlacementError::UnknownNode(_) => &codes::PLACEMENT_UNKNOWN_NODE,
            PlacementError::UnknownGpu { .. } => &codes::PLACEMENT_UNKNOWN_GPU,
            PlacementError::NoRoom { .. } => &codes::PLACEMENT_NO_ROOM,
            PlacementError::Mismatch(_) => &codes::PLACEMENT_MISMATCH,
        }
    }

    /// Stable numeric code.
    pub fn code(&self) -> u32 {
        self.error_code().code
    }

    /// Stable machine-readable name.
    pub fn name(&self) -> &'static str {
        self.error_code().name
    }
}
