//! The internal key of a task: `"{tenant}/{task_id}"`.
//!
//! A task id is the tenant's own name for its task, so two tenants may both
//! call a task `train_20240716_001`. Everything inside the
//! control plane — sled `t/` keys, the registry, the Scheduler's queue and
//! ledger, allocation ids (`"{key}.{attempt}"`), replica ids (`"{key}.r{i}"`),
//! the agent's log and checkpoint file names — is keyed by this key, so
//! nothing derived from one tenant's id can meet another tenant's. The API
//! shows each tenant its own `task_id` ([`local_id`]). Neither a tenant name
//! (`[A-Za-z0-9_-]`) nor a task id (`[A-Za-z0-9._-]`) may contain `/`, so the
//! first `/` splits a key unambiguously.

/// The id of replica `i` of the service `service` (a key or a tenant's own
/// id): `"{service}.r{i}"`. Users may not choose ids of this form
/// ([`names_a_replica`]), so a replica never meets a task of its own tenant.
pub fn replica_id(service: &str, i: u32) -> String {
    format!("{service}.r{i}")
}

/// Whether `id` has the form of a replica id (ends in `.r` and digits), so
/// that it is refused as a user's own task id: the tenant's task `svc.r1`
/// and replica 1 of its service `svc` would be one task.
pub fn names_a_replica(id: &str) -> bool {
    id.rsplit_once(".r")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The key of `tenant`'s task `task_id`.
pub fn task_key(tenant: &str, task_id: &str) -> String {
    format!("{tenant}/{task_id}")
}

/// The tenant's own id in `key` (everything after the first `/`); a string
/// without `/` is returned as it is, so a view of an unscoped id stays readable.
pub fn local_id(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, id)| id)
}

/// The tenant of `key`, `None` for an unscoped id.
pub fn tenant_of(key: &str) -> Option<&str> {
    key.split_once('/').map(|(tenant, _)| tenant)
}

/// How the task `key` is named to `viewer` (a tenant): its own id when it is
/// the viewer's tenant's task, else without any id — a tenant never learns
/// another tenant's task ids. An unscoped id is shown as it is.
pub fn as_seen_by(viewer: Option<&str>, key: &str) -> String {
    match tenant_of(key) {
        None => key.to_string(),
        Some(t) if Some(t) == viewer => local_id(key).to_string(),
        Some(_) => "another tenant's task".to_string(),
    }
}

/// Whether `key` is already a tenant-scoped key (records written before
/// scoping hold a bare id: see `caldera_actors::migrate`).
pub fn is_scoped(key: &str) -> bool {
    key.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_ids_have_the_reserved_form_and_nothing_else_does() {
        assert_eq!(replica_id("alpha/svc", 1), "alpha/svc.r1");
        for id in ["svc.r0", "svc.r12", "a.b.r3", &replica_id("svc", 7)] {
            assert!(names_a_replica(id), "{id}");
        }
        for id in [
            "svc", "svc.r", "svc.rx", "svc.r1x", "svcr1", "svc.1", "svc.r1.5", "r1",
        ] {
            assert!(!names_a_replica(id), "{id}");
        }
    }

    #[test]
    fn a_key_splits_back_into_the_tenants_id() {
        let k = task_key("alpha", "svc.r1");
        assert_eq!(k, "alpha/svc.r1");
        assert_eq!(local_id(&k), "svc.r1");
        assert_eq!(local_id(&format!("{k}.3")), "svc.r1.3");
        assert_eq!(local_id("bare"), "bare");
        assert!(is_scoped(&k) && !is_scoped("bare"));
        assert_ne!(task_key("a", "b"), task_key("b", "a"));
        assert_eq!((tenant_of(&k), tenant_of("bare")), (Some("alpha"), None));
        assert_eq!(as_seen_by(Some("alpha"), &k), "svc.r1");
        assert_eq!(as_seen_by(Some("bravo"), &k), "another tenant's task");
        assert_eq!(as_seen_by(Some("bravo"), "bare"), "bare");
    }
}
