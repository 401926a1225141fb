//! One page of `GET /v1/tasks`, read from sled with a bounded amount of work.
//!
//! A listing by state is a range scan of sled's task index (state, then
//! `tenant/id`: `caldera_storage::Store::task_keys_in_state`), so a page
//! reads the `limit` records it returns and nothing else: the same cost at
//! 20k tasks or at 1M, whatever other tenants hold. Without a state, a
//! tenant's page is a range of its own task keys, and the operator's a range
//! of every key. Only the `type` filter is not indexed: a page examines at
//! most [`SCAN_BUDGET`] records and, when it stops early, says where the next
//! page starts (like DynamoDB's `LastEvaluatedKey`), so latency per page is
//! bounded and a client pages on until `next_cursor` is null.
use caldera_spec::{TaskRecord, TaskState, TaskType};
use caldera_storage::{Result, Store};

/// Most task records one page decodes.
pub const SCAN_BUDGET: usize = 5_000;

/// Which tasks a listing wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Only this tenant's tasks (a tenant token); `None`: every tenant's.
    pub tenant: Option<String>,
    pub state: Option<TaskState>,
    pub task_type: Option<TaskType>,
    /// The last task id the client has seen ("" from the start): a tenant's
    /// own id when `tenant` is set, else a task key (`tenant/id`).
    pub cursor: String,
    /// Most tasks in the page.
    pub limit: usize,
}

impl TaskQuery {
    fn matches(&self, r: &TaskRecord) -> bool {
        self.tenant.as_ref().is_none_or(|t| *t == r.tenant)
            && self.state.is_none_or(|s| s == r.state)
            && self.task_type.is_none_or(|t| t == r.spec.task_type)
    }
}

/// Tasks ordered by id, and where the next page starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskPage {
    pub tasks: Vec<TaskRecord>,
    /// `None`: nothing after this page. Otherwise pass it as the next `cursor`;
    /// the next page may be empty when the budget ran out at the last task.
    pub next_cursor: Option<String>,
}

