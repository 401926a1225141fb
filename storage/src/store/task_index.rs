//! The task index: one empty-valued key per task, `i/<state>/<task key>`,
//! so that the tasks of one state — of every tenant (`i/q/`), or of one
//! tenant (`i/q/<tenant>/`, a task key being `tenant/id`) — are one
//! contiguous run of keys ordered by task key. A listing filtered by state
//! is a range scan that reads only the entries it returns, whatever the
//! number of other tenants' tasks or of tasks in other states.
//!
//! Every task write keeps it in step in the same atomic batch, without
//! reading what was there (no read-modify-write): a put inserts the entry of
//! the record's state and removes the entries of the other states in its
//! history — every state a task has been written in is in its history
//! (`TaskRecord::transition`), so that covers the entry of the record it
//! replaces; a removal removes the entries of every state. Removing only
//! the states a task went through keeps a submission at one index write
//! (removing all eleven every time made its commit about a third slower:
//! `examples/index_cost.rs`).
//!
//! Readers check each record's state: an entry left stale (two writers of
//! one task racing, a record written without its history) costs a page one
//! read, never a task listed under a state it is not in, and the next open
//! after a rebuild mark is removed starts the index afresh.
//!
//! A store written before the index existed (or whose rebuild was cut short)
//! has no `s/task_index` mark: [`ensure`] rebuilds the index on open.
use super::Store;
use crate::batch::WriteBatch;
use crate::errors::Result;
use crate::keys;
use caldera_spec::{TaskRecord, TaskState};

/// Every state: a put removes the entries of all but one, a removal all.
const STATES: [TaskState; 11] = [
    TaskState::Queued,
    TaskState::Scheduled,
    TaskState::Preparing,
    TaskState::Warming,
    TaskState::Ready,
    TaskState::Running,
    TaskState::Finished,
    TaskState::Failed,
    TaskState::Preempted,
    TaskState::Cancelled,
    TaskState::Released,
];

/// Written once the index holds every task record.
const BUILT: &[u8] = b"s/task_index";
/// The index layout this build writes; another value means rebuild.
const BUILT_VERSION: &[u8] = b"1";
/// Index entries staged per batch while rebuilding (bounded memory).
const REBUILD_CHUNK: usize = 10_000;

/// The byte that names `state` in index keys. It is stored on disk: never
/// reuse or change one.
fn tag(state: TaskState) -> u8 {
    match state {
        TaskState::Queued => b'q',
        TaskState::Scheduled => b's',
        TaskState::Preparing => b'p',
        TaskState::Warming => b'w',
        TaskState::Ready => b'y',
        TaskState::Running => b'r',
        TaskState::Finished => b'f',
        TaskState::Failed => b'x',
        TaskState::Preempted => b'e',
        TaskState::Cancelled => b'c',
        TaskState::Released => b'l',
    }
}

/// `i/<tag>/` followed by `key_prefix`.
fn prefix(state: TaskState, key_prefix: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(keys::TASK_INDEX.len() + 2 + key_prefix.len());
    k.extend_from_slice(keys::TASK_INDEX);
    k.push(tag(state));
    k.push(b'/');
    k.extend_from_slice(key_prefix.as_bytes());
    k
}

/// The index entry of the task `key` (`tenant/id`) in `state`.
pub(crate) fn entry(state: TaskState, key: &str) -> Vec<u8> {
    prefix(state, key)
}

impl WriteBatch {
    /// Stages the index of `task`: the entry of its state, and no entry of
    /// another state in its history.
    pub(crate) fn stage_task_index(&mut self, task: &TaskRecord) {
        let key = &task.spec.task_id;
        let mut removed = [false; STATES.len()];
        for t in &task.history {
            let i = position(t.state);
            if t.state != task.state && !removed[i] {
                removed[i] = true;
                self.remove(entry(t.state, key));
            }
        }
        self.put_marker(entry(task.state, key));
    }

    /// Stages the removal of task `key`'s entry, whatever its state.
    pub(crate) fn unstage_task_index(&mut self, key: &str) {
        for s in STATES {
            self.remove(entry(s, key));
        }
    }
}

/// Where `state` is in [`STATES`].
fn position(state: TaskState) -> usize {
    STATES.iter().position(|s| *s == state).unwrap_or(0)
}

