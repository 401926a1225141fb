//! The model registry's operations, as the gateway calls them. Views come
//! from the versions' live actors (they hold progress bytes sled does not);
//! who may see a version is decided here ([`visible_to`]).
use super::{ask, ControlPlane};
use crate::errors::{ActorError, Result};
use crate::model::origins;
use crate::model::view::{users_by_tenant, version_view, visible_to, VersionView};
use crate::protocol::cluster::RegisterModel;
use crate::protocol::model::{
    ChangeState, Prewarm, PrewarmTarget, Retire, SetPinned, VersionSnapshot,
};
use crate::protocol::ModelHandle;
use caldera_spec::{ModelState, ModelVersionRecord, ModelVersionSpec};
use futures_util::future::join_all;
use std::collections::BTreeMap;

/// A tenant registers names of its own namespace only (`@TENANT.MODEL`),
/// and the operator only shared names (without `@`): no one can take a name
/// another uses first, and a refusal depends on the name alone, never on
/// what another tenant registered.
fn check_namespace(name: &str, owner: Option<&str>) -> Result<()> {
    match (owner, caldera_spec::model::name_scope(name)) {
        (Some(t), Some(scope)) if scope == t => Ok(()),
        (None, None) => Ok(()),
        (Some(t), _) => Err(ActorError::ModelNameReserved(format!(
            "name: tenant {t}'s model names are @{t}.MODEL (e.g. @{t}.llama); names without @ are the operator's, shared with every tenant"
        ))),
        (None, Some(scope)) => Err(ActorError::ModelNameReserved(format!(
            "name: names starting with @{scope}. are tenant {scope}'s own; the operator's shared names have no @"
        ))),
    }
}

pub use caldera_spec::views::ModelView;

impl ControlPlane {
    /// Whether tenants may register their own versions (config).
    pub fn tenants_may_register_models(&self) -> bool {
        self.sh.config.models.tenants_may_register_models
    }

    /// Registers a version for `owner` (`None`: the operator): its name in
    /// the registrant's namespace, its origin within the registrant's
    /// allow-list. Answers its view and whether it is new.
    pub async fn register_model(
        &self,
        owner: Option<String>,
        spec: ModelVersionSpec,
    ) -> Result<(VersionView, bool)> {
        caldera_spec::model::validate_model_version_spec(&spec)?;
        check_namespace(&spec.name, owner.as_deref())?;
        let rules = origins::rules_for(&self.sh.config, owner.as_deref());
        let who = owner
            .as_deref()
            .map_or("the operator".to_string(), |t| format!("tenant {t}"));
        origins::check_registration(&rules, &spec.weights.uri, &who).await?;
        self.register_checked(owner, spec, None).await
    }

    /// Registers a version whose checks are done (a checkpoint's file is
    /// confined to its task's tree instead of an allow-list).
    pub(super) async fn register_checked(
        &self,
        owner: Option<String>,
        spec: ModelVersionSpec,
        checkpoint: Option<caldera_spec::weights::ConfinedRead>,
    ) -> Result<(VersionView, bool)> {
        check_namespace(&spec.name, owner.as_deref())?;
        let tenant = owner.clone();
        let m = RegisterModel {
            spec,
            owner,
            checkpoint,
        };
        let (rec, created) = ask(&self.cluster, m).await?;
        Ok((version_view(&rec, 0, tenant.as_deref()), created))
    }

    /// Every version `tenant` may see (`None`: the operator), with the
    /// origin reads each runs now.
    async fn snapshots(&self, tenant: Option<&str>) -> Vec<(ModelVersionRecord, u32)> {
        let handles: Vec<(String, ModelHandle)> = self.sh.registry.models();
        let snaps = join_all(handles.iter().map(|(_, h)| h.send(VersionSnapshot))).await;
        let mut out: Vec<_> = snaps
            .into_iter()
            .filter_map(|s| s.ok())
            .filter(|(rec, _)| visible_to(rec, tenant))
            .collect();
        out.sort_by_key(|(rec, _)| rec.key());
        out
    }

    /// `GET /v1/models`: every visible model, its versions by name.
    pub async fn models(&self, tenant: Option<&str>) -> Vec<ModelView> {
        let mut by_name: BTreeMap<String, Vec<VersionView>> = BTreeMap::new();
        for (rec, reads) in self.snapshots(tenant).await {
            by_name
                .entry(rec.spec.name.clone())
                .or_default()
                .push(version_view(&rec, reads, tenant));
        }
        by_name
            .into_iter()
            .map(|(name, versions)| ModelView { name, versions })
            .collect()
    }

    /// `GET /v1/models/{name}`: None when no visible version has that name.
    pub async fn model(&self, name: &str, tenant: Option<&str>) -> Option<ModelView> {
        self.models(tenant)
            .await
            .into_iter()
            .find(|m| m.name == name)
    }

