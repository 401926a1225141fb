//! Shell tests: real actors over a real sled store, a stand-in Scheduler (any
//! port will do: that is what the protocol's handles are for), and paused,
//! advanced tokio time.
use crate::node::NodeActor;
use crate::protocol::lifecycle::{Observe, Rebuild};
use crate::protocol::node::{AgentHello, NodeSnapshot};
use crate::protocol::tenant::{ChangeQuota, TenantSnapshot};
use crate::stand_ins::{shared, Heard};
use crate::tenant::TenantActor;
use caldera_spec::wire::{Hello, ServerMessage, PROTOCOL_VERSION};
use caldera_spec::{NodeInventory, NodeRecord, NodeState, Quota, TenantRecord};
use caldera_storage::{Store, StoreConfig};
use std::time::Duration;

fn gpus(n: f64) -> Quota {
    Quota {
        gpus: Some(n),
        ..Default::default()
    }
}

fn tenant(store: &Store, quota: Quota) -> TenantRecord {
    let rec = TenantRecord {
        name: "research".into(),
        token_sha256: "00".into(),
        quota,
        borrowing_limit: Quota::default(),
        created_ms: 1,
    };
    let mut b = store.batch();
    b.put_tenant(&rec);
    store.commit(b).unwrap();
    rec
}

fn change(q: f64) -> ChangeQuota {
    ChangeQuota {
        quota: Some(gpus(q)),
        borrowing_limit: None,
    }
}

/// The deliberately failing actor: a quota change whose commit fails. The
/// tenant stops, its supervisor restarts it on the same mailbox, and it reads
/// its record back from sled — the change that was not recorded is gone from
/// memory too, and the Scheduler never heard of it.
#[test]
fn a_tenant_whose_commit_fails_is_rebuilt_from_sled_on_the_same_handle() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let rec = tenant(&store, gpus(4.0));
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let t = TenantActor::spawn(rec, sh.clone());

        let after = t.send(change(8.0)).await.unwrap().unwrap();
        assert_eq!(after.quota.gpus, Some(8.0));
        let o = t.send(Observe).await.unwrap();
        assert_eq!(
            (o.kind, o.name.as_str(), o.restarts),
            ("tenant", "research", 0)
        );

        sh.gate.refuse_commits(1);
        let refused = t.send(change(16.0)).await.unwrap();
        // Refused as "not recorded, retry" (503), not a bare storage error.
        assert_eq!(
            refused.as_ref().err().map(|e| e.error_code().http_status),
            Some(503),
            "a change that was not recorded is refused: {refused:?}"
        );

        // Same handle, after the rebuild: 8 (what sled holds), not 16.
        let now = t.send(TenantSnapshot).await.unwrap();
        assert_eq!(now.quota.gpus, Some(8.0));
        let o = t.send(Observe).await.unwrap();
        assert_eq!(o.restarts, 1);
        assert!(
            o.last_fault
                .as_deref()
                .unwrap_or("")
                .contains("quota change not recorded"),
            "{o:?}"
        );
        // The Scheduler heard of 8 only.
        assert_eq!(heard.all(), vec!["set_quota research gpus=Some(8.0)"]);

        // After the fault clears, changes are recorded again.
        let later = t.send(change(2.0)).await.unwrap().unwrap();
        assert_eq!(later.quota.gpus, Some(2.0));
    });
}

/// A rebuild reads what sled holds now, whatever memory said.
#[test]
fn a_rebuilt_tenant_holds_what_sled_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let rec = tenant(&store, gpus(4.0));
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store.clone(), &heard);
        let t = TenantActor::spawn(rec.clone(), sh);
        tenant(&store, gpus(6.0)); // written behind the actor's back
        assert_eq!(t.send(TenantSnapshot).await.unwrap().quota.gpus, Some(4.0));
        t.do_send(Rebuild { why: "test".into() });
        assert_eq!(t.send(TenantSnapshot).await.unwrap().quota.gpus, Some(6.0));
        assert_eq!(t.send(Observe).await.unwrap().restarts, 1);
    });
}

pub(crate) fn inventory() -> NodeInventory {
    NodeInventory {
        runtimes: Vec::new(),
        hostname: "n".into(),
        gpus: vec![],
        cpu_cores: 8,
        memory_total_mb: 1024,
        disks: vec![],
        disk_offered_mb: 1024,
        labels: Default::default(),
        simulated_host: true,
        isolation: "none".into(),
        gpu_source: "simulated".into(),
    }
}

/// A registered, ready node named `name` that has no secret yet.
pub(crate) fn node_record(name: &str) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        inventory: inventory(),
        epoch: 0,
        state: NodeState::Ready,
        joined_ms: 1,
        last_seen_ms: 1,
        secret_sha256: None,
        revoked: false,
        cordon: None,
    }
}

/// A first hello (no secret yet) from `name`, reporting `workloads`.
pub(crate) fn hello(name: &str, workloads: Vec<caldera_spec::wire::WorkloadReport>) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        node_name: name.into(),
        agent_version: "test".into(),
        node_secret: None,
        data_dir: String::new(),
        inventory: inventory(),
        workloads,
        cache: Default::default(),
        peer_url: None,
        advertise_host: None,
        images: Default::default(),
    }
}

