//! Tenants as the API shows them (`/v1/tenants`), and a tenant's usage
//! curve (`GET /v1/tenants/{name}/usage`).
use crate::{Quota, Usage};
use serde::{Deserialize, Serialize};

/// A tenant as the API shows it; `quota` is the older name of `guaranteed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantView {
    pub name: String,
    pub quota: Quota,
    pub guaranteed: Quota,
    pub borrowing_limit: Quota,
    /// RFC 3339.
    pub created_at: String,
    /// The tenant's bearer token: in the answer to its creation only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `GET /v1/tenants`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantList {
    pub tenants: Vec<TenantView>,
}

/// Allocated and measured use of one moment (or bucket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsagePair {
    pub allocated: Usage,
    pub used: Usage,
}

/// One point of a tenant's usage curve: the mean over its bucket, and the max.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantUsagePoint {
    /// RFC 3339 of the bucket's start.
    pub at: String,
    pub at_ms: u64,
    pub allocated: Usage,
    pub used: Usage,
    pub max: UsagePair,
    /// Raw samples the point stands for (1 at the finest tier).
    pub samples: u32,
}

/// `GET /v1/tenants/{name}/usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantUsageView {
    pub tenant: String,
    /// RFC 3339; the range is `[from, to)`.
    pub from: String,
    pub to: String,
    pub from_ms: u64,
    pub to_ms: u64,
    /// Bucket width of the tier that answered, ms (10 s, 5 min or 1 h by default).
    pub resolution_ms: u64,
    /// The last point's means; null before the first sample.
    pub current: Option<UsagePair>,
    pub samples: Vec<TenantUsagePoint>,
    pub note: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_reads_back_and_its_token_is_absent_when_not_shown() {
        let t = TenantView {
            name: "alpha".into(),
            quota: Quota {
                gpus: Some(4.0),
                ..Quota::default()
            },
            guaranteed: Quota {
                gpus: Some(4.0),
                ..Quota::default()
            },
            borrowing_limit: Quota::default(),
            created_at: "2026-11-29T10:00:00Z".into(),
            token: None,
        };
        let wire = serde_json::to_value(TenantList {
            tenants: vec![t.clone()],
        })
        .expect("serializes");
        assert!(wire["tenants"][0].get("token").is_none());
        let back: TenantList = serde_json::from_value(wire).expect("reads back");
        assert_eq!(back.tenants, vec![t]);
    }
}
