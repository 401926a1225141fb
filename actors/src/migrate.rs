//! Records written before task ids were scoped by tenant live at `t/<id>` and name a bare id; today every task is keyed
//! `tenant/id` (`caldera_spec::task_key`). At boot, before any actor reads
//! them, such records are moved to their keys once, in one atomic batch, so
//! the rest of the control plane never sees a bare id and a crash mid-way
//! leaves either the old layout or the new one, never a mix:
//!
//! - `t/<id>` becomes `t/<tenant>/<id>`; its `spec.task_id`, its replica's
//!   `service` and its allocation's `task_id` become keys;
//! - each `a/` allocation of a bare id names the key; its `allocation_id`
//!   stays (it was unique across the pool already, and agents know it);
//! - the event log is not rewritten: events recorded before the upgrade stay
//!   indexed under the bare id.
pub mod model_names;

use crate::errors::Result;
use caldera_spec::task_key;
use caldera_spec::task_key::is_scoped;
use caldera_storage::Store;
use std::collections::HashMap;

/// Moves every unscoped task to its key; answers how many moved.
pub fn scope_task_keys(store: &Store) -> Result<usize> {
    let mut b = store.batch();
    let mut tenant_of: HashMap<String, String> = HashMap::new();
    for t in store.tasks() {
        let mut t = t?;
        if is_scoped(&t.spec.task_id) {
            continue;
        }
        let bare = t.spec.task_id.clone();
        t.spec.task_id = task_key(&t.tenant, &bare);
        if let Some(s) = t.service.as_mut().filter(|s| !is_scoped(s)) {
            *s = task_key(&t.tenant, s);
        }
        if let Some(a) = t.allocation.as_mut().filter(|a| !is_scoped(&a.task_id)) {
            a.task_id = task_key(&a.tenant, &a.task_id);
        }
        b.remove_task(&bare);
        b.put_task(&t);
        tenant_of.insert(bare, t.tenant.clone());
    }
    let moved = tenant_of.len();
    for a in store.allocations() {
        let mut a = a?;
        if is_scoped(&a.task_id) {
            continue;
        }
        let tenant = tenant_of.get(&a.task_id).unwrap_or(&a.tenant).clone();
        a.task_id = task_key(&tenant, &a.task_id);
        b.put_allocation(&a);
    }
    if !b.is_empty() {
        store.commit(b)?;
        store.flush()?;
        tracing::info!(moved, "task records scoped by tenant (tenant/id keys)");
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::TaskRecord;
    use caldera_storage::StoreConfig;

    #[test]
    fn a_bare_record_moves_to_its_key_once_with_its_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
        let spec = caldera_spec::parse_task_spec(
            br#"{"task_id":"old","task_type":"training","resources":{"cpu":{"cores":1}}}"#,
        )
        .unwrap();
        let mut rec = TaskRecord::new(spec, "alpha".into(), 0, 0);
        let alloc = caldera_spec::Allocation {
            tenant: "alpha".into(),
            ..crate::fixtures::allocation("old.1", "old", "n")
        };
        rec.allocation = Some(alloc.clone());
        let mut b = store.batch();
        b.put_task(&rec);
        b.put_allocation(&alloc);
        store.commit(b).unwrap();

        assert_eq!(scope_task_keys(&store).unwrap(), 1);
        assert!(store.task("old").unwrap().is_none());
        let moved = store.task("alpha/old").unwrap().unwrap();
        assert_eq!(moved.spec.task_id, "alpha/old");
        let a = moved.allocation.unwrap();
        assert_eq!(
            (a.allocation_id.as_str(), a.task_id.as_str()),
            ("old.1", "alpha/old")
        );
        let stored = store.allocation("old.1").unwrap().unwrap();
        assert_eq!(stored.task_id, "alpha/old");
        // Once: a second boot finds nothing to move.
        assert_eq!(scope_task_keys(&store).unwrap(), 0);
    }
}
