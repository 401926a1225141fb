//! Bearer-token authentication: who is calling, and what they may touch.
use crate::envelope;
use crate::state::AppState;
use actix_web::{HttpRequest, HttpResponse};
use caldera_actors::tokens::Principal;

/// The caller, or the 401 to answer with.
pub fn principal(req: &HttpRequest, st: &AppState) -> Result<Principal, HttpResponse> {
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let token = header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
        .unwrap_or("");
    if token.is_empty() {
        return Err(envelope::unauthenticated());
    }
    st.shared.tokens.authenticate(token).ok_or_else(|| {
        envelope::fail(
            &caldera_spec::codes::UNAUTHENTICATED,
            "the bearer token is not valid",
            None,
        )
    })
}

/// Operator or tenant (not a node join token).
pub fn user(req: &HttpRequest, st: &AppState) -> Result<Principal, HttpResponse> {
    match principal(req, st)? {
        Principal::NodeJoin => Err(envelope::forbidden("a node join token may only join nodes")),
        p => Ok(p),
    }
}

/// Operator only.
pub fn operator(req: &HttpRequest, st: &AppState) -> Result<(), HttpResponse> {
    match principal(req, st)? {
        Principal::Operator => Ok(()),
        _ => Err(envelope::forbidden(
            "this operation needs the operator token",
        )),
    }
}

/// Whether `p` may see things of `tenant`.
pub fn may_see(p: &Principal, tenant: &str) -> bool {
    match p {
        Principal::Operator => true,
        Principal::Tenant(t) => t == tenant,
        Principal::NodeJoin => false,
    }
}
