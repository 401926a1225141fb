//! Who the bearer token belongs to: what `caldera login` checks a token
//! with, and how the CLI finds a tenant token's own tenant (`caldera quota
//! show`, `caldera usage`) without the operator token.
use crate::envelope::Reply;
use crate::principal::User;
pub use caldera_spec::views::{PrincipalKind, Whoami};
use caldera_spec::Envelope;

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
