//! Who a bearer token belongs to (`GET /v1/whoami`).
use serde::{Deserialize, Serialize};

/// Whose token it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    Operator,
    Tenant,
}

/// `{"principal":"operator"}` or `{"principal":"tenant","tenant":NAME}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Whoami {
    pub principal: PrincipalKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_has_no_tenant_on_the_wire() {
        let op = Whoami {
            principal: PrincipalKind::Operator,
            tenant: None,
        };
        let wire = serde_json::to_value(&op).expect("serializes");
        assert_eq!(wire, serde_json::json!({"principal": "operator"}));
        assert_eq!(serde_json::from_value::<Whoami>(wire).ok(), Some(op));
    }
}
