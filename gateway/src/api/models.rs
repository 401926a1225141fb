//! Model versions: register (the operator; a tenant only where
//! `tenants-may-register-models` allows, its own), list, show, prewarm,
//! pin, deprecate, retire. A version the operator registered is visible to
//! every tenant; a tenant's own only to it and the operator (to others it
//! is a 404).
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use caldera_actors::control_plane::{FromTask, ModelView, PrewarmTarget};
use caldera_actors::model::view::VersionView;
use caldera_spec::{ModelVersionSpec, SpecError, SpecErrorKind as K};

/// What a registration names: the weights, or a task whose checkpoint they are.
pub enum Registration {
    Weights(ModelVersionSpec),
    FromTask(CheckpointOf),
}

/// A task's checkpoint file to register as `name:version`.
pub struct CheckpointOf {
    pub name: String,
    pub version: String,
    /// The task's id (the tenant's own).
    pub task_id: String,
    /// A file in the task's checkpoint directory; `None`: its latest checkpoint.
    pub path: Option<String>,
    /// The task's tenant: the operator must name it; a tenant token its own or none.
    pub tenant: Option<String>,
}

/// Whether the caller may register versions at all: the operator, or a
/// tenant where `tenants-may-register-models` is on.
pub fn may_register(st: &AppState, caller: &User) -> Result<(), ApiError> {
    if caller.tenant().is_some() && !st.cp.tenants_may_register_models() {
        return Err(ApiError::forbidden(
            "only the operator registers model versions here (tenants-may-register-models is off)",
        ));
    }
    Ok(())
}

/// Registers a version in the caller's name: the version, and whether it
/// is new (`false`: the identical registration existed).
pub async fn register(
    st: &AppState,
    caller: &User,
    what: Registration,
) -> Result<(VersionView, bool), ApiError> {
    may_register(st, caller)?;
    let owner = caller.tenant().map(str::to_string);
    Ok(match what {
        Registration::Weights(spec) => st.cp.register_model(owner, spec).await?,
        Registration::FromTask(c) => {
            let from = from_task(caller, c)?;
            st.cp.register_from_task(owner, from).await?
        }
    })
}

/// The checkpoint's task, in the tenant the caller may act for.
fn from_task(caller: &User, c: CheckpointOf) -> Result<FromTask, ApiError> {
    let tenant = match (caller.tenant(), c.tenant) {
        (Some(t), None) => t.to_string(),
        (Some(t), Some(asked)) if asked == t => asked,
        (Some(_), Some(_)) => {
            return Err(ApiError::forbidden(
                "a tenant token registers from its own tasks only",
            ))
        }
        (None, Some(t)) => t,
        (None, None) => {
            return Err(SpecError::new(
                K::MissingField,
                "tenant",
                "the operator names the task's tenant: add \"tenant\": NAME",
            )
            .into())
        }
    };
    Ok(FromTask {
        name: c.name,
        version: c.version,
        tenant,
        task_id: c.task_id,
        path: c.path,
    })
}

/// Every model the caller may see.
pub async fn list(st: &AppState, caller: &User) -> Vec<ModelView> {
    st.cp.models(caller.tenant()).await
}

/// Model `name` with the versions the caller may see.
pub async fn get(st: &AppState, caller: &User, name: &str) -> Result<ModelView, ApiError> {
    st.cp
        .model(name, caller.tenant())
        .await
        .ok_or_else(|| ApiError::not_found("model", name))
}

/// Version `name:version` if the caller may see it.
pub async fn version(
    st: &AppState,
    caller: &User,
    name: &str,
    version: &str,
) -> Result<VersionView, ApiError> {
    Ok(st.cp.model_version(name, version, caller.tenant()).await?)
}

/// A version the caller may change: made only by [`changeable`], so
/// holding one means the check passed.
pub struct ChangeableVersion {
    pub name: String,
    pub version: String,
}

/// `name:version` if the caller may change it: the operator, or the tenant
/// that registered it.
pub async fn changeable(
    st: &AppState,
    caller: &User,
    name: &str,
    version: &str,
) -> Result<ChangeableVersion, ApiError> {
    let owner = st.cp.model_owner(name, version, caller.tenant()).await?;
    match (caller.tenant(), owner) {
        (None, _) => {}
        (Some(t), Some(o)) if t == o => {}
        _ => {
            return Err(ApiError::forbidden(
                "only the operator changes a version the operator registered",
            ))
        }
    }
    Ok(ChangeableVersion {
        name: name.to_string(),
        version: version.to_string(),
    })
}

/// `nodes` (at least one) or `count` (at least 1), exactly one of them: how
/// a prewarm or a pre-pull names the nodes it goes to.
pub fn nodes_or_count(
    nodes: Option<Vec<String>>,
    count: Option<u32>,
) -> Result<PrewarmTarget, SpecError> {
    match (nodes, count) {
        (Some(n), None) if !n.is_empty() => Ok(PrewarmTarget::Nodes(n)),
        (None, Some(c)) if c > 0 => Ok(PrewarmTarget::Count(c)),
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

/// Fetches the version's weights onto `target`'s nodes (`pin`: kept from
/// eviction); the nodes it was sent to.
pub async fn prewarm(
    st: &AppState,
    caller: &User,
    v: &ChangeableVersion,
    target: PrewarmTarget,
    pin: bool,
) -> Result<Vec<String>, ApiError> {
    Ok(st
        .cp
        .prewarm_model(&v.name, &v.version, caller.tenant(), target, pin)
        .await?)
}

/// Pins the version's copies (or lets them be evicted again).
pub async fn pin(
    st: &AppState,
    caller: &User,
    v: &ChangeableVersion,
    pinned: bool,
) -> Result<VersionView, ApiError> {
    Ok(st
        .cp
        .pin_model(&v.name, &v.version, caller.tenant(), pinned)
        .await?)
}

/// Marks the version deprecated: it still serves, with a warning to each
/// submission that names it.
pub async fn deprecate(
    st: &AppState,
    caller: &User,
    v: &ChangeableVersion,
) -> Result<VersionView, ApiError> {
    Ok(st
        .cp
        .deprecate_model(&v.name, &v.version, caller.tenant())
        .await?)
}

/// The operator retires `name:version`, moving the services still on it
/// to `replace_with` when one is named.
pub async fn retire(
    st: &AppState,
    _: &Operator,
    name: &str,
    version: &str,
    replace_with: Option<String>,
) -> Result<VersionView, ApiError> {
    Ok(st
        .cp
        .retire_model(name, version, None, replace_with)
        .await?)
}