    /// A visible version's record and actor, or 404.
    async fn visible_version(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
    ) -> Result<(ModelVersionRecord, u32, ModelHandle)> {
        let key = format!("{name}:{version}");
        let missing = || ActorError::not_found("model version", &key);
        let h = self.sh.registry.model(&key).ok_or_else(missing)?;
        let (rec, reads) = h.send(VersionSnapshot).await?;
        if !visible_to(&rec, tenant) {
            return Err(missing());
        }
        Ok((rec, reads, h))
    }

    /// `GET /v1/models/{name}/versions/{version}`.
    pub async fn model_version(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
    ) -> Result<VersionView> {
        let (rec, reads, _) = self.visible_version(name, version, tenant).await?;
        let mut view = version_view(&rec, reads, tenant);
        if rec.state == ModelState::Retiring {
            let (store, key) = (self.store(), rec.key());
            let users =
                super::blocking(move || Ok(crate::model::retire::users(&store, &key))).await?;
            view.used_by = Some(users_by_tenant(&users, tenant));
        }
        Ok(view)
    }

    /// `POST .../retire` (the operator, or a tenant for its own version):
    /// `replace_with` must be a registered version, visible to the version's
    /// owner, other than this one, and active or registered.
    pub async fn retire_model(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
        replace_with: Option<String>,
    ) -> Result<VersionView> {
        let (rec, _, h) = self.visible_version(name, version, tenant).await?;
        let replace_with = match replace_with {
            None => None,
            Some(r) => Some(self.replacement(&rec, &r).await?),
        };
        if let Some(order) = &rec.retire {
            if order.replace_with != replace_with {
                return Err(ActorError::RetireInProgress(format!(
                    "model {} is {} already, with replace_with {}",
                    rec.key(),
                    rec.state.as_str(),
                    order.replace_with.as_deref().unwrap_or("none")
                )));
            }
        }
        let by = tenant.map_or("operator".to_string(), |t| format!("tenant {t}"));
        let rec = h.send(Retire { by, replace_with }).await??;
        view_after(&h, &rec, tenant).await
    }

    /// The `name:version` a retire's `replace_with` names, checked.
    async fn replacement(&self, retiring: &ModelVersionRecord, r: &str) -> Result<String> {
        let parsed = caldera_spec::ModelRef::parse(r, "replace_with")?;
        let key = parsed.to_string();
        let bad = |why: String| Err(ActorError::ReplacementInvalid(why));
        if key == retiring.key() {
            return bad(format!("replace_with {key} is the version being retired"));
        }
        let Some(h) = self.sh.registry.model(&key) else {
            return bad(format!("replace_with {key} is not registered"));
        };
        let (rec, _) = h.send(VersionSnapshot).await?;
        if !visible_to(&rec, retiring.owner.as_deref()) {
            return bad(format!("replace_with {key} is not registered"));
        }
        if !matches!(rec.state, ModelState::Registered | ModelState::Active) {
            return bad(format!(
                "replace_with {key} is {}: a replacement must take new tasks",
                rec.state.as_str()
            ));
        }
        Ok(key)
    }

    /// Whether `tenant` may change the version (`None`: the operator may
    /// change any; a tenant only its own). Answers the record.
    pub async fn model_owner(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
    ) -> Result<Option<String>> {
        let (rec, _, _) = self.visible_version(name, version, tenant).await?;
        Ok(rec.owner)
    }

    /// `POST .../prewarm`: answers the nodes chosen.
    pub async fn prewarm_model(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
        target: PrewarmTarget,
        pin: bool,
    ) -> Result<Vec<String>> {
        let (_, _, h) = self.visible_version(name, version, tenant).await?;
        h.send(Prewarm { target, pin }).await?
    }

    /// `PUT .../pin`.
    pub async fn pin_model(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
        pinned: bool,
    ) -> Result<VersionView> {
        let (_, _, h) = self.visible_version(name, version, tenant).await?;
        let rec = h.send(SetPinned { pinned }).await??;
        view_after(&h, &rec, tenant).await
    }

    /// `POST .../deprecate`.
    pub async fn deprecate_model(
        &self,
        name: &str,
        version: &str,
        tenant: Option<&str>,
    ) -> Result<VersionView> {
        let (_, _, h) = self.visible_version(name, version, tenant).await?;
        let rec = h
            .send(ChangeState {
                to: ModelState::Deprecated,
            })
            .await??;
        view_after(&h, &rec, tenant).await
    }
}

/// The view of `rec` (as a change answered it) with the reads its actor runs now.
async fn view_after(
    h: &ModelHandle,
    rec: &ModelVersionRecord,
    tenant: Option<&str>,
) -> Result<VersionView> {
    let (_, reads) = h.send(VersionSnapshot).await?;
    Ok(version_view(rec, reads, tenant))
}
