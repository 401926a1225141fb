//! Model versions: register (the operator; a tenant only where
//! `tenants-may-register-models` allows, its own), list, show, prewarm, pin,
//! deprecate. A version the operator registered is visible to every tenant;
//! a tenant's own only to it and the operator (to others it is a 404).
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
use caldera_spec::{SpecError, SpecErrorKind as K};
use serde::Deserialize;
use serde_json::{json, Value};

/// POST /v1/models — 201 new, 200 the identical registration, 409 another
/// body for the same `name:version` (versions are immutable).
pub async fn register(
    user: User,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<VersionView>, ApiError> {
    let owner = user.tenant().map(str::to_string);
    if owner.is_some() && !st.cp.tenants_may_register_models() {
        return Err(ApiError::forbidden(
            "only the operator registers model versions here (tenants-may-register-models is off)",
        ));
    }
    let body = body::read(payload, st.body_limit).await?;
    let spec = caldera_spec::model::parse_model_version_spec(&body)?;
    let (view, created) = st.cp.register_model(owner, spec).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(Reply::with_status(status, view))
}

/// GET /v1/models
pub async fn list(user: User, st: web::Data<AppState>) -> Result<Reply<Vec<ModelView>>, ApiError> {
    Ok(Reply::ok(st.cp.models(user.tenant()).await))
}

/// GET /v1/models/{name}
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<ModelView>, ApiError> {
    match st.cp.model(&name, user.tenant()).await {
        Some(m) => Ok(Reply::ok(m)),
        None => Err(ApiError::not_found("model", &name)),
    }
}

/// GET /v1/models/{name}/versions/{version}
pub async fn version(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    Ok(Reply::ok(
        st.cp.model_version(&name, &version, user.tenant()).await?,
    ))
}

/// A change of a version: the operator, or the tenant that registered it.
async fn may_change(user: &User, st: &AppState, name: &str, version: &str) -> Result<(), ApiError> {
    let owner = st.cp.model_owner(name, version, user.tenant()).await?;
    match (user.tenant(), owner) {
        (None, _) => Ok(()),
        (Some(t), Some(o)) if t == o => Ok(()),
        _ => Err(ApiError::forbidden(
            "only the operator changes a version the operator registered",
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrewarmBody {
    #[serde(default)]
    nodes: Option<Vec<String>>,
    #[serde(default)]
    count: Option<u32>,
    #[serde(default)]
    pin: bool,
}

/// What a prewarm body asks for: `nodes` or `count`, exactly one.
fn prewarm_target(b: PrewarmBody) -> Result<(PrewarmTarget, bool), SpecError> {
    match (b.nodes, b.count) {
        (Some(n), None) if !n.is_empty() => Ok((PrewarmTarget::Nodes(n), b.pin)),
        (None, Some(c)) if c > 0 => Ok((PrewarmTarget::Count(c), b.pin)),
        (Some(_), None) => Err(SpecError::new(
            K::OutOfRange,
            "nodes",
            "name at least one node",
        )),
        (None, Some(_)) => Err(SpecError::new(
            K::OutOfRange,
            "count",
            "count must be at least 1",
        )),
        _ => Err(SpecError::new(
            K::MissingField,
            "nodes",
            "give either \"nodes\": [names] or \"count\": N",
        )),
    }
}

/// POST /v1/models/{name}/versions/{version}/prewarm {"nodes":[..]} | {"count":N}, "pin"?
pub async fn prewarm(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<Reply<Value>, ApiError> {
    let (name, version) = path.into_inner();
    may_change(&user, &st, &name, &version).await?;
    let body = body::read(payload, st.body_limit).await?;
    let (target, pin) = prewarm_target(parse_json::<PrewarmBody>(&body)?)?;
    let nodes = st
        .cp
        .prewarm_model(&name, &version, user.tenant(), target, pin)
        .await?;
    Ok(Reply::with_status(
        StatusCode::ACCEPTED,
        json!({ "nodes": nodes }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PinBody {
    pinned: bool,
}

/// PUT /v1/models/{name}/versions/{version}/pin {"pinned": bool}
pub async fn pin(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    may_change(&user, &st, &name, &version).await?;
    let body = body::read(payload, st.body_limit).await?;
    let b: PinBody = parse_json(&body)?;
    Ok(Reply::ok(
        st.cp
            .pin_model(&name, &version, user.tenant(), b.pinned)
            .await?,
    ))
}

/// POST /v1/models/{name}/versions/{version}/deprecate
pub async fn deprecate(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    may_change(&user, &st, &name, &version).await?;
    Ok(Reply::ok(
        st.cp
            .deprecate_model(&name, &version, user.tenant())
            .await?,
    ))
}
