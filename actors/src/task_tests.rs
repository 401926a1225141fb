//! TaskActor shells over a real sled store and a stand-in Scheduler: what
//! the task tells the Scheduler, and what it records.
use crate::protocol::lifecycle::Observe;
use crate::protocol::task::{Placed, TaskSnapshot};
use crate::stand_ins::{shared, Heard};
use crate::task::TaskActor;
use caldera_spec::{Allocation, TaskRecord, TaskState};
use caldera_storage::{Store, StoreConfig};
use std::time::Duration;

fn record(json: &str, seq: u64) -> TaskRecord {
    let spec = caldera_spec::parse_task_spec(json.as_bytes()).unwrap();
    TaskRecord::new(spec, "acme".into(), 1, seq)
}

fn states(r: &TaskRecord) -> Vec<&'static str> {
    r.history.iter().map(|t| t.state.as_str()).collect()
}

/// A queued one-GPU training task `id` of tenant acme.
fn training(id: &str) -> TaskRecord {
    let spec = format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1}}}},"command":["true"]}}"#
    );
    record(&spec, 0)
}

/// The first allocation of task `id` (tenant acme) on a node nobody knows.
fn nowhere(id: &str) -> Allocation {
    Allocation {
        allocation_id: format!("{id}.1"),
        task_id: id.into(),
        tenant: "acme".into(),
        node: "nowhere".into(),
        gpus: vec![],
        cpu_milli: 1000,
        memory_mb: 0,
        disk_mb: 0,
        exclusive: false,
        epoch: 0,
        created_ms: 1,
        borrowed: false,
        priority: 500,
        image_digest: None,
    }
}

/// Waits (on real time, a few ms) until `pred` holds for what `heard` heard.
async fn until_heard(heard: &Heard, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
    for _ in 0..200 {
        let all = heard.all();
        if pred(&all) {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    heard.all()
}

/// A queued task enqueues itself; placed on a node nobody knows, it cannot
/// dispatch: it frees the allocation and goes back to the queue — without
/// counting a node loss (the node was never lost).
#[test]
fn a_task_placed_on_an_unknown_node_frees_and_requeues() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let rec = training("t1");
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let t = TaskActor::spawn(rec, sh.clone(), None);
        sh.registry.add_task("t1", t.clone());
        let h = until_heard(&heard, |h| h.contains(&"enqueue t1".to_string())).await;
        assert_eq!(h, vec!["enqueue t1"]);

        t.do_send(Placed {
            allocation: nowhere("t1"),
            note: None,
        });
        let h = until_heard(&heard, |h| h.len() >= 4).await;
        assert_eq!(
            h,
            vec!["enqueue t1", "record_grant t1.1", "free t1.1", "enqueue t1"]
        );

        let r = t.send(TaskSnapshot).await.unwrap();
        assert_eq!(r.state, TaskState::Queued);
        assert_eq!(states(&r), vec!["queued", "scheduled", "queued"]);
        assert_eq!((r.attempts, r.node_losses), (1, 0));
        assert!(r.allocation.is_none());
        // What the actor holds is what sled holds.
        let stored = sh.gate.store().task("t1").unwrap().unwrap();
        assert_eq!(states(&stored), states(&r));
        assert_eq!(t.send(Observe).await.unwrap().state, "queued");
    });
}

/// Plan, record, then act: the requeue after a failed
/// dispatch cannot be recorded, so nothing of it happens — no free, no
/// enqueue; the task is rebuilt from sled (still Scheduled, holding its
/// grant), starts again, and this time the requeue is recorded and carried
/// out once. Acting first would send the free and the enqueue while sled still
/// said Scheduled with the allocation: the ledger and the task would disagree.
#[test]
fn a_reaction_that_cannot_be_recorded_acts_on_nothing() {
    use crate::commit_faults::FaultRule;
    use crate::commit_site::CommitSite;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let rec = training("t2");
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let t = TaskActor::spawn(rec, sh.clone(), None);
        sh.registry.add_task("t2", t.clone());
        until_heard(&heard, |h| h.contains(&"enqueue t2".to_string())).await;
        // The grant is recorded; the next transition (the requeue) is not.
        let rule = FaultRule { skip: 0, fail: 1 };
        sh.gate.faults().arm(Some(CommitSite::TaskTransition), rule);
        t.do_send(Placed {
            allocation: nowhere("t2"),
            note: None,
        });
        let h = until_heard(&heard, |h| h.len() >= 4).await;
        assert_eq!(
            h,
            vec!["enqueue t2", "record_grant t2.1", "free t2.1", "enqueue t2"],
            "one free and one enqueue: the requeue that was not recorded sent none"
        );
        assert_eq!(
            sh.gate.faults().counts()[&CommitSite::TaskTransition].refused,
            1
        );
        let o = t.send(Observe).await.unwrap();
        assert_eq!(o.restarts, 1, "{o:?}");
        let r = t.send(TaskSnapshot).await.unwrap();
        let stored = sh.gate.store().task("t2").unwrap().unwrap();
        assert_eq!(
            (r.state, stored.state),
            (TaskState::Queued, TaskState::Queued)
        );
        assert_eq!(states(&stored), vec!["queued", "scheduled", "queued"]);
        assert!(r.allocation.is_none() && stored.allocation.is_none());
    });
}