impl Store {
    /// Keys (`tenant/id`) of the tasks in `state` that start with
    /// `key_prefix` (`"tenant/"`: one tenant's; `""`: every tenant's), after
    /// `after` (exclusive; `""`: from the first), ordered by key. Reads the
    /// index only: the cost of a page is the entries it takes.
    pub fn task_keys_in_state(
        &self,
        state: TaskState,
        key_prefix: &str,
        after: &str,
    ) -> impl Iterator<Item = Result<String>> {
        let first = prefix(state, key_prefix);
        let end = keys::prefix_end(&first);
        let mut start = entry(state, after);
        // Exclusive: the smallest key after `after` is `after` + 0x00.
        start.push(0);
        let start = if after.is_empty() || start < first {
            first
        } else {
            start
        };
        let skip = keys::TASK_INDEX.len() + 2;
        crate::handle::entries(self.db().map(|db| db.range(start..end))).map(move |kv| {
            let (k, _) = kv?;
            Ok(String::from_utf8_lossy(&k[skip.min(k.len())..]).into_owned())
        })
    }
}

/// Only the field the rebuild needs: decoding a whole record would cost
/// every spec, history and allocation of a large store.
#[derive(serde::Deserialize)]
struct StateOnly {
    state: TaskState,
}

/// Rebuilds the index unless it is marked built; answers how many tasks it
/// indexed (0: it was built). Idempotent: a rebuild cut short by a crash
/// runs again in full at the next open.
pub(crate) fn ensure(store: &Store) -> Result<usize> {
    let db = store.db()?;
    if db.get(BUILT)?.as_deref() == Some(BUILT_VERSION) {
        return Ok(0);
    }
    let mut b = store.batch();
    let mut staged = 0usize;
    let end = keys::prefix_end(keys::TASK_INDEX);
    store.stage_range_removal(&mut b, keys::TASK_INDEX.to_vec()..end)?;
    let mut indexed = 0usize;
    for kv in db.scan_prefix(keys::TASK) {
        let (k, v) = kv?;
        let key = String::from_utf8_lossy(&k[keys::TASK.len()..]).into_owned();
        match serde_json::from_slice::<StateOnly>(&v) {
            Ok(r) => {
                b.put_marker(entry(r.state, &key));
                indexed += 1;
                staged += 1;
            }
            // Listing it would fail the same way; the reader of that record
            // reports it (`StorageError::Corrupt`), boot goes on.
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "task record not indexed: it does not decode")
            }
        }
        if staged >= REBUILD_CHUNK {
            store.commit(std::mem::take(&mut b))?;
            staged = 0;
        }
    }
    b.ops.insert(BUILT, BUILT_VERSION);
    store.commit(b)?;
    store.flush()?;
    tracing::info!(indexed, "task index built (by state, tenant and id)");
    Ok(indexed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::TaskRecord;

    fn open(dir: &std::path::Path) -> Store {
        Store::open(dir, &Default::default()).unwrap()
    }

    fn record(tenant: &str, id: &str, state: TaskState) -> TaskRecord {
        let spec = caldera_spec::parse_task_spec(
            format!(
                r#"{{"task_id":"{id}","task_type":"training","resources":{{"cpu":{{"cores":1}}}}}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        let mut spec = spec;
        spec.task_id = caldera_spec::task_key(tenant, id);
        let mut r = TaskRecord::new(spec, tenant.to_string(), 0, 0);
        if state != TaskState::Queued {
            r.transition(state, 0, None);
        }
        r
    }

    fn put(s: &Store, records: &[TaskRecord]) {
        let mut b = s.batch();
        for r in records {
            b.put_task(r);
        }
        s.commit(b).unwrap();
    }

    fn listed(s: &Store, state: TaskState, key_prefix: &str, after: &str) -> Vec<String> {
        s.task_keys_in_state(state, key_prefix, after)
            .collect::<Result<_>>()
            .unwrap()
    }

    #[test]
    fn every_state_is_listed_once_with_its_own_tag() {
        // 11 distinct states of an 11-variant enum: all of them, and a put
        // removes every entry but its own.
        let states: std::collections::HashSet<_> = STATES.iter().collect();
        let tags: std::collections::HashSet<_> = STATES.iter().map(|s| tag(*s)).collect();
        assert_eq!((states.len(), tags.len()), (11, 11));
    }

    #[test]
    fn each_transition_moves_the_entry_and_a_removal_drops_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        let mut r = record("alpha", "job", TaskState::Queued);
        put(&s, &[r.clone()]);
        assert_eq!(listed(&s, TaskState::Queued, "alpha/", ""), ["alpha/job"]);
        for next in [
            TaskState::Scheduled,
            TaskState::Running,
            TaskState::Preempted,
            TaskState::Queued,
            TaskState::Finished,
        ] {
            r.transition(next, 1, None);
            put(&s, &[r.clone()]);
            for other in STATES {
                let want: &[&str] = if other == next { &["alpha/job"] } else { &[] };
                assert_eq!(
                    listed(&s, other, "", ""),
                    want,
                    "after -> {next:?}, in {other:?}"
                );
            }
        }
        let mut b = s.batch();
        b.remove_task("alpha/job");
        s.commit(b).unwrap();
        for other in STATES {
            assert!(listed(&s, other, "", "").is_empty(), "{other:?}");
        }
    }

    #[test]
    fn two_writes_of_one_task_in_a_batch_leave_the_last_state() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        let mut r = record("alpha", "job", TaskState::Queued);
        let mut b = s.batch();
        b.put_task(&r);
        r.transition(TaskState::Scheduled, 1, None);
        b.put_task(&r);
        s.commit(b).unwrap();
        assert!(listed(&s, TaskState::Queued, "", "").is_empty());
        assert_eq!(listed(&s, TaskState::Scheduled, "", ""), ["alpha/job"]);
    }

    #[test]
    fn a_tenants_run_holds_only_its_tasks_and_pages_after_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        // Tenant `a` and `ab` share a first letter: `a/` never reaches `ab/`.
        put(
            &s,
            &[
                record("a", "1", TaskState::Queued),
                record("a", "2", TaskState::Queued),
                record("a", "3", TaskState::Running),
                record("ab", "1", TaskState::Queued),
                record("b", "1", TaskState::Queued),
            ],
        );
        assert_eq!(listed(&s, TaskState::Queued, "a/", ""), ["a/1", "a/2"]);
        assert_eq!(listed(&s, TaskState::Queued, "a/", "a/1"), ["a/2"]);
        assert!(listed(&s, TaskState::Queued, "a/", "a/2").is_empty());
        assert_eq!(listed(&s, TaskState::Queued, "ab/", ""), ["ab/1"]);
        assert_eq!(
            listed(&s, TaskState::Queued, "", "a/2"),
            ["ab/1", "b/1"],
            "every tenant's, after a key"
        );
        // A cursor before the tenant's run starts at the run.
        assert_eq!(listed(&s, TaskState::Queued, "b/", "a/9"), ["b/1"]);
    }

    #[test]
    fn the_index_survives_a_restart_and_is_rebuilt_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = open(dir.path());
            put(
                &s,
                &[
                    record("a", "1", TaskState::Queued),
                    record("a", "2", TaskState::Failed),
                ],
            );
            s.flush().unwrap();
        }
        let s = open(dir.path());
        assert_eq!(listed(&s, TaskState::Queued, "a/", ""), ["a/1"]);
        // A store from before the index: no entries and no mark; and a stale
        // entry left by a rebuild cut short.
        let mut b = s.batch();
        b.ops.remove(BUILT);
        for st in STATES {
            b.remove(entry(st, "a/1"));
            b.remove(entry(st, "a/2"));
        }
        b.put_marker(entry(TaskState::Running, "a/gone"));
        s.commit(b).unwrap();
        s.flush().unwrap();
        drop(s);
        let s = open(dir.path());
        assert_eq!(listed(&s, TaskState::Queued, "a/", ""), ["a/1"]);
        assert_eq!(listed(&s, TaskState::Failed, "a/", ""), ["a/2"]);
        assert!(listed(&s, TaskState::Running, "", "").is_empty());
        // Built once: the next open finds the mark.
        assert_eq!(ensure(&s).unwrap(), 0);
    }
}
