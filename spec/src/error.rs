//! Validation errors. Each kind maps to one entry of the [registry](crate::codes)
//! so that clients can branch on it; the message names the offending field's path.
use crate::codes::{self, ErrorCode};
use thiserror::Error;

/// What was wrong with a submitted document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecErrorKind {
    /// The body is not JSON at all (or is truncated).
    MalformedJson,
    /// A field the schema does not know.
    UnknownField,
    /// A field of the wrong JSON type.
    WrongType,
    /// A required field is absent.
    MissingField,
    /// A value is zero, negative or beyond what any machine offers.
    OutOfRange,
    /// A value has the wrong shape (a duration that is not HH:MM:SS, a bad id).
    BadFormat,
    /// Two fields contradict each other (share with count > 1, ...).
    Conflict,
    /// The body is larger than the gateway accepts.
    TooLarge,
    /// A value the control plane keeps for itself (a task id of the replica form).
    Reserved,
    /// An url or address the operator does not allow the control plane to
    /// reach on the caller's behalf (an internal address, credentials in it).
    NotAllowed,
}

impl SpecErrorKind {
    /// This kind's entry in the [registry](crate::codes).
    pub fn error_code(self) -> &'static ErrorCode {
        match self {
            SpecErrorKind::MalformedJson => &codes::MALFORMED_JSON,
            SpecErrorKind::UnknownField => &codes::UNKNOWN_FIELD,
            SpecErrorKind::WrongType => &codes::WRONG_TYPE,
            SpecErrorKind::MissingField => &codes::MISSING_FIELD,
            SpecErrorKind::OutOfRange => &codes::OUT_OF_RANGE,
            SpecErrorKind::BadFormat => &codes::BAD_FORMAT,
            SpecErrorKind::Conflict => &codes::CONFLICTING_FIELDS,
            SpecErrorKind::TooLarge => &codes::BODY_TOO_LARGE,
            SpecErrorKind::Reserved => &codes::RESERVED_ID,
            SpecErrorKind::NotAllowed => &codes::ADDRESS_NOT_ALLOWED,
        }
    }

    /// Stable numeric code carried in the API envelope.
    pub fn code(self) -> u32 {
        self.error_code().code
    }

    /// Stable machine-readable name carried in the API envelope.
    pub fn name(self) -> &'static str {
        self.error_code().name
    }
}

/// A rejected document: which field, what kind of problem, and a sentence a
/// person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    pub kind: SpecErrorKind,
    /// Dotted path of the offending field (`resources.gpu.count`), or `.` for the whole body.
    pub field: String,
    pub message: String,
}

impl SpecError {
    pub fn new(kind: SpecErrorKind, field: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            kind,
            field: field.into(),
            message: message.into(),
        }
    }
}
