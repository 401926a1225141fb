//! Tenants: create (operator; the token is shown once), quota change, listing.
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
use caldera_spec::validate::parse_json;
use caldera_spec::Envelope;
pub use caldera_spec::views::{TenantList, TenantView};
use caldera_spec::{Quota, TenantRecord};
use serde::Deserialize;
use utoipa::ToSchema;

/// `POST /v1/tenants`: the tenant's name, its guarantee and its borrowing limit.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    name: String,
    #[serde(default)]
    quota: Quota,
    #[serde(default)]
    borrowing_limit: Quota,
}

/// A quota change: `{"guaranteed":{...},"borrowing_limit":{...}}` (either part
/// optional), or a bare quota object meaning the guarantee.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaChange {
    #[serde(default)]
    guaranteed: Option<Quota>,
    #[serde(default)]
    borrowing_limit: Option<Quota>,
}

/// The body of `PUT /v1/tenants/{name}/quota`: a [`QuotaChange`], or a
/// bare [`Quota`] meaning the guarantee (what older clients send).
/// A schema only: `set_quota` parses the two forms itself, so that each
/// answers its own field-naming error.
pub struct QuotaChangeBody;

impl utoipa::PartialSchema for QuotaChangeBody {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AnyOfBuilder, Ref};
        AnyOfBuilder::new()
            .item(Ref::from_schema_name("QuotaChange"))
            .item(Ref::from_schema_name("Quota"))
            .into()
    }
}

impl ToSchema for QuotaChangeBody {
    fn schemas(
        out: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        use utoipa::PartialSchema;
        out.push(("QuotaChange".into(), QuotaChange::schema()));
        out.push(("Quota".into(), Quota::schema()));
        <QuotaChange as ToSchema>::schemas(out);
    }
}



fn view(t: &TenantRecord) -> TenantView {
    TenantView {
        name: t.name.clone(),
        quota: t.quota.clone(),
        guaranteed: t.quota.clone(),
        borrowing_limit: t.borrowing_limit.clone(),
        created_at: caldera_spec::time::rfc3339(t.created_ms),
        token: None,
    }
}

/// POST /v1/tenants {name, quota?}
#[utoipa::path(post, path = "/v1/tenants", tag = "tenants",
    description = "Creates a tenant. Its token is in this answer only.",
    request_body = NewTenant,
    security(("operator" = [])),
    responses(
        (status = 201, description = "created; `token` is shown this once", body = Envelope<TenantView>),
        (status = 400, description = "the body is not a tenant (the field is named)"),
        (status = 409, description = "the tenant exists"),
    ))]
pub async fn create(
    _: Operator,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<TenantView>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let nt: NewTenant = parse_json(&body)?;
    let (rec, token) = st
        .cp
        .create_tenant(nt.name, nt.quota, nt.borrowing_limit)
        .await?;
    let mut v = view(&rec);
    v.token = Some(token);
    Ok(Reply::created(v))
}

/// PUT /v1/tenants/{name}/quota (operator)
#[utoipa::path(put, path = "/v1/tenants/{name}/quota", tag = "tenants",
    description = "Changes a tenant's guarantee and/or borrowing limit.",
    params(("name" = String, Path, description = "the tenant")),
    request_body = QuotaChangeBody,
    security(("operator" = [])),
    responses(
        (status = 200, description = "the tenant as changed", body = Envelope<TenantView>),
        (status = 400, description = "the body is not a quota (the field is named)"),
        (status = 404, description = "no such tenant"),
    ))]
pub async fn set_quota(
    _: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<Reply<TenantView>, ApiError> {
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
#[utoipa::path(get, path = "/v1/tenants", tag = "tenants",
    security(("operator" = [])),
    responses((status = 200, description = "every tenant", body = Envelope<TenantList>)))]
pub async fn list(_: Operator, st: web::Data<AppState>) -> Result<Reply<TenantList>, ApiError> {
    let tenants = st.cp.tenants().await?.iter().map(view).collect();
    Ok(Reply::ok(TenantList { tenants }))
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
#[utoipa::path(get, path = "/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "the tenant")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the tenant", body = Envelope<TenantView>),
        (status = 404, description = "no such tenant (or another tenant's)"),
    ))]
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<TenantView>, ApiError> {
    let rec = visible_tenant(&user, &st, &name).await?;
    Ok(Reply::ok(view(&rec)))
}