/// Accelerated time: a node that said hello and then went silent is lost
/// once the (default 4 s) node timeout passes on tokio's paused clock — not
/// before — its epoch is fenced (1 at hello -> 2) and the Scheduler is told.
#[test]
fn a_silent_node_is_lost_after_the_timeout_in_accelerated_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let heard = Heard::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    // actix runs its actors as local tasks: a LocalSet on a paused runtime.
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let sh = shared(store, &heard);
        let node = NodeActor::spawn(node_record("gpu-7"), sh.clone(), Duration::ZERO);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        node.do_send(AgentHello {
            hello: hello("gpu-7", vec![]),
            session_id: 1,
            tx,
        });
        let welcome = rx.recv().await;
        assert!(matches!(welcome, Some(ServerMessage::Welcome(ref w)) if w.epoch == 1));
        // 3.5 s of silence: under the 4 s timeout.
        tokio::time::advance(Duration::from_millis(3_500)).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let (rec, connected, _) = node.send(NodeSnapshot).await.unwrap();
        assert_eq!((rec.state, connected), (NodeState::Ready, true));
        // 1 s more (4.5 s silent): lost, epoch fenced, scheduler told.
        tokio::time::advance(Duration::from_millis(1_000)).await;
        // Let the liveness check that came due run before asking.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let (rec, connected, _) = node.send(NodeSnapshot).await.unwrap();
        assert_eq!(
            (rec.state, rec.epoch, connected),
            (NodeState::Lost, 2, false)
        );
        assert_eq!(node.send(Observe).await.unwrap().state, "lost");
        assert!(
            heard.all().contains(&"node_down gpu-7".to_string()),
            "{:?}",
            heard.all()
        );
    });
}

/// A hello the control plane cannot answer (the Scheduler does not reply) is
/// refused — the agent says hello again — and never welcomed with a kill list
/// of every workload it reported.
#[test]
fn a_hello_the_scheduler_cannot_answer_is_refused_not_welcomed_with_kills() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let heard = Heard::deaf();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let node = NodeActor::spawn(node_record("gpu-8"), sh.clone(), Duration::ZERO);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let running = caldera_spec::wire::WorkloadReport {
            allocation_id: "train.1".into(),
            task_id: "train".into(),
            epoch: 1,
            pid: Some(4242),
            exit: None,
            usage: Default::default(),
            warming: false,
            ready: None,
            generation: 0,
            port: None,
        };
        node.do_send(AgentHello {
            hello: hello("gpu-8", vec![running]),
            session_id: 1,
            tx,
        });
        match rx.recv().await {
            Some(ServerMessage::Refused { code, reason }) => {
                assert_eq!(
                    code,
                    caldera_spec::codes::NODE_HELLO_UNANSWERED.code,
                    "{reason}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let (_, connected, _) = node.send(NodeSnapshot).await.unwrap();
        assert!(!connected, "the session is dropped; the agent reconnects");
    });
}

/// Persist, then act: a cordon whose commit fails answers 503, leaves the
/// node as it was and tells the Scheduler nothing; recorded, the Scheduler
/// hears it, and an uncordon lifts it the same way.
#[test]
fn a_cordon_that_cannot_be_recorded_answers_503_and_changes_nothing() {
    use crate::protocol::node::{CordonNode, Uncordon};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let node = NodeActor::spawn(node_record("gpu-9"), sh.clone(), Duration::ZERO);
        sh.gate.refuse_commits(1);
        let refused = node.send(CordonNode { drain: false }).await.unwrap();
        assert_eq!(
            refused.as_ref().err().map(|e| e.error_code().http_status),
            Some(503),
            "{refused:?}"
        );
        let (rec, _, _) = node.send(NodeSnapshot).await.unwrap();
        assert_eq!(rec.cordon, None);
        assert!(
            !heard.all().iter().any(|h| h.starts_with("node_cordoned")),
            "{:?}",
            heard.all()
        );

        node.send(CordonNode { drain: false })
            .await
            .unwrap()
            .unwrap();
        let (rec, _, _) = node.send(NodeSnapshot).await.unwrap();
        let cordon = rec.cordon.expect("cordoned");
        assert_eq!(
            (cordon.by, cordon.drain),
            (caldera_spec::CordonBy::Operator, false)
        );
        let stored = sh
            .gate
            .store()
            .node("gpu-9")
            .unwrap()
            .and_then(|n| n.cordon);
        assert_eq!(stored.map(|c| c.by), Some(caldera_spec::CordonBy::Operator));
        assert!(
            heard
                .all()
                .contains(&"node_cordoned gpu-9 true".to_string()),
            "{:?}",
            heard.all()
        );

        node.send(Uncordon).await.unwrap().unwrap();
        let (rec, _, _) = node.send(NodeSnapshot).await.unwrap();
        assert_eq!(rec.cordon, None);
        assert!(
            heard
                .all()
                .contains(&"node_cordoned gpu-9 false".to_string()),
            "{:?}",
            heard.all()
        );
    });
}
