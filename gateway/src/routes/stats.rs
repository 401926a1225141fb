//! `GET /v1/stats/estimates`: how close first start estimates came to the
//! real starts. The figures are a scan of every task
//! record, so `/metrics` reuses one for [`FRESH_FOR`] instead of scanning on
//! every scrape.
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::control_plane::estimates::EstimateAccuracy;
use caldera_spec::Envelope;
use std::time::{Duration, Instant};

/// How long a computed accuracy is served again.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// The accuracy, computed afresh when the cached one is older than [`FRESH_FOR`].
pub async fn accuracy(st: &AppState) -> Result<EstimateAccuracy, ApiError> {
    let cached = st.estimates.slot().clone();
    if let Some((_, a)) = cached.filter(|(at, _)| at.elapsed() < FRESH_FOR) {
        return Ok(a);
    }
    let a = st.cp.estimate_accuracy().await?;
    *st.estimates.slot() = Some((Instant::now(), a.clone()));
    Ok(a)
}

/// GET /v1/stats/estimates (any user: cluster-wide shares, no task named).
#[utoipa::path(get, path = "/v1/stats/estimates", tag = "stats",
    description = "How close first start estimates came to the real starts.",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "start-estimate accuracy", body = Envelope<EstimateAccuracy>)))]
pub async fn estimates(
    _: User,
    st: web::Data<AppState>,
) -> Result<Reply<EstimateAccuracy>, ApiError> {
    Ok(Reply::ok(accuracy(&st).await?))
}
