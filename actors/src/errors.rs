//! Errors the control plane answers with. Each variant maps to one entry of the
//! registry (`caldera_spec::codes`); the gateway answers with that entry's
//! HTTP status, so the status is never decided twice.
use caldera_spec::codes::{self, ErrorCode};
use caldera_spec::SpecError;
use caldera_storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    #[error("{0}")]
    Invalid(#[from] SpecError),
    #[error("{what} {id:?} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unavailable(String),
    /// A change whose commit failed: nothing of it was applied (503, retry).
    #[error("{0}")]
    NotRecorded(String),
    /// No registered node could ever hold the request (the message says why).
    #[error("{0}")]
    Unschedulable(String),
    /// A task names a model version that is not registered (or not visible
    /// to its tenant); field `model`.
    #[error("{0}")]
    UnknownModel(String),
    /// A task names a version that is retiring or retired; field `model`.
    #[error("{0}")]
    ModelNotAccepting(String),
    /// A swap of the service runs already (409 `swap_in_progress`).
    #[error("{0}")]
    SwapInProgress(String),
    /// A 1-replica swap without downtime allowed or room to surge (409
    /// `swap_needs_replicas`); the message says what to add.
    #[error("{0}")]
    SwapNeedsReplicas(String),
    /// A replica is not running on an allocation (409 `swap_not_ready`).
    #[error("{0}")]
    SwapNotReady(String),
    /// `max_surge: 1` and no free capacity holds one more replica of the
    /// service's shape now (409 `swap_no_surge_room`); the message is the
    /// Scheduler's reason.
    #[error("{0}")]
    SwapNoSurgeRoom(String),
    /// A retire asked again with another `replace_with`, or of a retired version.
    #[error("{0}")]
    RetireInProgress(String),
    /// A retire's `replace_with` may not serve; field `replace_with`.
    #[error("{0}")]
    ReplacementInvalid(String),
    /// A registration from a task that reported no checkpoint yet.
    #[error("{0}")]
    NoCheckpoint(String),
    /// The checkpoint file to register cannot be used; field `path`.
    #[error("{0}")]
    CheckpointUnreadable(String),
    /// The task's checkpoint tree, as its node reported it, cannot be told
    /// to be the tenant's own; field `from_task`.
    #[error("{0}")]
    CheckpointUntrusted(String),
    /// A version's weights uri is not an origin its registrant may use;
    /// field `weights.uri`.
    #[error("{0}")]
    OriginNotAllowed(String),
    /// A model name in another's namespace; field `name`.
    #[error("{0}")]
    ModelNameReserved(String),
    /// More than the tenant may ever hold (422 `exceeds_tenant_cap`);
    /// `field` names the request's field.
    #[error("{message}")]
    ExceedsTenantCap {
        field: &'static str,
        message: String,
    },
    /// `limits.require-images` and a task that would run on the host; `field`
    /// is `image` or `runtime` (422 `image_required`).
    #[error("{message}")]
    ImageRequired {
        field: &'static str,
        message: String,
    },
    /// A data volume the operator's allow-list does not offer the task's
    /// tenant, or not read-write; `field` names the entry (422
    /// `volume_not_allowed`).
    #[error("{message}")]
    VolumeNotAllowed { field: String, message: String },
    /// Keeps the storage error's own code (a corrupt record is not a full disk).
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
}

impl ActorError {
    /// This error's entry in the registry.
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            ActorError::Invalid(e) => e.kind.error_code(),
            ActorError::NotFound { .. } => &codes::NOT_FOUND,
            ActorError::Conflict(_) => &codes::CONFLICT,
            ActorError::Unavailable(_) => &codes::UNAVAILABLE,
            ActorError::NotRecorded(_) => &codes::NOT_RECORDED,
            ActorError::Unschedulable(_) => &codes::UNSCHEDULABLE,
            ActorError::ExceedsTenantCap { .. } => &codes::EXCEEDS_TENANT_CAP,
            ActorError::UnknownModel(_) => &codes::UNKNOWN_MODEL,
            ActorError::ModelNotAccepting(_) => &codes::MODEL_NOT_ACCEPTING,
            ActorError::SwapInProgress(_) => &codes::SWAP_IN_PROGRESS,
            ActorError::SwapNeedsReplicas(_) => &codes::SWAP_NEEDS_REPLICAS,
            ActorError::SwapNotReady(_) => &codes::SWAP_NOT_READY,
            ActorError::SwapNoSurgeRoom(_) => &codes::SWAP_NO_SURGE_ROOM,
            ActorError::RetireInProgress(_) => &codes::RETIRE_IN_PROGRESS,
            ActorError::ReplacementInvalid(_) => &codes::REPLACEMENT_INVALID,
            ActorError::NoCheckpoint(_) => &codes::NO_CHECKPOINT,
            ActorError::CheckpointUnreadable(_) => &codes::CHECKPOINT_UNREADABLE,
            ActorError::CheckpointUntrusted(_) => &codes::CHECKPOINT_UNTRUSTED,
            ActorError::OriginNotAllowed(_) => &codes::ORIGIN_NOT_ALLOWED,
            ActorError::ModelNameReserved(_) => &codes::MODEL_NAME_RESERVED,
            ActorError::ImageRequired { .. } => &codes::IMAGE_REQUIRED,
            ActorError::VolumeNotAllowed { .. } => &codes::VOLUME_NOT_ALLOWED,
            ActorError::Storage(e) => e.error_code(),
        }
    }

    /// Stable numeric code.
    pub fn code(&self) -> u32 {
        self.error_code().code
    }

    /// The offending field, for validation errors.
    pub fn field(&self) -> Option<&str> {
        match self {
            ActorError::Invalid(e) => Some(&e.field),
            ActorError::UnknownModel(_) | ActorError::ModelNotAccepting(_) => Some("model"),
            ActorError::ReplacementInvalid(_) => Some("replace_with"),
            ActorError::CheckpointUnreadable(_) => Some("path"),
            ActorError::CheckpointUntrusted(_) => Some("from_task"),
            ActorError::OriginNotAllowed(_) => Some("weights.uri"),
            ActorError::ModelNameReserved(_) => Some("name"),
            ActorError::ExceedsTenantCap { field, .. } => Some(field),
            ActorError::ImageRequired { field, .. } => Some(field),
            ActorError::VolumeNotAllowed { field, .. } => Some(field),
            _ => None,
        }
    }

    pub fn not_found(what: &'static str, id: &str) -> Self {
        ActorError::NotFound {
            what,
            id: id.to_string(),
        }
    }
}

impl ActorError {
    /// A change that could not be recorded: nothing of it was applied, and
    /// the caller may retry (503), rather than a bare storage failure (500).
    pub fn not_recorded(what: &str, e: StorageError) -> Self {
        ActorError::NotRecorded(format!(
            "{what} could not be recorded ({e}); nothing was changed; retry"
        ))
    }
}

impl From<actix::MailboxError> for ActorError {
    fn from(e: actix::MailboxError) -> Self {
        ActorError::Unavailable(format!("control plane actor unavailable: {e}"))
    }
}

pub type Result<T> = std::result::Result<T, ActorError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_keep_their_own_code() {
        let e = ActorError::from(StorageError::Config("x".into()));
        assert_eq!(e.code(), codes::STORAGE_CONFIG.code);
        assert_eq!(ActorError::not_found("task", "t").code(), 40400);
    }
}
