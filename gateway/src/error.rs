//! [`ApiError`]: every way a request fails, as one registry entry plus a
//! sentence, answered as the envelope with that entry's HTTP status. Handlers
//! return `Result<_, ApiError>` and use `?`.
use crate::envelope::request_id;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use caldera_actors::errors::ActorError;
use caldera_spec::codes::{self, ErrorCode};
use caldera_spec::{Envelope, SpecError};

/// A failed request: what went wrong (a registry entry), why, and where.
#[derive(Debug)]
pub struct ApiError {
    code: &'static ErrorCode,
    msg: String,
    field: Option<String>,
    /// The methods a path answers, for a 405's `Allow` header.
    allow: Option<String>,
}

impl ApiError {
    pub fn new(code: &'static ErrorCode, msg: impl Into<String>) -> Self {
        ApiError {
            code,
            msg: msg.into(),
            field: None,
            allow: None,
        }
    }

    /// 405: the path exists and answers `allow` (e.g. "GET, POST") only.
    pub fn method_not_allowed(allow: &str) -> Self {
        let mut e = ApiError::new(
            &codes::METHOD_NOT_ALLOWED,
            format!("this path answers {allow} only"),
        );
        e.allow = Some(allow.to_string());
        e
    }

    /// The same error, naming the offending field or query parameter.
    pub fn at(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn forbidden(msg: &str) -> Self {
        ApiError::new(&codes::FORBIDDEN, msg)
    }

    /// "Not found" — also what a caller hears about things it may not see.
    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::new(&codes::NOT_FOUND, format!("{what} {id:?} not found"))
    }

    pub fn bad_query(param: &str, msg: impl Into<String>) -> Self {
        ApiError::new(&codes::BAD_QUERY, msg).at(param)
    }

    /// The registry entry (for tests and logs).
    pub fn code(&self) -> &'static ErrorCode {
        self.code
    }

    /// The sentence for the caller (the portal shows it on its pages).
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// The offending field or query parameter, if the error names one.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code.code, self.code.name, self.msg)
    }
}

impl From<ActorError> for ApiError {
    fn from(e: ActorError) -> Self {
        ApiError {
            code: e.error_code(),
            field: e.field().map(str::to_string),
            msg: e.to_string(),
            allow: None,
        }
    }
}

impl From<SpecError> for ApiError {
    fn from(e: SpecError) -> Self {
        ActorError::Invalid(e).into()
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let body = Envelope::<()>::failure(
            self.code,
            self.msg.clone(),
            self.field.clone(),
            request_id(),
        );
        let mut reply = HttpResponse::build(self.status_code());
        if let Some(allow) = &self.allow {
            reply.insert_header((actix_web::http::header::ALLOW, allow.as_str()));
        }
        reply.json(body)
    }
}
