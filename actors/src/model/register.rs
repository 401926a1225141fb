//! Registering versions (the Cluster creates their actors, as it does every
//! entity's), bringing them back at boot, and the check a task's `model`
//! passes at submission.
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use crate::protocol::cluster::RegisterModel;
use crate::protocol::scheduler::ModelWeightsKnown;
use crate::shared::Shared;
use caldera_scheduling::placement::WeightsNeed;
use caldera_spec::{Event, EventKind, ModelRef, ModelState, ModelVersionRecord};
use caldera_storage::Store;
use std::sync::Arc;

/// What placement needs to know of `rec`: its key, the copy it needs (see
/// [`super::fleet::placement_key`]) and its size.
pub(crate) fn weights_need(rec: &ModelVersionRecord) -> WeightsNeed {
    WeightsNeed {
        model: rec.key(),
        sha256: super::fleet::placement_key(&rec.spec.weights.sha256, rec.owner.as_deref()),
        size_bytes: rec.spec.weights.size_bytes,
    }
}

/// Starts `rec`'s actor, lists it in the directory and tells the Scheduler
/// its weights (the demand of tasks that name it).
fn start_version(rec: ModelVersionRecord, sh: &Arc<Shared>) {
    let key = rec.key();
    sh.scheduler.do_send(ModelWeightsKnown {
        need: weights_need(&rec),
    });
    let sha = rec.spec.weights.sha256.clone();
    sh.registry
        .add_model(&key, &sha, ModelVersionActor::spawn(rec, sh.clone()));
}

/// One supervised ModelVersionActor per stored version (at boot, before
/// tasks are rebuilt: a task's demand names its version's weights).
pub fn restore_models(store: &Store, sh: &Arc<Shared>) -> Result<usize> {
    let versions = store.model_versions()?;
    let n = versions.len();
    for v in versions {
        start_version(v, sh);
    }
    Ok(n)
}

/// The version a new task of `tenant` names, if it may use it: registered
/// and visible to the tenant (else 422 `unknown_model`), and accepting new
/// tasks (else 422 `model_not_accepting`). Both name the version.
pub fn check_task_model(store: &Store, tenant: &str, model: &str) -> Result<ModelVersionRecord> {
    let r = ModelRef::parse(model, "model")?;
    let key = r.to_string();
    let rec = store
        .model_version(&key)?
        .filter(|v| super::view::visible_to(v, Some(tenant)))
        .ok_or_else(|| {
            ActorError::UnknownModel(format!(
                "model {key} is not registered; register it with POST /v1/models (caldera model register) first"
            ))
        })?;
    if !rec.state.accepts_new_tasks() {
        return Err(ActorError::ModelNotAccepting(format!(
            "model {key} is {}: it takes no new tasks; use another version",
            rec.state.as_str()
        )));
    }
    Ok(rec)
}

/// Records a new version and starts its actor; the identical registration
/// again answers the existing record (`false`: nothing created).
pub(crate) fn register(
    sh: &Arc<Shared>,
    m: RegisterModel,
) -> Result<(ModelVersionRecord, bool, crate::durability::Ticket)> {
    caldera_spec::model::validate_model_version_spec(&m.spec)?;
    let key = m.spec.model_ref().to_string();
    if let Some(existing) = sh.gate.store().model_version(&key)? {
        if existing.spec == m.spec && existing.owner == m.owner {
            return Ok((existing, false, sh.gate.latest()));
        }
        // Names are scoped to their registrant (`check_namespace`), so the
        // version here is the caller's own, or a shared one the operator
        // registered: saying so tells nobody anything private.
        return Err(ActorError::Conflict(format!(
            "model {key} is already registered with other weights; versions are immutable: register a new version"
        )));
    }
    let now = sh.now_ms();
    let rec = ModelVersionRecord {
        spec: m.spec,
        state: ModelState::Registered,
        pinned: false,
        registered_at_ms: now,
        owner: m.owner,
        nodes: Default::default(),
        tasks: Default::default(),
        retire: None,
        checkpoint: m.checkpoint,
    };
    let by = rec
        .owner
        .as_deref()
        .map_or("the operator".to_string(), |t| format!("tenant {t}"));
    let msg = format!(
        "model {key} registered by {by}: {} bytes at {}, sha256 {}",
        rec.spec.weights.size_bytes, rec.spec.weights.uri, rec.spec.weights.sha256
    );
    let mut b = sh.batch();
    b.put_model_version(&rec);
    let mut e = Event::new(now, EventKind::ModelRegistered, msg);
    if let Some(t) = &rec.owner {
        e = e.tenant(t);
    }
    b.append_event(e);
    let ticket = sh
        .gate
        .commit(CommitSite::ModelRegister, b)
        .map_err(|e| ActorError::not_recorded("the model version", e))?;
    start_version(rec.clone(), sh);
    Ok((rec, true, ticket))
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::{ModelVersionSpec, WeightsSpec};
    use caldera_storage::StoreConfig;

    fn version(version: &str, state: ModelState, owner: Option<&str>) -> ModelVersionRecord {
        ModelVersionRecord {
            spec: ModelVersionSpec {
                name: "llama".into(),
                version: version.into(),
                weights: WeightsSpec {
                    uri: "file:///m.bin".into(),
                    size_bytes: 1,
                    sha256: "ab".repeat(32),
                },
                image: None,
            },
            state,
            pinned: false,
            registered_at_ms: 0,
            owner: owner.map(str::to_string),
            nodes: Default::default(),
            tasks: Default::default(),
            retire: None,
            checkpoint: None,
        }
    }

    /// Unknown (or another tenant's) -> `unknown_model`; retiring or
    /// retired -> `model_not_accepting`; both name the version and field
    /// `model`. Deprecated versions still take tasks.
    #[test]
    fn a_task_may_name_only_a_visible_version_that_accepts_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
        let mut b = store.batch();
        for v in [
            version("v1", ModelState::Active, None),
            version("v2", ModelState::Deprecated, None),
            version("v3", ModelState::Retiring, None),
            version("v4", ModelState::Retired, None),
            version("own", ModelState::Registered, Some("other")),
        ] {
            b.put_model_version(&v);
        }
        store.commit(b).unwrap();
        let code = |m: &str| match check_task_model(&store, "acme", m) {
            Ok(_) => "ok".to_string(),
            Err(e) => {
                assert_eq!(e.field(), Some("model"), "{m}: {e}");
                if !m.contains(' ') {
                    assert!(e.to_string().contains(m) || m == "llama", "{m}: {e}");
                }
                e.error_code().name.to_string()
            }
        };
        assert_eq!(code("llama:v1"), "ok");
        assert_eq!(code("llama:v2"), "ok");
        assert_eq!(code("llama:v3"), "model_not_accepting");
        assert_eq!(code("llama:v4"), "model_not_accepting");
        assert_eq!(code("llama:v9"), "unknown_model");
        assert_eq!(code("llama:own"), "unknown_model", "another tenant's");
        assert_eq!(code("llama"), "bad_format");
        assert!(check_task_model(&store, "other", "llama:own").is_ok());
    }
}
