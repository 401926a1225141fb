//! The one response envelope: `{"code":0,"msg":"ok","data":...,"request_id":"..."}`,
//! and errors with a stable code, a name, a sentence and the offending field.
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use caldera_actors::errors::ActorError;
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
    fail(
        e.http_status(),
        e.code(),
        e.name(),
        &e.to_string(),
        e.field(),
    )
}

/// An error envelope from parts.
pub fn fail(status: u16, code: u32, name: &str, msg: &str, field: Option<&str>) -> HttpResponse {
    let mut body = serde_json::json!({"code": code, "error": name, "msg": msg, "data": null, "request_id": request_id()});
    if let Some(f) = field {
        body["field"] = serde_json::Value::String(f.to_string());
    }
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .json(body)
}

/// Errors of the gateway itself (before a request reaches an actor).
pub mod codes {
    pub const UNAUTHENTICATED: u32 = 40100;
    pub const FORBIDDEN: u32 = 40300;
    pub const NOT_FOUND: u32 = 40400;
    pub const BAD_QUERY: u32 = 40008;
}

pub fn unauthenticated() -> HttpResponse {
    fail(
        401,
        codes::UNAUTHENTICATED,
        "unauthenticated",
        "send a bearer token: Authorization: Bearer <token>",
        None,
    )
}

pub fn forbidden(msg: &str) -> HttpResponse {
    fail(403, codes::FORBIDDEN, "forbidden", msg, None)
}

pub fn not_found(what: &str, id: &str) -> HttpResponse {
    fail(
        404,
        codes::NOT_FOUND,
        "not_found",
        &format!("{what} {id:?} not found"),
        None,
    )
}

pub fn bad_query(field: &str, msg: &str) -> HttpResponse {
    fail(400, codes::BAD_QUERY, "bad_query", msg, Some(field))
}
