//! Liveness and the Prometheus scrape.
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_spec::codes;

pub async fn healthz() -> Reply<serde_json::Value> {
    Reply::ok(serde_json::json!({"status": "ok"}))
}

/// GET /metrics: the OpenMetrics exposition (see [`crate::metrics`]). Open
/// to anyone who reaches the port, as a scrape target is: it names nodes
/// and tenants, never tasks or tokens.
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
