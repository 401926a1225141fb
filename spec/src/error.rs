//! Validation errors. Each kind has a stable numeric code and name so that
//! clients can branch on it; the message names the offending field's path.
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
}

impl SpecErrorKind {
    /// Stable numeric code carried in the API envelope.
    pub fn code(self) -> u32 {
        match self {
            SpecErrorKind::MalformedJson => 40001,
            SpecErrorKind::UnknownField => 40002,
            SpecErrorKind::WrongType => 40003,
            SpecErrorKind::MissingField => 40004,
            SpecErrorKind::OutOfRange => 40005,
            SpecErrorKind::BadFormat => 40006,
            SpecErrorKind::Conflict => 40007,
            SpecErrorKind::TooLarge => 41301,
        }
    }

    /// Stable machine-readable name carried in the API envelope.
    pub fn name(self) -> &'static str {
        match self {
            SpecErrorKind::MalformedJson => "malformed_json",
            SpecErrorKind::UnknownField => "unknown_field",
            SpecErrorKind::WrongType => "wrong_type",
            SpecErrorKind::MissingField => "missing_field",
            SpecErrorKind::OutOfRange => "out_of_range",
            SpecErrorKind::BadFormat => "bad_format",
            SpecErrorKind::Conflict => "conflicting_fields",
            SpecErrorKind::TooLarge => "body_too_large",
        }
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
