//! The one response envelope of the HTTP API.
use serde::{Deserialize, Serialize};

/// `{"code":0,"msg":"ok","data":...,"request_id":"..."}`; errors carry a
/// non-zero stable `code`, an `error` name and the offending `field`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub data: Option<T>,
    pub request_id: String,
}

/// The error part of an envelope, as a client reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: u32,
    pub error: String,
    pub msg: String,
    pub field: Option<String>,
}
