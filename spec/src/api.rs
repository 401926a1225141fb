//! The one response envelope of the HTTP API.
use crate::codes::ErrorCode;
use serde::{Deserialize, Serialize};

/// `{"code":0,"msg":"ok","data":...,"request_id":"..."}`; errors carry a
/// non-zero stable `code`, an `error` name, the offending `field` where there
/// is one, and `"data": null`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

impl<T> Envelope<T> {
    /// A success carrying `data`.
    pub fn ok(data: T, request_id: String) -> Self {
        Envelope {
            code: 0,
            msg: "ok".to_string(),
            error: None,
            field: None,
            data: Some(data),
            request_id,
        }
    }

    /// A failure: the registry entry's code and name, a sentence a person can
    /// act on, and the offending field's path where there is one.
    pub fn failure(
        code: &ErrorCode,
        msg: String,
        field: Option<String>,
        request_id: String,
    ) -> Self {
        Envelope {
            code: code.code,
            msg,
            error: Some(code.name.to_string()),
            field,
            data: None,
            request_id,
        }
    }
}

/// The error part of an envelope, as a client reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: u32,
    pub error: String,
    pub msg: String,
    pub field: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_and_failure_have_the_keys_clients_read() {
        let ok = serde_json::to_value(Envelope::ok(1, "r".into())).unwrap();
        assert_eq!(
            ok,
            serde_json::json!({"code": 0, "msg": "ok", "data": 1, "request_id": "r"})
        );
        let e = Envelope::<()>::failure(
            &crate::codes::BAD_QUERY,
            "m".into(),
            Some("limit".into()),
            "r".into(),
        );
        assert_eq!(
            serde_json::to_value(e).unwrap(),
            serde_json::json!({"code": 40008, "error": "bad_query", "msg": "m",
                "field": "limit", "data": null, "request_id": "r"})
        );
    }
}
