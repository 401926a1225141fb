//! `GET /v1/tenants/{name}/cost?from=&to=&group_by=task|model|day`: what a
//! tenant's allocations cost over a period (default: this month so far,
//! UTC), as JSON in the envelope or, with `Accept: text/csv`, as CSV.
use super::cost_views::{CostReportView, CostTotalView};
use super::{period, Query};
use crate::api::{tenants, usage};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse, Responder};
use caldera_actors::chargeback::GroupBy;
use caldera_spec::Envelope;

fn wants_csv(req: &HttpRequest) -> bool {
    req.headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/csv"))
}

/// `GET /v1/tenants/{name}/cost` parameters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CostQuery {
    /// Start of the period: Unix ms or RFC 3339 (default: the start of this month, UTC).
    pub from: Option<String>,
    /// End of the period, exclusive (default: now).
    pub to: Option<String>,
    /// `task` (default), `model` or `day`.
    pub group_by: Option<String>,
    /// `true`: list the billing records behind the report too.
    pub records: Option<bool>,
}

/// GET /v1/tenants/{name}/cost (the operator, or the tenant itself)
#[utoipa::path(get, path = "/v1/tenants/{name}/cost", tag = "tenants", operation_id = "tenant_cost",
    description = "What a tenant's allocations cost over a period, from the persisted billing records and the price table: allocated cost, the part measured idle, borrowed vs guaranteed, per task, model or day. `Accept: text/csv` answers CSV (docs/concepts/chargeback.md).",
    params(("name" = String, Path, description = "the tenant"), CostQuery),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the report", content(
            (Envelope<CostReportView> = "application/json"),
            (String = "text/csv"),
        )),
        (status = 400, description = "a bad from, to, group_by or records (named)"),
        (status = 404, description = "no such tenant (or another tenant's)"),
    ))]
pub async fn get(
    req: HttpRequest,
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
    q: Query,
) -> Result<HttpResponse, ApiError> {
    let tenant = tenants::find(&st, &user, &name).await?;
    let (from, to) = period::parse(&q, st.cp.now_ms(), caldera_spec::time::month_start_ms)?;
    let by = match q.get("group_by") {
        None => GroupBy::Task,
        Some(v) => GroupBy::parse(v).ok_or_else(|| {
            ApiError::bad_query(
                "group_by",
                format!("group_by must be one of {}, not {v:?}", GroupBy::NAMES),
            )
        })?,
    };
    let with_records = match q.get("records").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => {
            return Err(ApiError::bad_query(
                "records",
                format!("records must be true or false, not {v:?}"),
            ))
        }
    };
    if wants_csv(&req) {
        return Ok(HttpResponse::Ok()
            .content_type("text/csv; charset=utf-8")
            .body(usage::cost_csv(&st, &tenant, from, to, by).await?));
    }
    let v = usage::cost_report(&st, &tenant, from, to, by, with_records).await?;
    Ok(Reply::ok(v).respond_to(&req))
}

/// GET /v1/cost (operator)
#[utoipa::path(get, path = "/v1/cost", tag = "tenants", operation_id = "cost_total",
    description = "What every tenant's allocations cost over a period (default: this month so far, UTC), one line per tenant and the operator-wide total, computed as each tenant's own report is (docs/concepts/chargeback.md).",
    params(CostQuery),
    security(("operator" = [])),
    responses(
        (status = 200, description = "per tenant and in total", body = Envelope<CostTotalView>),
        (status = 400, description = "a bad from or to (named)"),
        (status = 403, description = "a tenant token: only the operator sees every tenant's cost"),
    ))]
pub async fn total(
    req: HttpRequest,
    op: Operator,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, ApiError> {
    let (from, to) = period::parse(&q, st.cp.now_ms(), caldera_spec::time::month_start_ms)?;
    let v = usage::cost_total(&st, &op, from, to).await?;
    Ok(Reply::ok(v).respond_to(&req))
}
