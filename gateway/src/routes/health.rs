//! Liveness and Prometheus metrics.
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_spec::Envelope;
use serde::Serialize;
use utoipa::ToSchema;

/// The process answers.
#[derive(Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: &'static str,
}

#[utoipa::path(get, path = "/healthz", tag = "health",
    description = "Liveness: no token needed, never refused for load.",
    responses((status = 200, description = "the process answers", body = Envelope<Health>)))]
pub async fn healthz() -> Reply<Health> {
    Reply::ok(Health { status: "ok" })
}

/// Prometheus text exposition of the scheduler's counters.
#[utoipa::path(get, path = "/metrics", tag = "health",
    description = "Prometheus text exposition (no token needed).",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String),
        (status = 500, description = "storage failed"),
        (status = 503, description = "a control-plane actor is not answering"),
    ))]
pub async fn metrics(st: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let s = st.cp.stats().await?;
    let body = format!(
        "# HELP caldera_queued_tasks Tasks waiting for room.\n# TYPE caldera_queued_tasks gauge\ncaldera_queued_tasks {}\n\
         # HELP caldera_allocations Live allocations in the ledger.\n# TYPE caldera_allocations gauge\ncaldera_allocations {}\n\
         # HELP caldera_healthy_nodes Nodes with a live agent session.\n# TYPE caldera_healthy_nodes gauge\ncaldera_healthy_nodes {}\n\
         # HELP caldera_live_tasks Tasks with a live TaskActor.\n# TYPE caldera_live_tasks gauge\ncaldera_live_tasks {}\n",
        s.queued, s.allocations, s.healthy_nodes, s.live_tasks
    ) + &refusals(&st.cp.node_refusals())
        + &rebuilds(&st.cp.actor_rebuilds())
        + &estimates(&super::stats::accuracy(&st).await?);
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body))
}

/// Start-estimate accuracy (`GET /v1/stats/estimates`): tasks measured, the
/// shares within 1 and 10 minutes of their first estimate, the median error.
fn estimates(a: &caldera_actors::control_plane::estimates::EstimateAccuracy) -> String {
    format!(
        "# HELP caldera_start_estimates_measured Tasks placed after waiting with a start estimate.\n\
         # TYPE caldera_start_estimates_measured gauge\ncaldera_start_estimates_measured {}\n\
         # HELP caldera_start_estimates_within_ratio Share of them placed within the window of their first estimate.\n\
         # TYPE caldera_start_estimates_within_ratio gauge\n\
         caldera_start_estimates_within_ratio{{window=\"1m\"}} {}\n\
         caldera_start_estimates_within_ratio{{window=\"10m\"}} {}\n\
         # HELP caldera_start_estimate_median_abs_error_seconds Median of |placed - first estimate|.\n\
         # TYPE caldera_start_estimate_median_abs_error_seconds gauge\n\
         caldera_start_estimate_median_abs_error_seconds {}\n",
        a.tasks, a.within_1m, a.within_10m, a.median_abs_error_s
    )
}

/// `caldera_node_reports_refused_total{node,reason}`: what nodes said that was
/// refused (not their allocation, stale epoch, wrong secret...).
fn refusals(counts: &[(String, &'static str, u64)]) -> String {
    let mut out = String::from(
        "# HELP caldera_node_reports_refused_total Hellos, events and reports of nodes that were refused.\n\
         # TYPE caldera_node_reports_refused_total counter\n",
    );
    for (node, reason, n) in counts {
        out.push_str(&format!(
            "caldera_node_reports_refused_total{{node=\"{}\",reason=\"{reason}\"}} {n}\n",
            label(node)
        ));
    }
    out
}

/// `caldera_actor_rebuilds_total{kind}`: actors stopped (a failed commit, a
/// lost answer) and rebuilt from storage by their supervisor.
fn rebuilds(counts: &[(&'static str, u64)]) -> String {
    let mut out = String::from(
        "# HELP caldera_actor_rebuilds_total Actors stopped and rebuilt from storage by their supervisor.\n\
         # TYPE caldera_actor_rebuilds_total counter\n",
    );
    for (kind, n) in counts {
        out.push_str(&format!(
            "caldera_actor_rebuilds_total{{kind=\"{kind}\"}} {n}\n"
        ));
    }
    out
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
