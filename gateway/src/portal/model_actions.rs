//! The portal's model-version actions: a service's hot swap (task page) and
//! the operator's retire (models page). Each is a form behind a confirmation
//! step that calls the same control-plane operation as its API route
//! (`POST /v1/tasks/{id}/model`, `POST /v1/models/{name}/versions/{v}/retire`),
//! so the rules, checks and errors are the API's.
use super::auth::{Form, Viewer};
use super::error::PortalError;
use super::layout::{age, csrf_field};
use super::respond::see_other;
use super::task_lookup::find;
use super::tasks::{task_href, url_part};
use crate::error::ApiError;
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_actors::control_plane::swap::SwapRequest;
use caldera_actors::model::view::VersionView;
use caldera_actors::views::TaskView;
use caldera_spec::{ModelRef, SwapProgress};
use maud::{html, Markup};

/// The swap form of a service's task page (a replica or a training task has none).
pub fn swap_form(viewer: &Viewer, t: &TaskView) -> Markup {
    if t.replicas.is_none() {
        return html! {};
    }
    let action = format!(
        "/tasks/{}/swap?tenant={}",
        url_part(&t.task_id),
        url_part(&t.tenant)
    );
    html! {
        details.confirm {
            summary #swap { "Swap model" }
            form method="post" action=(action) {
                (csrf_field(viewer))
                p { "Replica by replica, on the allocations it holds: with 2 or more replicas it never has zero ready replicas; 1 replica needs downtime allowed or room for one surge replica." }
                label { "model " input #swap-model name="model" type="text" placeholder="name:version" required; }
                " "
                label { input #swap-allow-downtime name="allow_downtime" type="checkbox" value="true"; " allow downtime" }
                " "
                label { input #swap-max-surge name="max_surge" type="checkbox" value="1"; " one surge replica" }
                " "
                button #swap-confirm type="submit" { "Yes, swap it" }
            }
        }
    }
}

/// A swap's progress: its phase and each replica's step.
pub fn swap_progress(s: &SwapProgress, now_ms: u64) -> Markup {
    // Replicas in containers: the image and digest each runs after its step.
    let images = s.replicas.iter().any(|r| r.image.is_some());
    html! {
        section #swap-progress data-phase=(s.phase.as_str()) {
            h2 { "Model swap " (s.from) " → " (s.to) }
            p { span class=(format!("state {}", s.phase.as_str())) { (s.phase.as_str()) }
                " · asked by " (s.requested_by) " · " (age(now_ms.saturating_sub(s.started_ms))) " ago"
                @if let Some(r) = &s.reason { br; span.field-error { (r) } } }
            table.swap {
                thead { tr { th { "replica" } th { "node" } th { "allocation" } th { "step" } th { "generation" }
                    @if images { th { "image" } } } }
                tbody { @for r in &s.replicas {
                    tr data-replica=(r.replica) {
                        td { (r.replica) @if r.surge { " (surge)" } }
                        td { (r.node) }
                        td { code { (r.allocation_id) } }
                        td { (r.step.as_str()) }
                        td { (r.generation) }
                        @if images { td.image { @if let Some(i) = &r.image { code { (i) } }
                            @if let Some(d) = &r.image_digest { br; small { code { (d) } } } } }
                    }
                } }
            }
        }
    }
}

/// The retire cell of a version row: its retire order, who still uses it,
/// and (for the operator, while it takes tasks) the retire form.
pub fn retire_cell(viewer: &Viewer, v: &VersionView) -> Markup {
    let action = format!(
        "/models/{}/versions/{}/retire",
        url_part(&v.name),
        url_part(&v.version)
    );
    html! {
        @if let Some(o) = &v.retire {
            span.note { "retire asked by " (o.by)
                @if let Some(r) = &o.replace_with { ", moving to " code { (r) } } }
            @if let Some(users) = &v.used_by { @for (tenant, tasks) in users {
                br; small { (tenant) ": " @for t in tasks.iter().take(10) { code { (t) } " " } }
            } }
        } @else if viewer.is_operator() && v.state != "retired" {
            details.confirm {
                summary.retire { "Retire" }
                form method="post" action=(action) {
                    (csrf_field(viewer))
                    label { "replace with " input.retire-replace name="replace_with" type="text" placeholder="name:version (optional)"; }
                    " "
                    button.danger.retire-confirm type="submit" { "Yes, retire it" }
                }
            }
        }
    }
}

/// POST /tasks/{id}/swap
#[utoipa::path(post, path = "/tasks/{id}/swap", tag = "portal", operation_id = "portal_swap",
    description = "Swaps a service's model version in place after its confirmation step (POST /v1/tasks/{id}/model), then shows the service with the swap's progress.",
    params(("id" = String, Path, description = "the service's id"),
        ("tenant" = Option<String>, Query, description = "the service's tenant")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "csrf, model, allow_downtime, max_surge"),
    responses(
        (status = 303, description = "the swap started (or no session): on to the service's page (or the login)"),
        (status = 400, description = "not a form, or a model not written name:version", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token: nothing changed", content_type = "text/html", body = String),
        (status = 404, description = "no such task (or another tenant's)", content_type = "text/html", body = String),
        (status = 409, description = "not a live service, a swap already running, or 1 replica without downtime allowed or room to surge", content_type = "text/html", body = String),
        (status = 422, description = "the version is not registered, not visible, or retiring/retired", content_type = "text/html", body = String),
    ))]
pub async fn swap(
    viewer: Viewer,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let form = Form::checked(viewer, &st, payload).await?;
    let service = find(&form.viewer, &st, &id, &q).await?;
    let req = SwapRequest {
        model: ModelRef::parse(form.field("model").unwrap_or(""), "model")
            .map_err(ApiError::from)?,
        allow_downtime: form.field("allow_downtime") == Some("true"),
        max_surge: u32::from(form.field("max_surge") == Some("1")),
    };
    crate::api::swap::swap(&st, &form.viewer.user(), &service, req).await?;
    let id = caldera_spec::local_id(&service.key);
    Ok(see_other(&task_href(id, &service.record.tenant)))
}

/// POST /models/{name}/versions/{version}/retire
#[utoipa::path(post, path = "/models/{name}/versions/{version}/retire", tag = "portal", operation_id = "portal_retire",
    description = "The operator retires a model version after its confirmation step (POST /v1/models/{name}/versions/{version}/retire), optionally moving its services to replace_with, then shows the models page.",
    params(("name" = String, Path, description = "the model"), ("version" = String, Path, description = "the version")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "csrf, replace_with"),
    responses(
        (status = 303, description = "retiring (or no session): on to the models page (or the login)"),
        (status = 400, description = "not a form", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token, or a tenant's session", content_type = "text/html", body = String),
        (status = 404, description = "no such version", content_type = "text/html", body = String),
        (status = 409, description = "retiring already with another replace_with", content_type = "text/html", body = String),
        (status = 422, description = "replace_with names no usable version", content_type = "text/html", body = String),
    ))]
