//! Liveness and the Prometheus scrape.
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_spec::codes;
pub use caldera_spec::views::Health;
use caldera_spec::Envelope;

#[utoipa::path(get, path = "/healthz", tag = "health",
    description = "Liveness: no token needed, never refused for load.",
    responses((status = 200, description = "the process answers", body = Envelope<Health>)))]
pub async fn healthz() -> Reply<Health> {
    Reply::ok(Health {
        status: "ok".into(),
    })
}

/// GET /metrics: the OpenMetrics exposition (see [`crate::metrics`]). Open
/// to anyone who reaches the port, as a scrape target is: it names nodes
/// and tenants, never tasks or tokens.
#[utoipa::path(get, path = "/metrics", tag = "health",
    description = "The OpenMetrics exposition of the pool, nodes, GPUs, tenants, queue and latencies (no token needed).",
    responses(
        (status = 200, description = "OpenMetrics text 1.0.0", content_type = "application/openmetrics-text", body = String),
        (status = 500, description = "storage failed"),
        (status = 503, description = "a control-plane actor is not answering, or the exposition could not be encoded"),
    ))]
pub async fn metrics(st: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let scrape = st.cp.scrape().await?;
    let accuracy = super::stats::accuracy(&st).await?;
    let body = st.metrics.render(&scrape, &accuracy).map_err(|_| {
        ApiError::new(
            &codes::UNAVAILABLE,
            "the metrics could not be encoded; retry",
        )
    })?;
    Ok(HttpResponse::Ok()
        .content_type(crate::metrics::CONTENT_TYPE)
        .body(body))
}
