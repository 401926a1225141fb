//! The Scheduler records a grant in one batch when its task takes it
//! (`RecordGrant`), refuses one its ledger no longer holds, and frees an
//! allocation the ledger still holds for a task that asks for room again.
use crate::common;
use caldera_actors::clock::Clock;
use caldera_actors::config::ServerConfig;
use caldera_actors::durability::FlushGate;
use caldera_actors::protocol::scheduler::{Enqueue, LedgerAllocations, RecordGrant, Stats};
use caldera_actors::registry::Registry;
use caldera_actors::scheduler::Scheduler;
use caldera_spec::{Allocation, Event, EventKind, TaskRecord, TaskState};
use caldera_storage::{EventFilter, Store, StoreConfig};
use std::sync::Arc;

fn task(id: &str, seq: u64) -> TaskRecord {
    let spec = caldera_spec::parse_task_spec(
        format!(
            r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1}}}},"command":["true"]}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    TaskRecord::new(spec, "t".into(), 1, seq)
}

use common::allocation;

/// What the task would plan on taking `a`: bound, Scheduled.
fn planned(mut rec: TaskRecord, a: &Allocation) -> (TaskRecord, Event) {
    rec.allocation = Some(a.clone());
    rec.attempts += 1;
    rec.transition(TaskState::Scheduled, 3, Some("placed on n".into()));
    let e = Event::new(3, EventKind::TaskTransition, "queued -> scheduled").task(&a.task_id);
    (rec, e)
}

fn start(store: Store) -> (Arc<FlushGate>, actix::Addr<Scheduler>) {
    let gate = FlushGate::start(store, Default::default());
    let s = Scheduler::load(
        Clock::start(),
        gate.clone(),
        Arc::new(Registry::default()),
        &ServerConfig::default(),
        Arc::default(),
    )
    .unwrap();
    (gate, actix::Supervisor::start(move |_| s))
}

fn released(store: &Store, task: &str) -> Vec<String> {
    let f = EventFilter {
        task: Some(task.into()),
        kind: Some(EventKind::AllocationReleased),
        ..EventFilter::default()
    };
    let events = store.events(&f, 0, 100).unwrap();
    events.into_iter().map(|e| e.message).collect()
}

/// A grant the ledger no longer holds (a rebuild dropped it) is refused:
/// nothing is written, and the task waits in the queue again.
#[test]
fn a_grant_the_ledger_no_longer_holds_is_refused_and_the_task_waits_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let waiting = task("w", 0);
    let mut b = store.batch();
    b.put_task(&waiting);
    store.commit(b).unwrap();
    actix_rt::System::new().block_on(async move {
        let (gate, s) = start(store);
        let a = allocation("w.1", "w", 1);
        let (record, event) = planned(waiting, &a);
        let answer = s
            .send(RecordGrant {
                allocation: a,
                record,
                event,
            })
            .await
            .unwrap();
        assert_eq!(
            answer.unwrap_err().to_string(),
            "allocation w.1 is no longer in the ledger"
        );
        let store = gate.store();
        assert!(store.allocation("w.1").unwrap().is_none());
        let stored = store.task("w").unwrap().unwrap();
        assert_eq!((stored.state, stored.attempts), (TaskState::Queued, 0));
        assert!(stored.allocation.is_none());
        let stats = s.send(Stats).await.unwrap();
        assert_eq!((stats.queued, stats.allocations), (1, 0), "queued again");
    });
}

/// A grant the ledger holds is recorded in one batch: the allocation (the
/// ledger's copy, with its epoch) and the task's record agree in sled.
#[test]
fn a_grant_the_ledger_holds_is_recorded_with_the_task_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    // Restored at boot: a task that holds its allocation (Scheduled).
    let a = allocation("s.1", "s", 4);
    let (held, _) = planned(task("s", 0), &a);
    let mut b = store.batch();
    b.put_task(&held);
    b.put_allocation(&a);
    store.commit(b).unwrap();
    actix_rt::System::new().block_on(async move {
        let (gate, s) = start(store);
        let (record, event) = planned(held, &a);
        let ticket = s
            .send(RecordGrant {
                allocation: a.clone(),
                record,
                event,
            })
            .await
            .unwrap()
            .expect("the ledger holds it");
        gate.durable(ticket).await;
        let store = gate.store();
        let stored = store.task("s").unwrap().unwrap();
        assert_eq!(stored.allocation.as_ref(), Some(&a));
        assert_eq!(store.allocation("s.1").unwrap().as_ref(), Some(&a));
        assert_eq!(stored.allocation.unwrap().epoch, 4);

        // Dispatched again under a newer epoch (the node said hello again):
        // recorded under it, in the ledger, sled's copy and the record alike.
        let mut again = a.clone();
        again.epoch = 6;
        let mut record = store.task("s").unwrap().unwrap();
        record.allocation = Some(again.clone());
        let event = Event::new(4, EventKind::AllocationGranted, "dispatched under epoch 6");
        let ticket = s
            .send(RecordGrant {
                allocation: again.clone(),
                record,
                event,
            })
            .await
            .unwrap()
            .expect("the same allocation under another epoch");
        gate.durable(ticket).await;
        assert_eq!(store.allocation("s.1").unwrap(), Some(again.clone()));
        let stored = store.task("s").unwrap().unwrap();
        assert_eq!(stored.allocation, Some(again.clone()));
        let ledger = s.send(LedgerAllocations).await.unwrap();
        assert_eq!(ledger, vec![again]);
    });
}

/// A task that asks for room holds none: an allocation the ledger still has
/// for it (its actor was rebuilt from sled after a failed commit, so it waits
/// again) is freed, in sled too, with an event.
#[test]
fn an_enqueue_frees_the_allocation_the_ledger_still_holds_for_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let a = allocation("r.1", "r", 1);
    let mut running = task("r", 0);
    running.transition(TaskState::Running, 2, None);
    running.allocation = Some(a.clone());
    let mut b = store.batch();
    b.put_task(&running);
    b.put_allocation(&a);
    store.commit(b).unwrap();
    actix_rt::System::new().block_on(async move {
        let (gate, s) = start(store);
        assert_eq!(s.send(Stats).await.unwrap().allocations, 1);
        s.do_send(Enqueue {
            task_id: "r".into(),
            tenant: "t".into(),
            spec: running.spec.clone(),
            seq: 0,
            attempt: 2,
            queued_ms: 0,
        });
        let stats = s.send(Stats).await.unwrap();
        assert_eq!((stats.allocations, stats.queued), (0, 1));
        let store = gate.store();
        assert!(store.allocation("r.1").unwrap().is_none());
        assert_eq!(
            released(store, "r"),
            vec!["allocation r.1 on n released: its task asks for room again, so it holds none"]
        );
    });
}