pub async fn retire(
    viewer: Viewer,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let form = Form::checked(viewer, &st, payload).await?;
    let Some(op) = form.viewer.user().operator() else {
        return Err(PortalError::operator_only("retire a model version"));
    };
    let (name, version) = path.into_inner();
    let replace_with = form.field("replace_with").map(str::to_string);
    crate::api::models::retire(&st, &op, &name, &version, replace_with).await?;
    Ok(see_other("/models"))
}

#[cfg(test)]
mod swap_progress_tests {
    use super::swap_progress;
    use caldera_spec::{ModelRef, SwapPhase, SwapProgress, SwapReplica, SwapStep};

    fn swap(image: Option<&str>) -> SwapProgress {
        let m = |v: &str| ModelRef {
            name: "m".into(),
            version: v.into(),
        };
        SwapProgress {
            from: m("v3"),
            to: m("v4"),
            requested_by: "tenant a".into(),
            allow_downtime: false,
            max_surge: 0,
            phase: SwapPhase::Done,
            replicas: vec![SwapReplica {
                replica: "svc.r0".into(),
                allocation_id: "svc.r0.1".into(),
                node: "n1".into(),
                step: SwapStep::Done,
                generation: 1,
                since_ms: 0,
                surge: false,
                image: image.map(str::to_string),
                image_digest: image.map(|_| format!("sha256:{}", "ab".repeat(32))),
            }],
            reason: None,
            started_ms: 0,
            finished_ms: Some(1),
        }
    }

    #[test]
    fn a_swapped_replica_in_a_container_shows_its_image_and_digest() {
        let page = swap_progress(&swap(Some("registry.internal/app:2")), 1).into_string();
        assert!(page.contains("<th>image</th>"), "{page}");
        assert!(page.contains("registry.internal/app:2"), "{page}");
        assert!(
            page.contains(&format!("sha256:{}", "ab".repeat(32))),
            "{page}"
        );
        let plain = swap_progress(&swap(None), 1).into_string();
        assert!(!plain.contains("<th>image</th>"), "{plain}");
    }
}
