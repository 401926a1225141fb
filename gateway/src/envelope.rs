//! The one response envelope: `{"code":0,"msg":"ok","data":...,"request_id":"..."}`,
//! and errors with a stable code, a name, a sentence and the offending field.
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use caldera_actors::errors::ActorError;
use caldera_spec::codes::{self, ErrorCode};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A request id unique within this process run: boot time + counter.
pub fn request_id() -> String {
    static BOOT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let boot = *BOOT.get_or_init(|| caldera_actors::clock::now_ms() & 0xffff_ffff);
    format!(
        "req-{boot:08x}-{:06x}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A success with `status` and `data`.
pub fn ok<T: Serialize>(status: u16, data: T) -> HttpResponse {
    let body =
        serde_json::json!({"code": 0, "msg": "ok", "data": data, "request_id": request_id()});
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)).json(body)
}

/// An error envelope for any control-plane error.
pub fn err(e: &ActorError) -> HttpResponse {
    fail(e.error_code(), &e.to_string(), e.field())
}

/// An error envelope for a registry entry, answered with its HTTP status.
pub fn fail(code: &ErrorCode, msg: &str, field: Option<&str>) -> HttpResponse {
    let mut body = serde_json::json!({"code": code.code, "error": code.name, "msg": msg, "data": null, "request_id": request_id()});
    if let Some(f) = field {
        body["field"] = serde_json::Value::String(f.to_string());
    }
    HttpResponse::build(
        StatusCode::from_u16(code.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    )
    .json(body)
}

pub fn unauthenticated() -> HttpResponse {
    fail(
        &codes::UNAUTHENTICATED,
        "send a bearer token: Authorization: Bearer <token>",
        None,
    )
}

pub fn forbidden(msg: &str) -> HttpResponse {
    fail(&codes::FORBIDDEN, msg, None)
}

pub fn not_found(what: &str, id: &str) -> HttpResponse {
    fail(&codes::NOT_FOUND, &format!("{what} {id:?} not found"), None)
}

pub fn bad_query(field: &str, msg: &str) -> HttpResponse {
    fail(&codes::BAD_QUERY, msg, Some(field))
}
