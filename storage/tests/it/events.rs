//! Event log queries: filters by task, tenant, node and kind, cursor paging.
use crate::common;

use caldera_spec::{Event, EventKind};
use caldera_storage::{EventFilter, Store};
use common::{event, open};

/// (kind, task, tenant, node)
type Row = (
    EventKind,
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);

/// 12 events over tasks a, ab, a/b; tenants acme, beta; nodes n1, n2.
fn seeded(store: &Store) {
    let rows: [Row; 12] = [
        (EventKind::TenantCreated, None, Some("acme"), None), // 1
        (EventKind::NodeJoined, None, None, Some("n1")),      // 2
        (EventKind::TaskSubmitted, Some("a"), Some("acme"), None), // 3
        (EventKind::TaskSubmitted, Some("ab"), Some("beta"), None), // 4
        (
            EventKind::AllocationGranted,
            Some("a"),
            Some("acme"),
            Some("n1"),
        ), // 5
        (EventKind::TaskSubmitted, Some("a/b"), Some("acme"), None), // 6
        (
            EventKind::AllocationGranted,
            Some("ab"),
            Some("beta"),
            Some("n2"),
        ), // 7
        (
            EventKind::TaskTransition,
            Some("a"),
            Some("acme"),
            Some("n1"),
        ), // 8
        (EventKind::NodeLost, None, None, Some("n2")),        // 9
        (
            EventKind::TaskTransition,
            Some("ab"),
            Some("beta"),
            Some("n2"),
        ), // 10
        (
            EventKind::AllocationReleased,
            Some("a"),
            Some("acme"),
            Some("n1"),
        ), // 11
        (EventKind::QuotaChanged, None, Some("beta"), None),  // 12
    ];
    // Several batches of different sizes, as the control plane writes them.
    for chunk in rows.chunks(5) {
        let mut b = store.batch();
        for (kind, task, tenant, node) in chunk {
            b.append_event(event(*kind, *task, *tenant, *node));
        }
        store.commit(b).unwrap();
    }
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

fn filter(
    task: Option<&str>,
    tenant: Option<&str>,
    node: Option<&str>,
    kind: Option<EventKind>,
) -> EventFilter {
    EventFilter {
        task: task.map(str::to_string),
        tenant: tenant.map(str::to_string),
        node: node.map(str::to_string),
        kind,
    }
}

#[test]
fn filters_select_by_task_tenant_node_and_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    seeded(&store);
    let cases: [(EventFilter, Vec<u64>); 11] = [
        (EventFilter::default(), (1..=12).collect()),
        // "a" must not pick up the events of "ab" or "a/b".
        (filter(Some("a"), None, None, None), vec![3, 5, 8, 11]),
        (filter(Some("ab"), None, None, None), vec![4, 7, 10]),
        (filter(Some("a/b"), None, None, None), vec![6]),
        (
            filter(None, Some("acme"), None, None),
            vec![1, 3, 5, 6, 8, 11],
        ),
        (filter(None, Some("beta"), None, None), vec![4, 7, 10, 12]),
        (filter(None, None, Some("n2"), None), vec![7, 9, 10]),
        (
            filter(None, None, None, Some(EventKind::TaskSubmitted)),
            vec![3, 4, 6],
        ),
        // Combined: every set field must match.
        (
            filter(
                None,
                Some("acme"),
                Some("n1"),
                Some(EventKind::TaskTransition),
            ),
            vec![8],
        ),
        (filter(Some("a"), Some("beta"), None, None), vec![]),
        (filter(Some("nope"), None, None, None), vec![]),
    ];
    for (f, want) in cases {
        let got = store.events(&f, 0, 100).unwrap();
        assert_eq!(seqs(&got), want, "filter {f:?}");
        assert!(got.iter().all(|e| f.matches(e)), "filter {f:?}");
    }
}

#[test]
fn cursor_paging_returns_every_event_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    seeded(&store);
    for f in [
        EventFilter::default(),
        filter(None, Some("acme"), None, None),
        filter(None, None, None, Some(EventKind::AllocationGranted)),
        filter(Some("a"), None, None, None),
    ] {
        let all = seqs(&store.events(&f, 0, usize::MAX).unwrap());
        let mut paged = Vec::new();
        let mut cursor = 0;
        loop {
            let page = store.events(&f, cursor, 2).unwrap();
            assert!(page.len() <= 2);
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            paged.extend(seqs(&page));
        }
        assert_eq!(paged, all, "filter {f:?}");
    }
    // Cursor in the middle; zero limit; cursor at the end of the log.
    assert_eq!(
        seqs(&store.events(&EventFilter::default(), 9, 100).unwrap()),
        vec![10, 11, 12]
    );
    assert!(store
        .events(&EventFilter::default(), 0, 0)
        .unwrap()
        .is_empty());
    assert!(store
        .events(&EventFilter::default(), 12, 10)
        .unwrap()
        .is_empty());
    assert!(store
        .events(&EventFilter::default(), u64::MAX, 10)
        .unwrap()
        .is_empty());
}

#[test]
fn filtered_queries_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        seeded(&store);
        store.flush().unwrap();
    }
    let store = open(dir.path());
    let f = filter(None, None, Some("n1"), None);
    assert_eq!(seqs(&store.events(&f, 0, 100).unwrap()), vec![2, 5, 8, 11]);
    let e = &store.events(&f, 4, 1).unwrap()[0];
    assert_eq!(
        (e.seq, e.kind, e.task.as_deref()),
        (5, EventKind::AllocationGranted, Some("a"))
    );
}

#[test]
fn task_pages_start_after_the_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        caldera_storage::Store::open(dir.path(), &caldera_storage::StoreConfig::default()).unwrap();
    let mut b = store.batch();
    for (i, id) in ["a", "ab", "b", "c"].iter().enumerate() {
        b.put_task(&common::task(id, "t", i as u64));
    }
    store.commit(b).unwrap();
    let ids = |cursor: &str| -> Vec<String> {
        store
            .tasks_after(cursor)
            .map(|t| t.unwrap().spec.task_id)
            .collect()
    };
    assert_eq!(ids(""), ["a", "ab", "b", "c"]);
    assert_eq!(ids("a"), ["ab", "b", "c"]);
    assert_eq!(ids("ab"), ["b", "c"]);
    assert_eq!(ids("c"), Vec::<String>::new());
}

#[test]
fn a_bounded_read_stops_at_its_budget_and_says_where_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    seeded(&store);
    // Node n1 and tenant beta: no event has both, so an unbounded read would
    // walk the whole n1 index (2, 5, 8, 11) for nothing.
    let f = filter(None, Some("beta"), Some("n1"), None);
    let page = store.events_page(&f, 0, 10, 2).unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.resume_after, Some(5), "examined 2 and 5");
    let page = store.events_page(&f, 5, 10, 2).unwrap();
    assert_eq!(page.resume_after, Some(11), "examined 8 and 11");
    // Every matching event comes back across bounded pages, once, in order.
    let f = filter(None, Some("acme"), None, None);
    let all = seqs(&store.events(&f, 0, usize::MAX).unwrap());
    let (mut cursor, mut paged) = (0, Vec::new());
    loop {
        let page = store.events_page(&f, cursor, 2, 3).unwrap();
        paged.extend(seqs(&page.events));
        match (page.resume_after, page.events.last()) {
            (Some(r), _) => cursor = r,
            (None, Some(last)) if page.events.len() == 2 => cursor = last.seq,
            _ => break,
        }
    }
    assert_eq!(paged, all);
}
