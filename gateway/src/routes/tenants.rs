//! Tenants: create (operator; the token is shown once), quota change, listing.
use crate::api::tenants as api;
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
use caldera_spec::validate::parse_json;
pub use caldera_spec::views::{TenantList, TenantView};
use caldera_spec::Envelope;
use caldera_spec::Quota;
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
    op: Operator,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<TenantView>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let nt: NewTenant = parse_json(&body)?;
    let v = api::create(&st, &op, nt.name, nt.quota, nt.borrowing_limit).await?;
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
    op: Operator,
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
    let v = api::set_quota(&st, &op, &name, change.guaranteed, change.borrowing_limit).await?;
    Ok(Reply::ok(v))
}

/// GET /v1/tenants (operator)
#[utoipa::path(get, path = "/v1/tenants", tag = "tenants",
    security(("operator" = [])),
    responses((status = 200, description = "every tenant", body = Envelope<TenantList>)))]
pub async fn list(op: Operator, st: web::Data<AppState>) -> Result<Reply<TenantList>, ApiError> {
    Ok(Reply::ok(api::list(&st, &op).await?))
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
    Ok(Reply::ok(api::get(&st, &user, &name).await?))
}
