//! `GET /v1/tenants/{name}/cost?from=&to=&group_by=task|model|day`: what a
//! tenant's allocations cost over a period (default: this month so far,
//! UTC), as JSON in the envelope or, with `Accept: text/csv`, as CSV.
use super::{period, Query};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse, Responder};
use caldera_actors::chargeback::{csv, CostLine, GroupBy, PriceTable};
use caldera_spec::time::rfc3339;
use caldera_spec::BillingRecord;
use serde_json::{json, Value};

fn line(l: &CostLine) -> Value {
    json!({
        "key": l.key, "allocations": l.allocations,
        "allocated_cost": l.allocated.decimal(), "idle_cost": l.idle.decimal(),
        "idle_share": l.idle_share(),
        "borrowed_cost": l.borrowed.decimal(), "guaranteed_cost": l.guaranteed.decimal(),
        "allocated_cost_micros": l.allocated.0, "idle_cost_micros": l.idle.0,
        "borrowed_cost_micros": l.borrowed.0, "guaranteed_cost_micros": l.guaranteed.0,
        "gpu_hours": l.gpu_hours, "cpu_core_hours": l.cpu_core_hours,
        "memory_gb_hours": l.memory_gb_hours, "disk_gb_hours": l.disk_gb_hours,
    })
}

fn record(r: &BillingRecord) -> Value {
    json!({
        "allocation_id": caldera_spec::local_id(&r.allocation_id),
        "task": caldera_spec::local_id(&r.task_id),
        "service": r.service.as_deref().map(caldera_spec::local_id),
        "model": r.model, "node": r.node, "gpus": r.gpus,
        "cpu_milli": r.cpu_milli, "memory_mb": r.memory_mb, "disk_mb": r.disk_mb,
        "start": rfc3339(r.start_ms), "start_ms": r.start_ms,
        "end": r.end_ms.map(rfc3339), "end_ms": r.end_ms, "end_reason": r.end_reason,
        "borrowed": r.borrowed, "marks": r.marks, "idle_ms": r.idle_ms,
    })
}

fn prices(p: &PriceTable) -> Value {
    let gpu: serde_json::Map<String, Value> = p
        .gpu_hour
        .0
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.decimal())))
        .collect();
    json!({"gpu_hour": gpu, "cpu_core_hour": p.cpu_core_hour.decimal(),
        "memory_gb_hour": p.memory_gb_hour.decimal(), "disk_gb_hour": p.disk_gb_hour.decimal()})
}

fn wants_csv(req: &HttpRequest) -> bool {
    req.headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/csv"))
}

/// GET /v1/tenants/{name}/cost (the operator, or the tenant itself)
pub async fn get(
    req: HttpRequest,
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
    q: Query,
) -> Result<HttpResponse, ApiError> {
    super::tenants::visible_tenant(&user, &st, &name).await?;
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
    let (records, rep) = st.cp.cost(&name, from, to, by).await?;
    let p = st.cp.prices();
    if wants_csv(&req) {
        return Ok(HttpResponse::Ok()
            .content_type("text/csv; charset=utf-8")
            .body(csv::render(&name, &rep, &p.currency)));
    }
    let mut v = json!({
        "tenant": *name, "from": rfc3339(from), "to": rfc3339(to), "from_ms": from, "to_ms": to,
        "group_by": by.as_str(), "currency": p.currency, "prices": prices(&p),
        "money": "exact decimals of the currency (micro-units); each charge rounded half-up once to a micro-unit",
        "total": line(&rep.total), "groups": rep.groups.iter().map(line).collect::<Vec<_>>(),
    });
    if with_records {
        v["records"] = records.iter().map(record).collect();
    }
    Ok(Reply::ok(v).respond_to(&req))
}
