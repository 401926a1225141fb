//! Who is calling, as handler arguments: [`User`] (operator or tenant),
//! [`Operator`] and [`NodeJoin`]. Each authenticates the bearer token before
//! the handler runs (and before any body is read), answering 401 without a
//! valid token and 403 for a token of the wrong kind.
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::dev::Payload;
use actix_web::http::header::HeaderMap;
use actix_web::{web, FromRequest, HttpRequest};
use caldera_actors::tokens::Principal;
use caldera_spec::codes;
use std::future::{ready, Ready};

/// The bearer token a request carries, if any (`Authorization: Bearer T`).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get("authorization")?.to_str().ok()?;
    header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// The bearer token's holder, or the 401.
fn principal(req: &HttpRequest) -> Result<Principal, ApiError> {
    let Some(token) = bearer_token(req.headers()) else {
        return Err(ApiError::new(
            &codes::UNAUTHENTICATED,
            "send a bearer token: Authorization: Bearer <token>",
        ));
    };
    let Some(st) = req.app_data::<web::Data<AppState>>() else {
        return Err(ApiError::new(
            &codes::UNAVAILABLE,
            "the gateway has no control plane",
        ));
    };
    st.cp
        .authenticate(token)
        .ok_or_else(|| ApiError::new(&codes::UNAUTHENTICATED, "the bearer token is not valid"))
}

/// An operator or a tenant (not a node join token).
pub struct User(pub Principal);

impl User {
    /// Whether this caller may see things of `tenant`.
    pub fn may_see(&self, tenant: &str) -> bool {
        match &self.0 {
            Principal::Operator => true,
            Principal::Tenant(t) => t == tenant,
            Principal::NodeJoin => false,
        }
    }

    /// The tenant of a tenant token; `None` for the operator.
    pub fn tenant(&self) -> Option<&str> {
        match &self.0 {
            Principal::Tenant(t) => Some(t),
            _ => None,
        }
    }

    /// The proof that this caller is the operator, if it is.
    pub fn operator(&self) -> Option<Operator> {
        (self.0 == Principal::Operator).then_some(Operator(()))
    }
}

/// Authenticates `req` and lets `admit` decide whether that principal may call.
fn authorize<T>(
    req: &HttpRequest,
    admit: impl FnOnce(Principal) -> Result<T, ApiError>,
) -> Ready<Result<T, ApiError>> {
    ready(principal(req).and_then(admit))
}

impl FromRequest for User {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        authorize(req, |p| match p {
            Principal::NodeJoin => {
                Err(ApiError::forbidden("a node join token may only join nodes"))
            }
            p => Ok(User(p)),
        })
    }
}

/// The operator: made only from the operator's token (this extractor, or
/// [`User::operator`]), so an operation that takes one cannot be reached
/// by anyone else.
pub struct Operator(());

impl FromRequest for Operator {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        authorize(req, |p| match p {
            Principal::Operator => Ok(Operator(())),
            _ => Err(ApiError::forbidden(
                "this operation needs the operator token",
            )),
        })
    }
}

/// A node agent holding the cluster join token.
pub struct NodeJoin;

impl FromRequest for NodeJoin {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        authorize(req, |p| match p {
            Principal::NodeJoin => Ok(NodeJoin),
            _ => Err(ApiError::forbidden(
                "nodes join with the cluster join token",
            )),
        })
    }
}
