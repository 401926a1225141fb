//! The resync on a node's session, with a stand-in Scheduler whose books
//! give the node nothing: an event number that skips asks the agent for a
//! digest (once while it is on its way), and the digest's workload the books
//! do not give the node is stopped, the repair recorded as the node's event.
use super::NodeActor;
use crate::protocol::node::{AgentHello, AgentMessage};
use crate::stand_ins::{shared, Heard};
use crate::supervision_tests::{hello, node_record};
use caldera_spec::wire::{
    Digest, Heartbeat, NodeMessage, ServerMessage, WorkloadEvent, WorkloadEventKind, WorkloadReport,
};
use caldera_spec::EventKind;
use caldera_storage::{EventFilter, Store, StoreConfig};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

fn event(seq: u64) -> NodeMessage {
    NodeMessage::Event(WorkloadEvent {
        allocation_id: "a1".into(),
        task_id: "t1".into(),
        epoch: 1,
        at_ms: 0,
        kind: WorkloadEventKind::Preparing,
        seq,
    })
}

fn heartbeat(seq: u64, events_sent: u64) -> NodeMessage {
    NodeMessage::Heartbeat(Heartbeat {
        epoch: 1,
        seq,
        metrics: Default::default(),
        workloads: vec![],
        cache: None,
        images: None,
        events_sent,
    })
}

fn running_a1() -> WorkloadReport {
    WorkloadReport {
        allocation_id: "a1".into(),
        task_id: "t1".into(),
        epoch: 1,
        pid: Some(7),
        exit: None,
        usage: Default::default(),
        warming: false,
        ready: Some(true),
        generation: 0,
        port: None,
    }
}

/// The next message to the agent other than a lease renewal.
async fn next(rx: &mut UnboundedReceiver<ServerMessage>) -> ServerMessage {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a message within 5 s")
            .expect("the session is open");
        if !matches!(m, ServerMessage::LeaseRenewed { .. }) {
            return m;
        }
    }
}

#[test]
fn a_gap_asks_for_one_digest_and_the_digest_is_repaired_against_the_books() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
    let heard = Heard::default();
    actix_rt::System::new().block_on(async move {
        let sh = shared(store, &heard);
        let node = NodeActor::spawn(node_record("gpu-5"), sh.clone(), Duration::ZERO);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        node.do_send(AgentHello {
            hello: hello("gpu-5", vec![]),
            session_id: 1,
            tx,
        });
        assert!(matches!(next(&mut rx).await, ServerMessage::Welcome(_)));
        let say = |msg| node.do_send(AgentMessage { session_id: 1, msg });
        // Events 1 and 2 in order, then 4: event 3 never arrived.
        say(event(1));
        say(event(2));
        say(heartbeat(1, 2));
        say(event(4));
        let ServerMessage::Resync { epoch, request } = next(&mut rx).await else {
            panic!("a gap asks for a digest");
        };
        assert_eq!(epoch, 1);
        // Another gap while that digest is on its way asks for nothing more.
        say(heartbeat(2, 6));
        say(NodeMessage::Digest(Digest {
            epoch: 1,
            request,
            events_sent: 6,
            workloads: vec![running_a1()],
        }));
        // The books give the node nothing: what it holds is stopped.
        match next(&mut rx).await {
            ServerMessage::Stop(s) => assert_eq!((s.allocation_id.as_str(), s.epoch), ("a1", 1)),
            other => panic!("expected the stop of a1, got {other:?}"),
        }
        // The digest covered events up to 6: a heartbeat counting 6 is no gap.
        say(heartbeat(3, 6));
        say(event(7));
        let filter = EventFilter {
            node: Some("gpu-5".into()),
            kind: Some(EventKind::NodeResynced),
            ..Default::default()
        };
        let mut notes = Vec::new();
        for _ in 0..50 {
            notes = sh.gate.store().events(&filter, 0, 10).unwrap_or_default();
            if !notes.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(notes.len(), 1, "{notes:?}");
        let text = &notes[0].message;
        assert!(
            text.contains("workload event 3 never arrived (got 4)") && text.contains("a1"),
            "{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok(m) = rx.try_recv() {
            assert!(
                matches!(m, ServerMessage::LeaseRenewed { .. }),
                "nothing more after the repair: {m:?}"
            );
        }
    });
}
