//! Errors the control plane answers with. Each variant has a stable code and
//! name; the gateway maps them to HTTP statuses.
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
    Forbidden(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
}

impl ActorError {
    /// Stable numeric code.
    pub fn code(&self) -> u32 {
        match self {
            ActorError::Invalid(e) => e.kind.code(),
            ActorError::NotFound { .. } => 40401,
            ActorError::Conflict(_) => 40901,
            ActorError::Forbidden(_) => 40301,
            ActorError::Unavailable(_) => 50301,
            ActorError::Storage(_) => 50001,
        }
    }

    /// Stable machine-readable name.
    pub fn name(&self) -> &'static str {
        match self {
            ActorError::Invalid(e) => e.kind.name(),
            ActorError::NotFound { .. } => "not_found",
            ActorError::Conflict(_) => "conflict",
            ActorError::Forbidden(_) => "forbidden",
            ActorError::Unavailable(_) => "unavailable",
            ActorError::Storage(_) => "storage_error",
        }
    }

    /// HTTP status the gateway answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            ActorError::Invalid(e) if e.kind == caldera_spec::SpecErrorKind::TooLarge => 413,
            ActorError::Invalid(_) => 400,
            ActorError::NotFound { .. } => 404,
            ActorError::Conflict(_) => 409,
            ActorError::Forbidden(_) => 403,
            ActorError::Unavailable(_) => 503,
            ActorError::Storage(_) => 500,
        }
    }

    /// The offending field, for validation errors.
    pub fn field(&self) -> Option<&str> {
        match self {
            ActorError::Invalid(e) => Some(&e.field),
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

impl From<actix::MailboxError> for ActorError {
    fn from(e: actix::MailboxError) -> Self {
        ActorError::Unavailable(format!("control plane actor unavailable: {e}"))
    }
}

pub type Result<T> = std::result::Result<T, ActorError>;
