//! Tenants: create (operator; the token is shown once), quota change, listing.
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
use caldera_spec::validate::parse_json;
use caldera_spec::{Quota, TenantRecord};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTenant {
    name: String,
    #[serde(default)]
    quota: Quota,
    #[serde(default)]
    borrowing_limit: Quota,
}

/// A quota change: `{"guaranteed":{...},"borrowing_limit":{...}}` (either part
/// optional), or a bare quota object meaning the guarantee.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotaChange {
    #[serde(default)]
    guaranteed: Option<Quota>,
    #[serde(default)]
    borrowing_limit: Option<Quota>,
}

fn view(t: &TenantRecord) -> Value {
    json!({"name": t.name, "quota": t.quota, "guaranteed": t.quota, "borrowing_limit": t.borrowing_limit,
        "created_at": caldera_spec::time::rfc3339(t.created_ms)})
}

/// POST /v1/tenants {name, quota?}
pub async fn create(
    _: Operator,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<Value>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let nt: NewTenant = parse_json(&body)?;
    let (rec, token) = st
        .cp
        .create_tenant(nt.name, nt.quota, nt.borrowing_limit)
        .await?;
    let mut v = view(&rec);
    v["token"] = Value::String(token);
    Ok(Reply::created(v))
}

/// PUT /v1/tenants/{name}/quota (operator)
pub async fn set_quota(
    _: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<Reply<Value>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let change = match parse_json::<QuotaChange>(&body) {
        Ok(c) if c.guaranteed.is_some() || c.borrowing_limit.is_some() => c,
        _ => QuotaChange {
            guaranteed: Some(parse_json::<Quota>(&body)?),
            borrowing_limit: None,
        },
    };
    for q in [&change.guaranteed, &change.borrowing_limit]
        .into_iter()
        .flatten()
    {
        q.validate()?;
    }
    let rec = st
        .cp
        .change_quota(&name, change.guaranteed, change.borrowing_limit)
        .await?;
    Ok(Reply::ok(view(&rec)))
}

/// GET /v1/tenants (operator)
pub async fn list(_: Operator, st: web::Data<AppState>) -> Result<Reply<Value>, ApiError> {
    let tenants: Vec<Value> = st.cp.tenants().await?.iter().map(view).collect();
    Ok(Reply::ok(json!({ "tenants": tenants })))
}

/// The tenant `name` if the caller may see it (operator, or the tenant
/// itself); otherwise a 404 that does not say whether it exists.
pub(crate) async fn visible_tenant(
    user: &User,
    st: &AppState,
    name: &str,
) -> Result<TenantRecord, ApiError> {
    match st.cp.tenant(name).await? {
        Some(t) if user.may_see(name) => Ok(t),
        _ => Err(ApiError::not_found("tenant", name)),
    }
}

/// GET /v1/tenants/{name} (operator, or the tenant itself)
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<Value>, ApiError> {
    let rec = visible_tenant(&user, &st, &name).await?;
    Ok(Reply::ok(view(&rec)))
}
