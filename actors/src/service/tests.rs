//! ServiceActor over a real sled store: it owns the service's record, is
//! listed as a service (never as a task), reaches its replicas only by the
//! messages a task answers, and is rebuilt from sled like every entity.
use super::ServiceActor;
use crate::errors::Result;
use crate::protocol::lifecycle::{Observation, Observe, Rebuild};
use crate::protocol::service::{ReplicaState, Scale};
use crate::protocol::task::*;
use crate::protocol::{Reply, TaskHandle};
use crate::stand_ins::{shared, Heard};
use caldera_spec::{TaskRecord, TaskState};
use caldera_storage::{Store, StoreConfig};
use std::time::Duration;

/// A two-replica inference service `svc` of tenant acme.
fn service() -> TaskRecord {
    let spec = caldera_spec::parse_task_spec(
        br#"{"task_id":"svc","task_type":"inference","replicas":2,"resources":{"gpu":{"count":1,"share":0.25}},"command":["true"]}"#,
    )
    .unwrap();
    TaskRecord::new(spec, "acme".into(), 1, 0)
}

/// A replica that is no actor at all: it writes down every message it gets
/// (`<replica> <message>`), so a test sees exactly what its service sent.
struct ReplicaStandIn {
    id: String,
    heard: Heard,
}

impl ReplicaStandIn {
    fn note(&self, what: &str) {
        self.heard.note(format!("{} {what}", self.id));
    }
}

impl TaskPort for ReplicaStandIn {
    fn rebuild(&self, _: Rebuild) {
        self.note("rebuild")
    }
    fn placed(&self, _: Placed) {
        self.note("placed")
    }
    fn pending(&self, _: Pending) {
        self.note("pending")
    }
    fn workload(&self, _: Workload) {
        self.note("workload")
    }
    fn preempt(&self, _: Preempt) {
        self.note("preempt")
    }
    fn reclaim(&self, _: Reclaim) {
        self.note("reclaim")
    }
    fn remarked(&self, _: Remarked) {
        self.note("remarked")
    }
    fn node_lost(&self, _: NodeLost) {
        self.note("node_lost")
    }
    fn drain(&self, _: Drain) {
        self.note("drain")
    }
    fn workload_missing(&self, _: WorkloadMissing) {
        self.note("workload_missing")
    }
    fn runs_model(&self, m: RunsModel) {
        self.note(&format!("runs_model {}", m.model))
    }
    fn release_unanswered(&self, m: Release) {
        self.note(&format!("release by {}", m.by))
    }
    fn observe(&self, _: Observe) -> Reply<Observation> {
        Box::pin(async { Ok(Observation::default()) })
    }
    fn release(&self, m: Release) -> Reply<Result<TaskRecord>> {
        self.note(&format!("release (asked) by {}", m.by));
        Box::pin(async { Err(actix::MailboxError::Closed) })
    }
    fn snapshot(&self, _: TaskSnapshot) -> Reply<TaskRecord> {
        Box::pin(async { Err(actix::MailboxError::Closed) })
    }
}

/// Waits (real time, a few ms at a time) until `pred` holds.
async fn until(pred: impl Fn() -> bool) -> bool {
    for _ in 0..400 {
        if pred() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pred()
}

/// The replicas a service finds live are whatever answers a task's
/// messages: scaled in, it releases the surplus one by message, and a
/// replica's reported state is what makes the service Running.
#[test]
fn a_service_reaches_its_replicas_only_by_their_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let svc_rec = service();
    // Both replicas were recorded before (queued), and answer as stand-ins.
    for i in 0..2 {
        let mut r = svc_rec.clone();
        r.spec.task_id = format!("svc.r{i}");
        r.spec.replicas = None;
        r.service = Some("svc".into());
        let mut b = store.batch();
        b.put_task(&r);
        store.commit(b).unwrap();
    }
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        for i in 0..2 {
            let id = format!("svc.r{i}");
            let stand_in = ReplicaStandIn {
                id: id.clone(),
                heard: heard.clone(),
            };
            sh.registry.add_task(&id, TaskHandle::new(stand_in));
        }
        let svc = ServiceActor::spawn(svc_rec, sh.clone(), None);
        sh.registry.add_service("svc", svc.clone());
        assert!(
            sh.registry.task("svc").is_none(),
            "a service is no task actor"
        );

        let after = svc.send(Scale { replicas: 1 }).await.unwrap().unwrap();
        assert_eq!(after.desired_replicas, Some(1));
        let released = "svc.r1 release by scale-in of svc".to_string();
        assert!(
            until(|| heard.all().contains(&released)).await,
            "{:?}",
            heard.all()
        );

        svc.do_send(ReplicaState {
            replica: "svc.r0".into(),
            state: TaskState::Running,
        });
        let running = || sh.gate.store().task("svc").unwrap().unwrap().state;
        assert!(until(|| running() == TaskState::Running).await);
        let r = svc.send(TaskSnapshot).await.unwrap();
        assert_eq!(r.state, TaskState::Running);
        // Nothing else went to the replicas: no start, no enqueue of its own.
        assert_eq!(heard.all(), vec![released]);
    });
}

