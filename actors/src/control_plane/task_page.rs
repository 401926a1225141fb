//! One page of `GET /v1/tasks`, read from sled with a bounded amount of work.
//!
//! A filtered listing over 100k tasks used to decode records until it had
//! `limit` matches: ~1.2 s on an HTTP worker. Here a page examines at most
//! [`SCAN_BUDGET`] records and, when it stops early, says where the next page
//! starts (like DynamoDB's `LastEvaluatedKey`): latency per page is bounded
//! and a client pages on until `next_cursor` is null.
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
    /// The last task id the client has seen ("" from the start).
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
pub fn read(store: &Store, q: &TaskQuery, budget: usize) -> Result<TaskPage> {
    let mut page = TaskPage::default();
    let mut examined = 0usize;
    for r in store.tasks_after(&q.cursor) {
        let r = r?;
        examined += 1;
        let wanted = q.matches(&r);
        if wanted && page.tasks.len() == q.limit {
            // One more match exists: the page is full and there is more.
            page.next_cursor = page.tasks.last().map(|t| t.spec.task_id.clone());
            break;
        }
        let out_of_budget = examined >= budget;
        if out_of_budget {
            // Everything up to this record was examined: resume after it.
            page.next_cursor = Some(r.spec.task_id.clone());
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
            let spec = caldera_spec::parse_task_spec(json.as_bytes()).unwrap();
            b.put_task(&TaskRecord::new(spec, tenant.to_string(), 0, i as u64));
        }
        store.commit(b).unwrap();
        (dir, store)
    }

    fn ids(p: &TaskPage) -> Vec<&str> {
        p.tasks.iter().map(|t| t.spec.task_id.as_str()).collect()
    }

    #[test]
    fn a_page_is_full_then_the_cursor_is_its_last_id() {
        let (_d, store) = store_with(&[("a", "x"), ("b", "x"), ("c", "x")]);
        let q = TaskQuery {
            limit: 2,
            ..Default::default()
        };
        let p = read(&store, &q, 100).unwrap();
        assert_eq!(ids(&p), ["a", "b"]);
        assert_eq!(p.next_cursor.as_deref(), Some("b"));
        let q = TaskQuery {
            cursor: "b".into(),
            ..q
        };
        let p = read(&store, &q, 100).unwrap();
        assert_eq!(ids(&p), ["c"]);
        assert_eq!(p.next_cursor, None);
    }

    #[test]
    fn a_rare_match_costs_a_bounded_scan_per_page_and_pages_reach_it() {
        // Tenant y owns only "e"; with a budget of 2 records a page, the
        // client reaches it on the third page and loses nothing.
        let (_d, store) = store_with(&[("a", "x"), ("b", "x"), ("c", "x"), ("d", "x"), ("e", "y")]);
        let mut q = TaskQuery {
            tenant: Some("y".into()),
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
                (String::new(), Some("b".to_string())),
                (String::new(), Some("d".to_string())),
                ("e".to_string(), None),
            ]
        );
    }
}