/// Reads one page, examining at most `budget` records. Blocking: sled reads
/// and JSON decoding; call it on the blocking pool.
///
/// Keys are `tenant/id`, so one tenant's tasks are one contiguous run of
/// keys, in the records and in each state's run of the index: a tenant's
/// page starts after `tenant/cursor` and ends where its run does, and
/// examines none of the other tenants' records. Its cursor is the tenant's
/// own id; the operator's (every tenant) is the key.
pub fn read(store: &Store, q: &TaskQuery, budget: usize) -> Result<TaskPage> {
    let (after, prefix) = match &q.tenant {
        Some(t) => (
            caldera_spec::task_key(t, &q.cursor),
            caldera_spec::task_key(t, ""),
        ),
        None => (q.cursor.clone(), String::new()),
    };
    let candidates: Box<dyn Iterator<Item = Result<TaskRecord>>> = match q.state {
        Some(state) => Box::new(
            store
                .task_keys_in_state(state, &prefix, &after)
                // An entry whose task was removed since the key was read: skip it.
                .filter_map(|k| k.and_then(|k| store.task(&k)).transpose()),
        ),
        None => Box::new(store.tasks_after(&after).take_while(|r| {
            r.as_ref()
                .map_or(true, |r| r.spec.task_id.starts_with(&prefix))
        })),
    };
    let cursor_of = |r: &TaskRecord| match &q.tenant {
        Some(_) => caldera_spec::local_id(&r.spec.task_id).to_string(),
        None => r.spec.task_id.clone(),
    };
    // Only `type` is not answered by the range itself: without it every
    // record read is returned, and `limit` alone bounds the page.
    let budget = match q.task_type {
        Some(_) => budget,
        None => usize::MAX,
    };
    let mut page = TaskPage::default();
    let mut examined = 0usize;
    for r in candidates {
        let r = r?;
        examined += 1;
        let wanted = q.matches(&r);
        if wanted && page.tasks.len() == q.limit {
            // One more match exists: the page is full and there is more.
            page.next_cursor = page.tasks.last().map(cursor_of);
            break;
        }
        let out_of_budget = examined >= budget;
        if out_of_budget {
            // Everything up to this record was examined: resume after it.
            page.next_cursor = Some(cursor_of(&r));
        }
        if wanted {
            page.tasks.push(r);
        }
        if out_of_budget {
            break;
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_storage::StoreConfig;

    fn store_with(ids_and_tenants: &[(&str, &str)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
        let mut b = store.batch();
        for (i, (id, tenant)) in ids_and_tenants.iter().enumerate() {
            let json = format!(
                r#"{{"task_id":"{id}","task_type":"training","resources":{{"cpu":{{"cores":1}}}}}}"#
            );
            let mut spec = caldera_spec::parse_task_spec(json.as_bytes()).unwrap();
            spec.task_id = caldera_spec::task_key(tenant, id);
            b.put_task(&TaskRecord::new(spec, tenant.to_string(), 0, i as u64));
        }
        store.commit(b).unwrap();
        (dir, store)
    }

    fn ids(p: &TaskPage) -> Vec<&str> {
        p.tasks.iter().map(|t| t.spec.task_id.as_str()).collect()
    }

    #[test]
    fn a_page_is_full_then_the_cursor_is_its_last_key() {
        let (_d, store) = store_with(&[("a", "x"), ("b", "x"), ("c", "y")]);
        let q = TaskQuery {
            limit: 2,
            ..Default::default()
        };
        let p = read(&store, &q, 100).unwrap();
        assert_eq!(ids(&p), ["x/a", "x/b"]);
        assert_eq!(p.next_cursor.as_deref(), Some("x/b"));
        let q = TaskQuery {
            cursor: "x/b".into(),
            ..q
        };
        let p = read(&store, &q, 100).unwrap();
        assert_eq!(ids(&p), ["y/c"]);
        assert_eq!(p.next_cursor, None);
    }

    #[test]
    fn a_tenants_pages_read_only_its_own_keys_and_its_cursor_is_its_own_id() {
        // Tenants x and y both own "b": y's listing never examines x's
        // records, and its cursor is y's own id; with `type` (not indexed),
        // a budget of 2 records a page still reaches every task.
        let (_d, store) = store_with(&[("a", "x"), ("b", "x"), ("b", "y"), ("c", "y"), ("d", "y")]);
        let mut q = TaskQuery {
            tenant: Some("y".into()),
            task_type: Some(TaskType::Training),
            limit: 10,
            ..Default::default()
        };
        let mut pages = Vec::new();
        loop {
            let p = read(&store, &q, 2).unwrap();
            pages.push((ids(&p).join(","), p.next_cursor.clone()));
            match p.next_cursor {
                Some(c) => q.cursor = c,
                None => break,
            }
        }
        assert_eq!(
            pages,
            [
                ("y/b,y/c".to_string(), Some("c".to_string())),
                ("y/d".to_string(), None),
            ]
        );
    }

    #[test]
    fn a_state_listing_reads_only_that_states_run_of_the_index() {
        // Tenant y has 3 queued tasks whose ids sort after its 12 running
        // ones, and tenant x 12 queued ones. With a budget of 4 records, a
        // scan of y's keys would stop among the running ones; the index
        // hands over the 3 queued ones alone, within the budget.
        let mut rows: Vec<(String, String)> = Vec::new();
        for i in 0..12 {
            rows.push((format!("run-{i:02}"), "y".into()));
            rows.push((format!("other-{i:02}"), "x".into()));
        }
        for id in ["wait-1", "wait-2", "wait-3"] {
            rows.push((id.into(), "y".into()));
        }
        let refs: Vec<(&str, &str)> = rows.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let (_d, store) = store_with(&refs);
        let mut b = store.batch();
        for i in 0..12 {
            let mut r = store.task(&format!("y/run-{i:02}")).unwrap().unwrap();
            r.state = TaskState::Running;
            b.put_task(&r);
        }
        store.commit(b).unwrap();
        let q = TaskQuery {
            tenant: Some("y".into()),
            state: Some(TaskState::Queued),
            task_type: Some(TaskType::Training),
            limit: 3,
            ..Default::default()
        };
        let p = read(&store, &q, 4).unwrap();
        assert_eq!(ids(&p), ["y/wait-1", "y/wait-2", "y/wait-3"]);
        assert_eq!(p.next_cursor, None);
        // Without `type`, no budget applies: `limit` alone bounds a page.
        let q = TaskQuery {
            task_type: None,
            limit: 2,
            ..q
        };
        let p = read(&store, &q, 1).unwrap();
        assert_eq!(ids(&p), ["y/wait-1", "y/wait-2"]);
        assert_eq!(p.next_cursor.as_deref(), Some("wait-2"));
        // The operator's queued listing: every tenant's, by key, paged.
        let q = TaskQuery {
            state: Some(TaskState::Queued),
            limit: 10,
            cursor: "x/other-09".into(),
            ..Default::default()
        };
        let p = read(&store, &q, 100).unwrap();
        assert_eq!(
            ids(&p),
            [
                "x/other-10",
                "x/other-11",
                "y/wait-1",
                "y/wait-2",
                "y/wait-3"
            ]
        );
    }

    #[test]
    fn an_entry_left_stale_never_lists_a_task_under_a_state_it_left() {
        // A record written without the history of the state it replaces
        // leaves that state's entry behind: the page reads the record, sees
        // its state and leaves it out.
        let (_d, store) = store_with(&[("a", "y"), ("b", "y")]);
        let mut r = store.task("y/a").unwrap().unwrap();
        r.state = TaskState::Running;
        r.history.clear();
        let mut b = store.batch();
        b.put_task(&r);
        store.commit(b).unwrap();
        let q = |state| TaskQuery {
            tenant: Some("y".into()),
            state: Some(state),
            limit: 1,
            ..Default::default()
        };
        let p = read(&store, &q(TaskState::Queued), SCAN_BUDGET).unwrap();
        assert_eq!(ids(&p), ["y/b"]);
        assert_eq!(p.next_cursor, None);
        let p = read(&store, &q(TaskState::Running), SCAN_BUDGET).unwrap();
        assert_eq!(ids(&p), ["y/a"]);
    }
}
