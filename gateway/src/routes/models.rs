//! Model versions: register (the operator; a tenant only where
//! `tenants-may-register-models` allows, its own), list, show, prewarm, pin,
//! deprecate. A version the operator registered is visible to every tenant;
//! a tenant's own only to it and the operator (to others it is a 404).
use crate::api::models as api;
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::web;
use caldera_actors::control_plane::{ModelView, PrewarmTarget};
use caldera_actors::model::view::VersionView;
use caldera_spec::validate::parse_json;
pub use caldera_spec::views::Prewarmed;
use caldera_spec::{Envelope, ModelVersionSpec, SpecError};
use serde::Deserialize;
use utoipa::ToSchema;

/// POST /v1/models — 201 new, 200 the identical registration, 409 another
/// body for the same `name:version` (versions are immutable; names are
/// scoped to their registrant, so a 409 never tells of another tenant's).
#[utoipa::path(post, path = "/v1/models", tag = "models",
    description = "Registers a model version (the operator; a tenant where tenants-may-register-models allows): its weights' uri, size and sha256, or `from_task`: a task's checkpoint file (default: the latest it reported; `path`: another file in that directory), whose size and sha256 the control plane computes; its uri is `file://<path>`, so the checkpoint directory must be on storage every node reads at the same path.",
    request_body = RegisterBody,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the identical registration exists", body = Envelope<VersionView>),
        (status = 201, description = "registered", body = Envelope<VersionView>),
        (status = 400, description = "the body is not a model version (the field is named)"),
        (status = 403, description = "tenants may not register versions here, or the name is not the caller's (`model_name_reserved`, field `name`: a tenant's names are @TENANT.MODEL, names without @ the operator's)"),
        (status = 404, description = "from_task: no such task"),
        (status = 409, description = "another body for the same name:version, or from_task: the task has no checkpoint yet (`no_checkpoint`)"),
        (status = 422, description = "the weights' uri is not an origin the caller may use (`origin_not_allowed`, field `weights.uri`: tenant-model-origins, operator-model-origins), or from_task: the file is not readable by the tenant, passes through a symbolic link or is not in the task's checkpoint directory (`checkpoint_unreadable`, field `path`), or the task's tree is not the tenant's own (`checkpoint_untrusted`, field `from_task`)"),
    ))]
pub async fn register(
    user: User,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<VersionView>, ApiError> {
    // Whether the caller may register at all is settled before the body is read.
    api::may_register(&st, &user)?;
    let body = body::read(payload, st.body_limit).await?;
    let (view, created) = api::register(&st, &user, registration(&body)?).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(Reply::with_status(status, view))
}

/// A registration body: the weights, or a task whose checkpoint they are.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // the schema of the two bodies; each is parsed on its own
pub enum RegisterBody {
    Weights(ModelVersionSpec),
    FromTask(FromTaskBody),
}

/// Register a task's checkpoint file as `name:version`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FromTaskBody {
    name: String,
    version: String,
    /// The task's id (the tenant's own).
    from_task: String,
    /// A file in the task's checkpoint directory; default: its latest checkpoint.
    #[serde(default)]
    path: Option<String>,
    /// The task's tenant: required with the operator token, a tenant's own otherwise.
    #[serde(default)]
    tenant: Option<String>,
}

/// What a registration `body` asks for: a task's checkpoint when it names
/// `from_task`, else the weights.
fn registration(body: &[u8]) -> Result<api::Registration, ApiError> {
    let names_task = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .is_some_and(|v| v.get("from_task").is_some());
    if !names_task {
        let spec = caldera_spec::model::parse_model_version_spec(body)?;
        return Ok(api::Registration::Weights(spec));
    }
    // Name and version are validated with the spec they become.
    let b: FromTaskBody = parse_json(body)?;
    Ok(api::Registration::FromTask(api::CheckpointOf {
        name: b.name,
        version: b.version,
        task_id: b.from_task,
        path: b.path,
        tenant: b.tenant,
    }))
}

/// GET /v1/models
#[utoipa::path(get, path = "/v1/models", tag = "models",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "every model the caller may see", body = Envelope<Vec<ModelView>>)))]
pub async fn list(user: User, st: web::Data<AppState>) -> Result<Reply<Vec<ModelView>>, ApiError> {
    Ok(Reply::ok(api::list(&st, &user).await))
}

