//! `GET /submit`, `POST /submit`, `POST /submit/dry-run`: the request form.
//! The fields (or the JSON editor, when it is filled in) become the task
//! spec, checked by the API's own validator (`caldera_spec::validate`) and
//! submitted through the same API call as `POST /v1/tasks`
//! (`api::tasks::submit`); an error is shown at the input it names.
use super::auth::{Form, Viewer};
use super::dry_run;
use super::error::PortalError;
use super::layout::{csrf_field, page, Nav};
use super::respond::{see_other, Render};
use super::spec_form::{field, spec_json, Kind, FIELDS};
use crate::api::tasks as api;
use crate::routes::Query;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use caldera_spec::TaskSpec;
use maud::{html, Markup};
use std::collections::HashMap;

/// What the form shows again after a try: the values typed, an error at a
/// field (or for the whole spec: `.`), and a dry run's answer.
#[derive(Default)]
struct Shown {
    values: HashMap<String, String>,
    error: Option<(String, String)>,
    dry_run: Option<Markup>,
    /// The request would preempt running work: the form asks to confirm.
    confirm_preempt: bool,
}

impl Shown {
    fn error_at(&self, path: &str) -> &str {
        match &self.error {
            Some((f, msg)) if f == path => msg,
            _ => "",
        }
    }

    /// The error for the spec as a whole, or for a field with no input.
    fn spec_error(&self) -> &str {
        match &self.error {
            Some((f, msg)) if field(f).is_none() && f != "tenant" => msg,
            _ => "",
        }
    }
}

fn input(f: &super::spec_form::Field, shown: &Shown) -> Markup {
    let value = shown.values.get(f.path).map(String::as_str).unwrap_or("");
    let err = shown.error_at(f.path);
    let id = format!("field-{}", f.path);
    html! {
        div.field.invalid[!err.is_empty()] {
            label for=(id) { (f.label) }
            @match f.kind {
                Kind::Choice(options) => {
                    select id=(id) name=(f.path) {
                        @for o in options {
                            option value=(o) selected[value == *o] { (o) }
                        }
                    }
                }
                _ => { input id=(id) name=(f.path) value=(value) placeholder=(f.hint); }
            }
            p.field-error id=(format!("error-{}", f.path)) data-field-error=(f.path) { (err) }
        }
    }
}

fn form(viewer: &Viewer, shown: &Shown) -> Markup {
    html! {
        form #submit-form method="post" action="/submit" {
            (csrf_field(viewer))
            @if viewer.is_operator() {
                div.field.invalid[!shown.error_at("tenant").is_empty()] {
                    label for="field-tenant" { "Tenant (the operator submits for one)" }
                    input #field-tenant name="tenant" value=(shown.values.get("tenant").map(String::as_str).unwrap_or(""));
                    p.field-error #error-tenant data-field-error="tenant" { (shown.error_at("tenant")) }
                }
            }
            div.spec-form {
                @for f in FIELDS { (input(f, shown)) }
            }
            h2 { "Or the spec as JSON" }
            p.note { "When this is filled in it is the request, and the fields above are ignored." }
            textarea #spec-json name="spec_json" spellcheck="false" { (shown.values.get("spec_json").map(String::as_str).unwrap_or("")) }
            p.field-error #error-spec data-field-error="." { (shown.spec_error()) }
            @if shown.confirm_preempt {
                input type="hidden" name="confirm_preempt" value="yes";
            }
            p {
                @if shown.confirm_preempt {
                    button #submit-task.danger type="submit" { "Submit anyway (preempts the tasks above)" }
                } @else {
                    button #submit-task type="submit" { "Submit" }
                }
                " "
                button #dry-run.secondary type="submit" formaction="/submit/dry-run" { "Dry run" }
            }
        }
        div #dry-run-result { @if let Some(d) = &shown.dry_run { (d) } }
    }
}

fn render_form(
    render: &Render,
    viewer: &Viewer,
    status: StatusCode,
    shown: &Shown,
) -> HttpResponse {
    let whole = page(
        viewer,
        Nav::Submit,
        "Submit a request",
        form(viewer, shown),
        html! {},
    );
    render.with(HttpResponse::build(status), whole)
}

/// GET /submit
#[utoipa::path(get, path = "/submit", tag = "portal", operation_id = "portal_submit_page",
    description = "The portal's request form: the seed's fields, or the spec as JSON.",
    responses(
        (status = 200, description = "the form", content_type = "text/html", body = String),
        (status = 303, description = "no session: on to the login page"),
        (status = 401, description = "fragment=live without a session (the script then goes to the login)", content_type = "text/html", body = String),
    ))]
pub async fn page_handler(viewer: Viewer, q: Query) -> HttpResponse {
    let render = Render::start(&q);
    render_form(&render, &viewer, StatusCode::OK, &Shown::default())
}

/// The spec of a sent form: the JSON editor's when filled in (what the user
/// typed is JSON), else the fields', each set at its path in the spec.
fn spec_of(form: &Form) -> Result<TaskSpec, caldera_spec::SpecError> {
    match form.field("spec_json") {
        Some(json) => caldera_spec::parse_task_spec(json.as_bytes()),
        None => {
            caldera_spec::validate::task_spec_from_value(spec_json(|p| form.fields.get(p).cloned()))
        }
    }
}

