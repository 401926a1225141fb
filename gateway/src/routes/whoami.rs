//! Who the bearer token belongs to: what `caldera login` checks a token
//! with, and how the CLI finds a tenant token's own tenant (`caldera quota
//! show`, `caldera usage`) without the operator token.
use crate::envelope::Reply;
use crate::principal::User;
use caldera_spec::Envelope;
use serde::Serialize;
use utoipa::ToSchema;

/// Whose token it is.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    Operator,
    Tenant,
}

/// `{"principal":"operator"}` or `{"principal":"tenant","tenant":NAME}`.
#[derive(Serialize, ToSchema)]
pub struct Whoami {
    pub principal: PrincipalKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// GET /v1/whoami -> `{"principal":"operator"}` or
/// `{"principal":"tenant","tenant":NAME}`.
#[utoipa::path(get, path = "/v1/whoami", tag = "auth", operation_id = "whoami",
    description = "Who the bearer token belongs to.",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "the token's holder", body = Envelope<Whoami>)))]
pub async fn get(user: User) -> Reply<Whoami> {
    Reply::ok(match user.tenant() {
        Some(t) => Whoami {
            principal: PrincipalKind::Tenant,
            tenant: Some(t.to_string()),
        },
        None => Whoami {
            principal: PrincipalKind::Operator,
            tenant: None,
        },
    })
}
