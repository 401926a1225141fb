//! [`PortalError`]: how a portal request fails, answered as an HTML page (a
//! person is reading), with the registry's code on it so a report can quote
//! it. A page without a session is a redirect to the login instead; a live
//! fragment without one is a 401 the page's script turns into that redirect.
use crate::error::ApiError;
use actix_web::http::header::{CONTENT_TYPE, LOCATION};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use caldera_spec::codes::{self, ErrorCode};
use maud::{html, DOCTYPE};

/// A failed portal request.
#[derive(Debug)]
pub enum PortalError {
    /// No live session: pages redirect to the login, fragments answer 401.
    NoSession { fragment: bool },
    /// A registry entry and a sentence: the page says both.
    Refused {
        code: &'static ErrorCode,
        msg: String,
    },
}

impl PortalError {
    pub fn new(code: &'static ErrorCode, msg: impl Into<String>) -> Self {
        PortalError::Refused {
            code,
            msg: msg.into(),
        }
    }

    /// A form without its session's CSRF token, or with a wrong one.
    pub fn csrf() -> Self {
        PortalError::new(
            &codes::PORTAL_CSRF_REFUSED,
            "this form did not carry this session's CSRF token, so nothing was changed; \
             reload the page and send it again",
        )
    }

    /// A tenant's session asked for something only the operator does.
    pub fn operator_only(what: &str) -> Self {
        PortalError::new(
            &codes::PORTAL_OPERATOR_ONLY,
            format!("only the operator may {what}"),
        )
    }

    /// The registry entry (for tests and logs).
    pub fn code(&self) -> &'static ErrorCode {
        match self {
            PortalError::NoSession { .. } => &codes::PORTAL_NO_SESSION,
            PortalError::Refused { code, .. } => code,
        }
    }
}

impl std::fmt::Display for PortalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortalError::NoSession { .. } => write!(f, "no portal session"),
            PortalError::Refused { code, msg } => write!(f, "{} {}: {msg}", code.code, code.name),
        }
    }
}

/// An API error shown as a portal page: the same code and sentence, the
/// field named when there is one.
impl From<ApiError> for PortalError {
    fn from(e: ApiError) -> Self {
        let msg = match e.field() {
            Some(f) => format!("{} (field {f})", e.message()),
            None => e.message().to_string(),
        };
        PortalError::new(e.code(), msg)
    }
}

impl From<caldera_actors::errors::ActorError> for PortalError {
    fn from(e: caldera_actors::errors::ActorError) -> Self {
        ApiError::from(e).into()
    }
}

impl ResponseError for PortalError {
    fn status_code(&self) -> StatusCode {
        match self {
            PortalError::NoSession { fragment: false } => StatusCode::SEE_OTHER,
            e => StatusCode::from_u16(e.code().http_status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut reply = HttpResponse::build(self.status_code());
        reply.insert_header((CONTENT_TYPE, "text/html; charset=utf-8"));
        if let PortalError::NoSession { fragment: false } = self {
            reply.insert_header((LOCATION, "/login"));
        }
        let code = self.code();
        let msg = match self {
            PortalError::NoSession { .. } => "log in to see this page".to_string(),
            PortalError::Refused { msg, .. } => msg.clone(),
        };
        let page = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    title { "Caldera — " (code.name) }
                    link rel="stylesheet" href="/portal/assets/portal.css";
                }
                body {
                    main.error-page {
                        h1 { "Not done" }
                        p #error-message data-code=(code.code) { (msg) }
                        p.code { "code " (code.code) " " code { (code.name) } }
                        p { a #error-back href="/" { "Back to the overview" } " · " a href="/login" { "Log in" } }
                    }
                }
            }
        };
        reply.body(page.into_string())
    }
}