/// A service rebuilt by its supervisor reads its record back, stays listed
/// under the same handle, and learns its replicas again without creating
/// them twice.
#[test]
fn a_rebuilt_service_keeps_its_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let mut b = store.batch();
    b.put_task(&service());
    store.commit(b).unwrap();
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let svc = ServiceActor::spawn(service(), sh.clone(), None);
        sh.registry.add_service("svc", svc.clone());
        let enqueues = || {
            let mut e: Vec<String> = heard
                .all()
                .into_iter()
                .filter(|h| h.starts_with("enqueue"))
                .collect();
            e.sort();
            e
        };
        assert!(until(|| enqueues().len() == 2).await, "{:?}", heard.all());

        svc.do_send(Rebuild {
            why: "a test".into(),
        });
        let o = svc.send(Observe).await.unwrap();
        assert_eq!((o.kind, o.restarts), ("task", 1), "{o:?}");
        assert_eq!(o.last_fault.as_deref(), Some("a test"));
        assert!(sh.registry.service("svc").is_some());
        let r = svc.send(TaskSnapshot).await.unwrap();
        assert_eq!(r.state, TaskState::Queued);
        // Its replicas live on as they were: no third replica, no re-enqueue.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(enqueues(), vec!["enqueue svc.r0", "enqueue svc.r1"]);
        let keys: Vec<String> = sh.gate.store().task_keys().flatten().collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
    });
}

/// A service keeps `replicas` replica tasks (`svc.r0`, `svc.r1`), each an
/// ordinary queued task; scaling to 1 releases the highest (queued: cancelled,
/// dequeued).
#[test]
fn a_service_keeps_its_replicas_and_scales_in_from_the_top() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let rec = service();
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let svc = ServiceActor::spawn(rec, sh.clone(), None);
        sh.registry.add_service("svc", svc.clone());
        until(|| heard.all().len() >= 2).await;
        let mut enq = heard.all();
        enq.sort();
        assert_eq!(enq, vec!["enqueue svc.r0", "enqueue svc.r1"]);
        assert!(sh.registry.task("svc.r0").is_some() && sh.registry.task("svc.r1").is_some());
        for r in ["svc.r0", "svc.r1"] {
            let stored = sh.gate.store().task(r).unwrap().unwrap();
            assert_eq!(
                (stored.service.as_deref(), stored.state),
                (Some("svc"), TaskState::Queued)
            );
        }

        let after = svc.send(Scale { replicas: 1 }).await.unwrap().unwrap();
        assert_eq!(after.desired_replicas, Some(1));
        let dequeued = "dequeue svc.r1".to_string();
        assert!(
            until(|| heard.all().contains(&dequeued)).await,
            "{:?}",
            heard.all()
        );
        let mut r1 = None;
        for _ in 0..100 {
            r1 = sh.gate.store().task("svc.r1").unwrap();
            if r1.as_ref().is_some_and(|r| r.state == TaskState::Cancelled) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(r1.map(|r| r.state), Some(TaskState::Cancelled));
        assert!(sh.registry.task("svc.r0").is_some());
    });
}