/// GET /v1/models/{name}
#[utoipa::path(get, path = "/v1/models/{name}", tag = "models",
    params(("name" = String, Path, description = "the model")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the model's versions", body = Envelope<ModelView>),
        (status = 404, description = "no such model (or none the caller may see)"),
    ))]
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<ModelView>, ApiError> {
    Ok(Reply::ok(api::get(&st, &user, &name).await?))
}

/// GET /v1/models/{name}/versions/{version}
#[utoipa::path(get, path = "/v1/models/{name}/versions/{version}", tag = "models",
    params(("name" = String, Path, description = "the model"), ("version" = String, Path, description = "the version")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the version", body = Envelope<VersionView>),
        (status = 404, description = "no such version (or the caller may not see it)"),
    ))]
pub async fn version(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    Ok(Reply::ok(api::version(&st, &user, &name, &version).await?))
}

/// `nodes` or `count`, exactly one; `pin` keeps the copies from eviction.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrewarmBody {
    #[serde(default)]
    nodes: Option<Vec<String>>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    pin: bool,
}

/// What a prewarm body asks for: `nodes` or `count`, exactly one.
fn prewarm_target(b: PrewarmBody) -> Result<(PrewarmTarget, bool), SpecError> {
    Ok((api::nodes_or_count(b.nodes, b.count)?, b.pin))
}

/// POST /v1/models/{name}/versions/{version}/prewarm {"nodes":[..]} | {"count":N}, "pin"?
#[utoipa::path(post, path = "/v1/models/{name}/versions/{version}/prewarm", tag = "models",
    description = "Fetches the version's weights onto nodes ahead of use.",
    params(("name" = String, Path, description = "the model"), ("version" = String, Path, description = "the version")),
    request_body = PrewarmBody,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 202, description = "the nodes it was sent to", body = Envelope<Prewarmed>),
        (status = 400, description = "neither or both of nodes and count, or a bad value"),
        (status = 403, description = "only the operator changes a version the operator registered"),
        (status = 404, description = "no such version, or an unknown node"),
        (status = 409, description = "the version is retired, or no node can take it"),
        (status = 422, description = "the version cannot be placed on the nodes named"),
    ))]
pub async fn prewarm(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<Reply<Prewarmed>, ApiError> {
    let (name, version) = path.into_inner();
    let v = api::changeable(&st, &user, &name, &version).await?;
    let body = body::read(payload, st.body_limit).await?;
    let (target, pin) = prewarm_target(parse_json::<PrewarmBody>(&body)?)?;
    let nodes = api::prewarm(&st, &user, &v, target, pin).await?;
    Ok(Reply::with_status(
        StatusCode::ACCEPTED,
        Prewarmed { nodes },
    ))
}

/// Pinned copies are never evicted from the nodes' caches.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PinBody {
    pinned: bool,
}

/// PUT /v1/models/{name}/versions/{version}/pin {"pinned": bool}
#[utoipa::path(put, path = "/v1/models/{name}/versions/{version}/pin", tag = "models",
    params(("name" = String, Path, description = "the model"), ("version" = String, Path, description = "the version")),
    request_body = PinBody,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the version, pinned or not", body = Envelope<VersionView>),
        (status = 400, description = "the body is not {\"pinned\": bool}"),
        (status = 403, description = "only the operator changes a version the operator registered"),
        (status = 404, description = "no such version (or the caller may not see it)"),
        (status = 409, description = "the version is retired"),
    ))]
pub async fn pin(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    let v = api::changeable(&st, &user, &name, &version).await?;
    let body = body::read(payload, st.body_limit).await?;
    let b: PinBody = parse_json(&body)?;
    Ok(Reply::ok(api::pin(&st, &user, &v, b.pinned).await?))
}

/// POST /v1/models/{name}/versions/{version}/deprecate
#[utoipa::path(post, path = "/v1/models/{name}/versions/{version}/deprecate", tag = "models",
    description = "Marks the version deprecated: it still serves and new tasks may name it, but each submission that does succeeds with a warning (`data.warnings` of the `POST /v1/tasks` answer). Retire it to refuse new tasks.",
    params(("name" = String, Path, description = "the model"), ("version" = String, Path, description = "the version")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the version, deprecated", body = Envelope<VersionView>),
        (status = 403, description = "only the operator changes a version the operator registered"),
        (status = 404, description = "no such version (or the caller may not see it)"),
        (status = 409, description = "the version is retiring or retired already"),
    ))]
pub async fn deprecate(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    let v = api::changeable(&st, &user, &name, &version).await?;
    Ok(Reply::ok(api::deprecate(&st, &user, &v).await?))
}
