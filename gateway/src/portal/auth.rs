//! Who is looking at a portal page: [`Viewer`], from the session cookie, and
//! the checks every form POST passes ([`Form`]: its CSRF token).
use super::error::PortalError;
use super::session::{same_secret, Session};
use crate::principal::User;
use crate::state::AppState;
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use caldera_actors::tokens::Principal;
use caldera_spec::codes;
use std::collections::HashMap;
use std::future::{ready, Ready};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "caldera_session";

/// The value of cookie `name` in `req`'s `Cookie` headers, if any.
pub fn cookie(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get_all("cookie")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim().to_string())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, Path=/, `Secure` when
/// the request came over TLS; `max_age_s` 0 deletes the cookie.
pub fn set_cookie(req: &HttpRequest, name: &str, value: &str, max_age_s: u64) -> String {
    let secure = if req.connection_info().scheme() == "https" {
        "; Secure"
    } else {
        ""
    };
    format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age_s}{secure}")
}

/// A logged-in viewer: the principal of the token the session was opened
/// with, and the session's CSRF token for the forms of the page.
pub struct Viewer {
    pub session_id: String,
    pub session: Session,
}

impl Viewer {
    /// The same caller as the API knows it, for the API's own handlers.
    pub fn user(&self) -> User {
        User(self.session.principal.clone())
    }

    pub fn is_operator(&self) -> bool {
        self.session.principal == Principal::Operator
    }

    /// A tenant's session: its tenant; the operator: `None`.
    pub fn tenant(&self) -> Option<&str> {
        match &self.session.principal {
            Principal::Tenant(t) => Some(t),
            _ => None,
        }
    }

    /// Who this is, for the header.
    pub fn label(&self) -> String {
        match self.tenant() {
            Some(t) => format!("tenant {t}"),
            None => "operator".to_string(),
        }
    }

    pub fn csrf(&self) -> &str {
        &self.session.csrf
    }
}

/// The viewer of `req`, or [`PortalError::NoSession`].
fn viewer(req: &HttpRequest) -> Result<Viewer, PortalError> {
    let fragment = req
        .query_string()
        .split('&')
        .any(|kv| kv == "fragment=live");
    let none = || PortalError::NoSession { fragment };
    let id = cookie(req, SESSION_COOKIE).ok_or_else(none)?;
    let st = req.app_data::<web::Data<AppState>>().ok_or_else(none)?;
    let session = st
        .portal
        .sessions
        .find(&id, st.cp.now_ms())
        .ok_or_else(none)?;
    Ok(Viewer {
        session_id: id,
        session,
    })
}

impl FromRequest for Viewer {
    type Error = PortalError;
    type Future = Ready<Result<Self, PortalError>>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(viewer(req))
    }
}

/// A form's fields, by name (the last value of a repeated name).
pub type Fields = HashMap<String, String>;

/// Reads a urlencoded form body with the API's size limit and deadline.
pub async fn read_form(st: &AppState, payload: web::Payload) -> Result<Fields, PortalError> {
    let body = crate::body::read(payload, st.body_limit).await?;
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body)
        .map(|pairs| pairs.into_iter().collect())
        .map_err(|e| {
            PortalError::new(
                &codes::MALFORMED_JSON,
                format!("the form is not application/x-www-form-urlencoded: {e}"),
            )
        })
}

/// A form POST of a logged-in viewer whose CSRF token checked out: only
/// then may the handler act on it.
pub struct Form {
    pub viewer: Viewer,
    pub fields: Fields,
}

impl Form {
    /// Reads the body and checks its `csrf` field against the session's, in
    /// constant time; a missing or wrong one is refused before anything acts.
    pub async fn checked(
        viewer: Viewer,
        st: &AppState,
        payload: web::Payload,
    ) -> Result<Form, PortalError> {
        let fields = read_form(st, payload).await?;
        match fields.get("csrf") {
            Some(given) if same_secret(given, viewer.csrf()) => Ok(Form { viewer, fields }),
            _ => Err(PortalError::csrf()),
        }
    }

    /// A field's value, trimmed; `None` when absent or blank.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}
