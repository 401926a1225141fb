//! A release whose commit fails must not leave the ledger in memory ahead of
//! sled (were a failed Free commit only logged, the ledger would offer room
//! sled still holds): the Scheduler stops and is rebuilt from what was recorded.
use super::Scheduler;
use crate::clock::Clock;
use crate::config::ServerConfig;
use crate::durability::FlushGate;
use crate::protocol::scheduler::{Free, Stats};
use crate::registry::Registry;
use caldera_spec::{TaskRecord, TaskState};
use caldera_storage::{Store, StoreConfig};
use std::sync::Arc;
use std::time::Duration;

fn held(store: &Store) {
    let mut spec = caldera_spec::parse_task_spec(
        br#"{"task_id":"run","task_type":"training","resources":{"cpu":{"cores":1}},"command":["true"]}"#,
    )
    .unwrap();
    spec.task_id = caldera_spec::task_key("t", "run");
    let mut a = crate::fixtures::allocation("t/run.1", "t/run", "n");
    a.tenant = "t".into();
    let mut rec = TaskRecord::new(spec, "t".into(), 1, 0);
    rec.allocation = Some(a.clone());
    rec.attempts = 1;
    rec.transition(TaskState::Running, 3, None);
    let mut b = store.batch();
    b.put_task(&rec);
    b.put_allocation(&a);
    store.commit(b).unwrap();
}

#[test]
fn a_free_whose_commit_fails_rebuilds_the_scheduler_from_sled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    held(&store);
    actix_rt::System::new().block_on(async move {
        let gate = FlushGate::start(store, Default::default());
        let s = Scheduler::load(
            Clock::start(),
            gate.clone(),
            Arc::new(Registry::default()),
            &ServerConfig::default(),
            Arc::default(),
        )
        .unwrap();
        let s = actix::Supervisor::start(move |_| s);
        assert_eq!(s.send(Stats).await.unwrap().allocations, 1);
        gate.refuse_commits(1);
        s.do_send(Free {
            allocation_id: "t/run.1".into(),
            reason: "finished".into(),
        });
        // The release was not recorded: sled still holds the allocation, and
        // after the rebuild so does the ledger — never "freed in memory only".
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(gate.store().allocation("t/run.1").unwrap().is_some());
        assert_eq!(
            s.send(Stats).await.unwrap().allocations,
            1,
            "memory agrees with sled"
        );
        // With the fault gone, the same release is recorded.
        s.do_send(Free {
            allocation_id: "t/run.1".into(),
            reason: "finished".into(),
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(s.send(Stats).await.unwrap().allocations, 0);
        assert!(gate.store().allocation("t/run.1").unwrap().is_none());
    });
}
