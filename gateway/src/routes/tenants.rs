//! Tenants: create (operator; the token is shown once), quota change, listing.
use crate::auth;
use crate::envelope;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::errors::ActorError;
use caldera_actors::protocol::cluster::CreateTenant;
use caldera_actors::protocol::tenant::{ChangeQuota, TenantSnapshot};
use caldera_spec::{Quota, TenantRecord};
use serde::Deserialize;

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

fn view(t: &TenantRecord) -> serde_json::Value {
    serde_json::json!({"name": t.name, "quota": t.quota, "guaranteed": t.quota, "borrowing_limit": t.borrowing_limit,
        "created_at": caldera_spec::time::rfc3339(t.created_ms)})
}

/// POST /v1/tenants {name, quota?}
pub async fn create(
    req: HttpRequest,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> HttpResponse {
    let body = match crate::body::read_as_operator(&req, &st, payload).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let nt: NewTenant = match caldera_spec::validate::parse_json(&body) {
        Ok(n) => n,
        Err(e) => return envelope::err(&ActorError::Invalid(e)),
    };
    match st
        .cluster
        .send(CreateTenant {
            name: nt.name,
            quota: nt.quota,
            borrowing_limit: nt.borrowing_limit,
        })
        .await
        .map_err(ActorError::from)
        .and_then(|r| r)
    {
        Ok((rec, token)) => {
            let mut v = view(&rec);
            v["token"] = serde_json::Value::String(token);
            envelope::ok(201, v)
        }
        Err(e) => envelope::err(&e),
    }
}

/// PUT /v1/tenants/{name}/quota (operator)
pub async fn set_quota(
    req: HttpRequest,
    st: web::Data<AppState>,
    name: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let body = match crate::body::read_as_operator(&req, &st, payload).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let change = match caldera_spec::validate::parse_json::<QuotaChange>(&body) {
        Ok(c) if c.guaranteed.is_some() || c.borrowing_limit.is_some() => c,
        _ => match caldera_spec::validate::parse_json::<Quota>(&body) {
            Ok(q) => QuotaChange {
                guaranteed: Some(q),
                borrowing_limit: None,
            },
            Err(e) => return envelope::err(&ActorError::Invalid(e)),
        },
    };
    for q in [&change.guaranteed, &change.borrowing_limit]
        .into_iter()
        .flatten()
    {
        if let Err(e) = q.validate() {
            return envelope::err(&ActorError::Invalid(e));
        }
    }
    let Some(t) = st.shared.registry.tenant(&name) else {
        return envelope::not_found("tenant", &name);
    };
    match t
        .send(ChangeQuota {
            quota: change.guaranteed,
            borrowing_limit: change.borrowing_limit,
        })
        .await
        .map_err(ActorError::from)
        .and_then(|r| r)
    {
        Ok(rec) => envelope::ok(200, view(&rec)),
        Err(e) => envelope::err(&e),
    }
}

/// GET /v1/tenants (operator)
pub async fn list(req: HttpRequest, st: web::Data<AppState>) -> HttpResponse {
    if let Err(r) = auth::operator(&req, &st) {
        return r;
    }
    let mut out = Vec::new();
    for (_, a) in st.shared.registry.tenants() {
        match a.send(TenantSnapshot).await {
            Ok(t) => out.push(view(&t)),
            Err(e) => return envelope::err(&e.into()),
        }
    }
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    envelope::ok(200, serde_json::json!({"tenants": out}))
}

/// The tenant `name` if the caller may see it (operator, or the tenant itself);
/// otherwise the 401, or a 404 that does not say whether it exists.
fn visible_tenant(
    req: &HttpRequest,
    st: &AppState,
    name: &str,
) -> Result<caldera_actors::protocol::TenantHandle, HttpResponse> {
    let p = auth::user(req, st)?;
    match st.shared.registry.tenant(name) {
        Some(t) if auth::may_see(&p, name) => Ok(t),
        _ => Err(envelope::not_found("tenant", name)),
    }
}

/// GET /v1/tenants/{name} (operator, or the tenant itself)
pub async fn get(
    req: HttpRequest,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> HttpResponse {
    let t = match visible_tenant(&req, &st, &name) {
        Ok(t) => t,
        Err(r) => return r,
    };
    match t.send(TenantSnapshot).await {
        Ok(rec) => envelope::ok(200, view(&rec)),
        Err(e) => envelope::err(&e.into()),
    }
}

/// GET /v1/tenants/{name}/usage — allocated vs measured use over time.
pub async fn usage(
    req: HttpRequest,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> HttpResponse {
    if let Err(r) = visible_tenant(&req, &st, &name) {
        return r;
    }
    match st
        .shared
        .scheduler
        .send(caldera_actors::protocol::scheduler::TenantUsage {
            tenant: name.to_string(),
        })
        .await
    {
        Ok(samples) => {
            let points: Vec<serde_json::Value> = samples
                .iter()
                .map(|s| serde_json::json!({"at": caldera_spec::time::rfc3339(s.at_ms), "at_ms": s.at_ms, "allocated": s.allocated, "used": s.used}))
                .collect();
            let current = samples
                .last()
                .map(|s| serde_json::json!({"allocated": s.allocated, "used": s.used}));
            envelope::ok(
                200,
                serde_json::json!({"tenant": *name, "current": current, "samples": points,
                "note": "used on simulated GPUs is the CPU use of the workload's process tree"}),
            )
        }
        Err(e) => envelope::err(&e.into()),
    }
}
