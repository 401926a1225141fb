//! [`Reply`]: a success in the one envelope (`spec::Envelope`), with its
//! HTTP status; failures are [`ApiError`](crate::error::ApiError)s.
use actix_web::body::BoxBody;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, Responder};
use caldera_spec::Envelope;
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

/// A successful answer: status and the envelope around `data`.
pub struct Reply<T> {
    status: StatusCode,
    body: Envelope<T>,
}

impl<T: Serialize> Reply<T> {
    /// 200 with `data`.
    pub fn ok(data: T) -> Self {
        Reply::with_status(StatusCode::OK, data)
    }

    /// 201 with the created thing.
    pub fn created(data: T) -> Self {
        Reply::with_status(StatusCode::CREATED, data)
    }

    /// What the answer carries: the portal renders the API's own answers.
    pub fn into_data(self) -> Option<T> {
        self.body.data
    }

    pub fn with_status(status: StatusCode, data: T) -> Self {
        Reply {
            status,
            body: Envelope::ok(data, request_id()),
        }
    }
}

impl<T: Serialize> Responder for Reply<T> {
    type Body = BoxBody;

    fn respond_to(self, _: &HttpRequest) -> HttpResponse {
        HttpResponse::build(self.status).json(self.body)
    }
}
