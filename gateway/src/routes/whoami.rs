//! Who the bearer token belongs to: what `caldera login` checks a token
//! with, and how the CLI finds a tenant token's own tenant (`caldera quota
//! show`, `caldera usage`) without the operator token.
use crate::envelope::Reply;
use crate::principal::User;
use serde_json::{json, Value};

/// GET /v1/whoami -> `{"principal":"operator"}` or
/// `{"principal":"tenant","tenant":NAME}`.
pub async fn get(user: User) -> Reply<Value> {
    Reply::ok(match user.tenant() {
        Some(t) => json!({"principal": "tenant", "tenant": t}),
        None => json!({"principal": "operator"}),
    })
}
