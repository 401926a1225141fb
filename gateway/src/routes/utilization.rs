//! GET /v1/utilization: capacity, allocated and measured use per dimension.
use crate::auth;
use crate::envelope;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::protocol::scheduler::QueryUtilization;
use caldera_actors::tokens::Principal;

pub async fn get(req: HttpRequest, st: web::Data<AppState>) -> HttpResponse {
    let p = match auth::user(&req, &st) {
        Ok(p) => p,
        Err(r) => return r,
    };
    match st.shared.scheduler.send(QueryUtilization).await {
        Ok(mut u) => {
            if let Principal::Tenant(t) = &p {
                // A tenant sees the pool, but only its own line of the per-tenant table.
                u.by_tenant.retain(|k| &k.key == t);
            }
            envelope::ok(200, u)
        }
        Err(e) => envelope::err(&e.into()),
    }
}