/// The tenant the form acts for: a tenant's own; the operator's `tenant` field.
fn tenant_of(form: &Form) -> Result<String, (String, String)> {
    match form.viewer.tenant() {
        Some(t) => Ok(t.to_string()),
        None => form.field("tenant").map(str::to_string).ok_or_else(|| {
            (
                "tenant".to_string(),
                "the operator submits on behalf of a tenant: name it".to_string(),
            )
        }),
    }
}

/// Reads and checks a sent form: the spec and tenant, or the form again
/// (already rendered) with the error at its field.
async fn checked(
    viewer: Viewer,
    st: &AppState,
    payload: web::Payload,
    render: &Render,
) -> Result<Result<(Form, String, TaskSpec), HttpResponse>, PortalError> {
    let form = Form::checked(viewer, st, payload).await?;
    let refused = match (spec_of(&form), tenant_of(&form)) {
        (Ok(spec), Ok(t)) => return Ok(Ok((form, t, spec))),
        (Err(e), _) => (
            StatusCode::from_u16(e.kind.error_code().http_status)
                .unwrap_or(StatusCode::BAD_REQUEST),
            e.field,
            e.message,
        ),
        (Ok(_), Err((f, msg))) => (StatusCode::BAD_REQUEST, f, msg),
    };
    let (status, f, msg) = refused;
    let (viewer, s) = shown(form, Some((f, msg)), None);
    Ok(Err(render_form(render, &viewer, status, &s)))
}

fn shown(form: Form, error: Option<(String, String)>, dry_run: Option<Markup>) -> (Viewer, Shown) {
    let Form { viewer, fields } = form;
    let values = fields.into_iter().filter(|(k, _)| k != "csrf").collect();
    (
        viewer,
        Shown {
            values,
            error,
            dry_run,
            confirm_preempt: false,
        },
    )
}

/// POST /submit
#[utoipa::path(post, path = "/submit", tag = "portal", operation_id = "portal_submit",
    description = "Submits the form's request as POST /v1/tasks does, then shows the task; a refused one is the form again with the error at its field. A request that would preempt running work is not submitted until the form is sent again with confirm_preempt=yes: first the form comes back with the dry run's warning naming the tasks it would stop.",
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "csrf, the spec's fields by dotted path (resources.gpu.count, …) or spec_json; the operator: tenant; confirm_preempt=yes once its preemption warning was shown"),
    responses(
        (status = 303, description = "submitted: on to the task's page"),
        (status = 200, description = "not submitted: it would preempt running work; the form again with the warning and a button to submit anyway", content_type = "text/html", body = String),
        (status = 400, description = "the form again, the error at the field it names", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token: nothing was submitted", content_type = "text/html", body = String),
        (status = 404, description = "the form again: no such tenant", content_type = "text/html", body = String),
        (status = 409, description = "the form again: the task_id is taken by a different spec", content_type = "text/html", body = String),
        (status = 422, description = "the form again: no node could ever hold it, or a model version it may not use", content_type = "text/html", body = String),
    ))]
pub async fn submit(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let (form, tenant, spec) = match checked(viewer, &st, payload, &render).await? {
        Ok(ok) => ok,
        Err(form_again) => return Ok(form_again),
    };
    // A request that would stop running work is shown as such first: the
    // user confirms it with the warning in front of them.
    if form.field("confirm_preempt").is_none() {
        let user = form.viewer.user();
        if let Ok(v) = dry_run::answer(&st, &user, &tenant, spec.clone()).await {
            if dry_run::would_preempt(&v) {
                let (viewer, mut s) = shown(form, None, Some(dry_run::render(Ok(v))));
                s.confirm_preempt = true;
                return Ok(render_form(&render, &viewer, StatusCode::OK, &s));
            }
        }
    }
    let id = caldera_spec::local_id(&spec.task_id).to_string();
    match api::submit(&st, &form.viewer.user(), Some(&tenant), spec).await {
        Ok(_) => Ok(see_other(&format!(
            "/tasks/{}?tenant={}",
            super::tasks::url_part(&id),
            super::tasks::url_part(&tenant)
        ))),
        Err(e) => {
            let status =
                StatusCode::from_u16(e.code().http_status).unwrap_or(StatusCode::BAD_REQUEST);
            let at = e.field().unwrap_or(".").to_string();
            let (viewer, s) = shown(
                form,
                Some((at, format!("{} ({})", e.message(), e.code().name))),
                None,
            );
            Ok(render_form(&render, &viewer, status, &s))
        }
    }
}

/// POST /submit/dry-run
#[utoipa::path(post, path = "/submit/dry-run", tag = "portal", operation_id = "portal_dry_run",
    description = "The form again with where its request would go now, or why not and its estimated start (POST /v1/tasks?dry_run=true); nothing is submitted.",
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "the same form as POST /submit"),
    responses(
        (status = 200, description = "the form with the dry run's answer (or the API's error) below it", content_type = "text/html", body = String),
        (status = 303, description = "no session: on to the login page"),
        (status = 401, description = "fragment=live without a session (the script then goes to the login)", content_type = "text/html", body = String),
        (status = 400, description = "the form again, the error at the field it names", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token", content_type = "text/html", body = String),
    ))]
pub async fn dry_run_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let (form, tenant, spec) = match checked(viewer, &st, payload, &render).await? {
        Ok(ok) => ok,
        Err(form_again) => return Ok(form_again),
    };
    let answer = dry_run::answer(&st, &form.viewer.user(), &tenant, spec).await;
    let (viewer, s) = shown(form, None, Some(dry_run::render(answer)));
    Ok(render_form(&render, &viewer, StatusCode::OK, &s))
}
