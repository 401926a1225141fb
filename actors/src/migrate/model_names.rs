//! Model names are scoped to their owner: a tenant's versions are
//! `@TENANT.MODEL:VERSION`, names without `@` are the operator's. Versions a
//! tenant registered before that rule still sit under a bare name, where they
//! would block the operator's shared name and collide with everyone else's.
//! At boot, before any actor reads them, each is moved into its owner's
//! namespace, together with every record that names it, in one batch that is
//! flushed before the server answers: a crash leaves the old names or the new
//! ones, never a version under one name and its tasks under the other.
//!
//! What is renamed: the version's record (`v/` key and `spec.name`); a task's
//! or service's `model`, the version it serves, and both ends of its swap;
//! the open billing record of a held allocation (`model` and its swap
//! marks); another version's retire order that replaces with it. One `model_renamed` event per version, for its
//! tenant, says both names. Not rewritten: the event log and closed billing
//! records (they say what the version was called then), and the agents'
//! caches (keyed by sha256, so no weight is fetched again). A running
//! workload keeps the `CALDERA_MODEL_NAME` it was started with until it
//! restarts.
use crate::errors::Result;
use caldera_spec::model::{name_scope, ModelRef};
use caldera_spec::{Event, EventKind, ModelVersionRecord, SwapProgress, TaskRecord};
use caldera_storage::{Store, WriteBatch};
use std::collections::{BTreeMap, BTreeSet};

/// Old key (`name:version`) -> new key, for every version moved.
type Renames = BTreeMap<String, String>;

/// Moves every tenant's version named outside its namespace into it, with
/// every reference to it; answers how many versions moved (0 on every boot
/// after the first).
pub fn scope_model_names(store: &Store, now_ms: u64) -> Result<usize> {
    let versions = store.model_versions()?;
    let renames = plan(&versions);
    if renames.is_empty() {
        return Ok(0);
    }
    let mut b = store.batch();
    rename_versions(&mut b, versions, &renames, now_ms);
    for t in store.tasks() {
        let mut t = t?;
        if rename_in_task(&mut t, &renames) {
            b.put_task(&t);
        }
    }
    for r in store.open_billings() {
        let mut r = r?;
        let mut changed = rename(&mut r.model, &renames);
        for m in &mut r.model_marks {
            changed |= rename_str(&mut m.model, &renames);
        }
        if changed {
            b.put_open_billing(&r);
        }
    }
    store.commit(b)?;
    store.flush()?;
    tracing::info!(
        renamed = renames.len(),
        "tenants' model versions moved into their namespaces (@TENANT.MODEL)"
    );
    Ok(renames.len())
}

/// The new key of each version to move: `@TENANT.NAME:VERSION`, or, if
/// that is taken already (the tenant registered it under the new rule too),
/// `@TENANT.NAME-N:VERSION` with the smallest free N from 2. A name that
/// would be invalid (too long) is left where it is, with a warning.
fn plan(versions: &[ModelVersionRecord]) -> Renames {
    let mut taken: BTreeSet<String> = versions.iter().map(|v| v.key()).collect();
    let mut renames = Renames::new();
    for v in versions {
        let Some(tenant) = v.owner.as_deref() else {
            continue;
        };
        if name_scope(&v.spec.name) == Some(tenant) {
            continue;
        }
        let plain = v.spec.name.trim_start_matches('@');
        let key = (1..)
            .map(|n| match n {
                1 => format!("@{tenant}.{plain}:{}", v.spec.version),
                n => format!("@{tenant}.{plain}-{n}:{}", v.spec.version),
            })
            .find(|k| !taken.contains(k))
            .unwrap_or_default();
        match ModelRef::parse(&key, "name") {
            Ok(r) if r.to_string() == key => {
                taken.insert(key.clone());
                renames.insert(v.key(), key);
            }
            _ => tracing::warn!(
                version = %v.key(),
                tenant,
                "a tenant's model version outside its namespace keeps its name: {key} is not a valid name"
            ),
        }
    }
    renames
}

/// Puts every renamed version under its new key (and removes the old), and
/// points retire orders at the new names; one event per rename.
fn rename_versions(
    b: &mut WriteBatch,
    versions: Vec<ModelVersionRecord>,
    renames: &Renames,
    now_ms: u64,
) {
    for mut v in versions {
        let old = v.key();
        let mut changed = false;
        if let Some(order) = v.retire.as_mut() {
            changed |= rename(&mut order.replace_with, renames);
        }
        if let Some(new) = renames.get(&old) {
            let Ok(r) = ModelRef::parse(new, "name") else {
                continue;
            };
            v.spec.name = r.name;
            b.remove_model_version(&old);
            let msg = format!(
                "model {old} renamed {new}: a tenant's versions are named @TENANT.MODEL; \
                 its tasks and services now name {new}, and running workloads see the new \
                 name in CALDERA_MODEL_NAME once they restart"
            );
            let mut e = Event::new(now_ms, EventKind::ModelRenamed, msg)
                .detail(serde_json::json!({ "old": old, "new": new }));
            if let Some(t) = &v.owner {
                e = e.tenant(t);
            }
            b.append_event(e);
            changed = true;
        }
        if changed {
            b.put_model_version(&v);
        }
    }
}

/// Renames the task's model, the version it serves and both ends of its
/// swap; whether anything changed.
fn rename_in_task(t: &mut TaskRecord, renames: &Renames) -> bool {
    rename(&mut t.spec.model, renames)
        | rename(&mut t.serving_model, renames)
        | rename_in_swap(t.swap.as_mut(), renames)
}

fn rename_in_swap(swap: Option<&mut SwapProgress>, renames: &Renames) -> bool {
    let Some(s) = swap else {
        return false;
    };
    rename_ref(&mut s.from, renames) | rename_ref(&mut s.to, renames)
}

fn rename(model: &mut Option<String>, renames: &Renames) -> bool {
    model.as_mut().is_some_and(|m| rename_str(m, renames))
}

/// `model` as written by a user may differ in form from the key (it is
/// compared parsed); it becomes the new key.
fn rename_str(model: &mut String, renames: &Renames) -> bool {
    let Ok(r) = ModelRef::parse(model, "model") else {
        return false;
    };
    match renames.get(&r.to_string()) {
        Some(new) => {
            new.clone_into(model);
            true
        }
        None => false,
    }
}

fn rename_ref(r: &mut ModelRef, renames: &Renames) -> bool {
    match renames
        .get(&r.to_string())
        .and_then(|new| ModelRef::parse(new, "model").ok())
    {
        Some(new) => {
            *r = new;
            true
        }
        None => false,
    }
}

#[cfg(test)]
#[path = "model_names_tests.rs"]
mod tests;
