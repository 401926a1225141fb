//! The Scheduler is supervised: stopped as a fatal error would stop it, it is
//! restarted on the same address and rebuilds its ledger and queue from sled.
use crate::common;
use caldera_actors::config::ServerConfig;
use caldera_actors::durability::FlushGate;
use caldera_actors::protocol::scheduler::{Restart, Stats};
use caldera_actors::registry::Registry;
use caldera_actors::scheduler::Scheduler;
use caldera_spec::{NodeRecord, NodeState, TaskRecord, TaskState};
use caldera_storage::{Store, StoreConfig};
use std::sync::Arc;

fn task(id: &str, seq: u64) -> TaskRecord {
    let spec = caldera_spec::parse_task_spec(
        format!(
            r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1}}}}}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    TaskRecord::new(spec, "t".into(), 1, seq)
}

#[test]
fn a_stopped_scheduler_is_restarted_and_rebuilt_from_storage() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let inv = common::inventory();
    let running = {
        let mut t = task("running", 0);
        t.transition(TaskState::Running, 2, None);
        t
    };
    let alloc = common::allocation("running.1", "running", 1);
    // A running task's record names the allocation it holds (boot keeps only
    // allocations whose task holds exactly them).
    let mut running = running;
    running.allocation = Some(alloc.clone());
    let mut b = store.batch();
    b.put_node(&NodeRecord {
        name: "n".into(),
        inventory: inv,
        epoch: 1,
        state: NodeState::Ready,
        joined_ms: 1,
        last_seen_ms: 1,
        secret_sha256: None,
        revoked: false,
        cordon: None,
    });
    b.put_task(&running);
    b.put_task(&task("waiting", 1));
    b.put_allocation(&alloc);
    store.commit(b).unwrap();

    actix_rt::System::new().block_on(async move {
        let gate = FlushGate::start(store, Default::default());
        let registry = Arc::new(Registry::default());
        let config = ServerConfig::default();
        let s = Scheduler::load(
            caldera_actors::clock::Clock::start(),
            gate,
            registry,
            &config,
            Arc::default(),
        )
        .unwrap();
        let addr = actix::Supervisor::start(move |_| s);
        let before = addr.send(Stats).await.unwrap();
        assert_eq!(before.allocations, 1);
        assert_eq!(
            before.queued, 0,
            "nothing enqueued yet: no task actors in this test"
        );
        addr.send(Restart).await.unwrap();
        // Same address, answering again, rebuilt from sled: the ledger, and the
        // queue from the task records.
        let after = addr.send(Stats).await.unwrap();
        assert_eq!(after.allocations, 1);
        assert_eq!(after.queued, 1);
    });
}
