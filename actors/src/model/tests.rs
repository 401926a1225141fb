//! The warmup admission rules carried out by real actors: a
//! ModelVersionActor and real NodeActors whose agents are channels. Nothing
//! here waits for time to pass: every step is a message, and `settle` only
//! lets the actors handle what they were sent. A node's loss is its
//! revocation (the same `lose` path as a silent node's); the silent-node
//! timeout itself is covered in accelerated time by `supervision_tests`.
use super::ModelVersionActor;
use crate::config::ServerConfig;
use crate::node::NodeActor;
use crate::protocol::model::{NodeNeeds, VersionSnapshot};
use crate::protocol::node::{AgentGone, AgentHello, AgentMessage};
use crate::protocol::{ModelHandle, NodeHandle};
use crate::shared::Shared;
use crate::stand_ins::{shared, Heard};
use crate::supervision_tests::{hello, node_record};
use caldera_spec::weights::{CacheReport, WarmupProgress, WarmupReport, WeightSource};
use caldera_spec::wire::{NodeMessage, ServerMessage};
use caldera_spec::{CopyState, ModelState, ModelVersionRecord, ModelVersionSpec, WeightsSpec};
use caldera_storage::{Store, StoreConfig};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// One fake agent: its node's actor and what the control plane sent it.
struct Agent {
    node: NodeHandle,
    rx: UnboundedReceiver<ServerMessage>,
    /// The secret its first welcome issued (a later hello must carry it).
    secret: Option<String>,
    session: u64,
}

impl Agent {
    /// Every message sent so far, the welcome left out.
    fn drain(&mut self) -> Vec<ServerMessage> {
        let mut out = Vec::new();
        while let Ok(m) = self.rx.try_recv() {
            if !matches!(
                m,
                ServerMessage::Welcome(_) | ServerMessage::LeaseRenewed { .. }
            ) {
                out.push(m);
            }
        }
        out
    }

    fn report(&self, sha: &str, progress: WarmupProgress) {
        self.node.do_send(AgentMessage {
            session_id: self.session,
            msg: NodeMessage::Warmup(WarmupReport {
                epoch: 1,
                sha256: sha.into(),
                at_ms: 0,
                progress,
                owner: None,
            }),
        });
    }
}

/// A copy of all 1000 bytes verified after reading them from `source`.
fn verified(source: &str) -> WarmupProgress {
    WarmupProgress::Verified {
        source: source.into(),
        bytes_fetched: 1000,
        seconds: 1.0,
    }
}

fn sha(c: char) -> String {
    c.to_string().repeat(64)
}

fn version(name: &str, sha: &str) -> ModelVersionRecord {
    ModelVersionRecord {
        spec: ModelVersionSpec {
            name: name.into(),
            version: "v1".into(),
            weights: WeightsSpec {
                uri: format!("file:///models/{name}.bin"),
                size_bytes: 1000,
                sha256: sha.into(),
            },
            image: None,
        },
        state: ModelState::Registered,
        pinned: false,
        registered_at_ms: 0,
        owner: None,
        nodes: BTreeMap::new(),
        tasks: Default::default(),
        retire: None,
        checkpoint: None,
    }
}

/// Agents `names` said hello with a cache and a peer url.
async fn agents(sh: &Arc<Shared>, names: &[&str]) -> BTreeMap<String, Agent> {
    let mut out = BTreeMap::new();
    for n in names {
        running_task_on(sh, n);
        let node = NodeActor::spawn(node_record(n), sh.clone(), Duration::ZERO);
        sh.registry.add_node(n, node.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut h = hello(n, vec![]);
        h.cache = CacheReport {
            capacity_bytes: 1 << 30,
            ..Default::default()
        };
        h.peer_url = Some(format!("http://{n}"));
        node.do_send(AgentHello {
            hello: h,
            session_id: 1,
            tx,
        });
        let Some(ServerMessage::Welcome(w)) = rx.recv().await else {
            panic!("{n} was not welcomed")
        };
        let secret = w.node_secret;
        out.insert(
            n.to_string(),
            Agent {
                node,
                rx,
                secret,
                session: 1,
            },
        );
    }
    out
}

/// `name` says hello again (a restarted agent), its cache listing the
/// `(sha, source)` fetches: a source being read, or "" for a cut partial
/// that nothing reads (an agent killed mid-fetch).
async fn hello_again(a: &mut Agent, name: &str, fetching: &[(&str, &str)]) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut h = hello(name, vec![]);
    h.node_secret = a.secret.clone();
    h.cache = CacheReport {
        capacity_bytes: 1 << 30,
        fetching: fetching
            .iter()
            .map(|(s, from)| caldera_spec::weights::CacheFetch {
                sha256: s.to_string(),
                bytes_done: 1,
                size_bytes: 1000,
                source: from.to_string(),
                owner: None,
            })
            .collect(),
        ..Default::default()
    };
    h.peer_url = Some(format!("http://{name}"));
    // The old session closed first: a second live one would be refused.
    a.node.do_send(AgentGone {
        session_id: a.session,
    });
    a.session += 1;
    a.node.do_send(AgentHello {
        hello: h,
        session_id: a.session,
        tx,
    });
    let got = rx.recv().await;
    assert!(matches!(got, Some(ServerMessage::Welcome(_))), "{got:?}");
    a.rx = rx;
}

fn start(sh: &Arc<Shared>, rec: ModelVersionRecord) -> ModelHandle {
    let key = rec.key();
    let sha = rec.spec.weights.sha256.clone();
    let h = ModelVersionActor::spawn(rec, sh.clone());
    sh.registry.add_model(&key, &sha, h.clone());
    h
}

/// The task [`needs`] names on `node`, recorded running there: a failed
/// read is retried only while a task that uses the version runs there.
fn running_task_on(sh: &Arc<Shared>, node: &str) {
    let key = format!("acme/task-on-{node}");
    let body = format!(
        r#"{{"task_id":"task-on-{node}","task_type":"training","resources":{{"cpu":{{"cores":1}}}},"command":["serve"]}}"#
    );
    let mut spec = caldera_spec::parse_task_spec(body.as_bytes()).unwrap();
    // A record's task id is its key (`tenant/id`).
    spec.task_id = key.clone();
    let mut t = caldera_spec::TaskRecord::new(spec, "acme".into(), 0, 1);
    t.state = caldera_spec::TaskState::Running;
    t.allocation = Some(crate::fixtures::allocation("a1", &key, node));
    let mut b = sh.gate.store().batch();
    b.put_task(&t);
    sh.gate.store().commit(b).unwrap();
}

fn needs(m: &ModelHandle, node: &str) {
    m.do_send(NodeNeeds {
        node: node.into(),
        task: Some(format!("acme/task-on-{node}")),
    });
}

/// Lets every actor handle what it was sent (time does not move).
async fn settle() {
    for _ in 0..10 {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn source_of(msgs: &[ServerMessage]) -> Vec<WeightSource> {
    msgs.iter()
        .filter_map(|m| match m {
            ServerMessage::Warm(w) => Some(w.source.clone()),
            _ => None,
        })
        .collect()
}

fn grants(msgs: &[ServerMessage]) -> Vec<(String, String)> {
    msgs.iter()
        .filter_map(|m| match m {
            ServerMessage::PeerGrant(g) => Some((g.receiver.clone(), g.token.clone())),
            _ => None,
        })
        .collect()
}

fn run(f: impl std::future::Future<Output = ()>) {
    actix_rt::System::new().block_on(f);
}

fn shared_with(dir: &std::path::Path, config: ServerConfig) -> Arc<Shared> {
    let store = Store::open(dir, &StoreConfig::default()).unwrap();
    let sh = shared(store, &Heard::default());
    let mut sh = Arc::try_unwrap(sh).ok().unwrap();
    // No node may be lost for silence while a test runs, however loaded the machine.
    sh.config = config;
    sh.config.nodes.timeout_ms = 600_000;
    Arc::new(sh)
}

/// With `models.peer-stream-partial` (the default) a cold rollout does not wait
/// for the first copy: n1 reads the origin, and n2 and n3 are pointed at
/// peers still reading (each grant before its warm), one transfer per
/// peer: n2 from n1, n3 from n2. The origin is read once.
#[test]
fn a_cold_rollout_streams_from_peers_still_reading_with_one_origin_read() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let sh = shared_with(dir.path(), ServerConfig::default());
        let mut ag = agents(&sh, &["n1", "n2", "n3"]).await;
        let a = start(&sh, version("a", &sha('a')));
        for n in ["n1", "n2", "n3"] {
            needs(&a, n);
            settle().await;
        }
        let n1 = ag.get_mut("n1").unwrap().drain();
        assert!(
            matches!(source_of(&n1)[..], [WeightSource::Origin { .. }]),
            "{n1:?}"
        );
        assert_eq!(grants(&n1).len(), 1, "n1 serves n2: {n1:?}");
        let n2 = ag.get_mut("n2").unwrap().drain();
        assert!(
            matches!(&source_of(&n2)[..], [WeightSource::Peer { node, .. }] if node == "n1"),
            "{n2:?}"
        );
        assert_eq!(grants(&n2).len(), 1, "n2 serves n3: {n2:?}");
        let n3 = ag.get_mut("n3").unwrap().drain();
        assert!(
            matches!(&source_of(&n3)[..], [WeightSource::Peer { node, .. }] if node == "n2"),
            "{n3:?}"
        );
        let (rec, reads) = a.send(VersionSnapshot).await.unwrap();
        assert_eq!(reads, 1);
        assert_eq!(rec.nodes["n3"].copy, CopyState::Warming);
        assert_eq!(rec.nodes["n3"].source, "peer n2");
    });
}

/// One origin read per version and two in all: three nodes needing `a`
/// get one origin read, the others wait; `b` and `c` take the second
/// registry-wide slot in turn. Once n1's copy is verified, n2 and n3 are
/// pointed at it, each after n1 was granted their token; the slot n1 frees
/// goes to `c`.
#[test]
fn origin_reads_are_capped_per_version_and_in_all_and_waiters_go_to_the_first_verified_peer() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::default();
    config.models.max_origin_pulls_per_version = 1;
    config.models.max_origin_pulls = 2;
    // Verified copies only: the waiters wait (streaming is the next test).
    config.models.peer_stream_partial = false;
    run(async move {
        let sh = shared_with(dir.path(), config);
        let mut ag = agents(&sh, &["n1", "n2", "n3", "n4", "n5"]).await;
        let a = start(&sh, version("a", &sha('a')));
        let b = start(&sh, version("b", &sha('b')));
        let c = start(&sh, version("c", &sha('c')));
        for n in ["n1", "n2", "n3"] {
            needs(&a, n);
        }
        settle().await;
        needs(&b, "n4");
        settle().await;
        needs(&c, "n5");
        settle().await;
        let n1 = ag.get_mut("n1").unwrap().drain();
        assert!(
            matches!(source_of(&n1)[..], [WeightSource::Origin { .. }]),
            "{n1:?}"
        );
        assert!(ag.get_mut("n2").unwrap().drain().is_empty());
        assert!(ag.get_mut("n3").unwrap().drain().is_empty());
        let n4 = ag.get_mut("n4").unwrap().drain();
        assert!(matches!(source_of(&n4)[..], [WeightSource::Origin { .. }]));
        // Two origin reads in all: c waits.
        assert!(ag.get_mut("n5").unwrap().drain().is_empty());
        let (rec, reads) = a.send(VersionSnapshot).await.unwrap();
        assert_eq!(reads, 1);
        assert_eq!(rec.state, ModelState::Active, "first used by a task");
        assert_eq!(rec.nodes["n2"].copy, CopyState::Waiting);
        let (rec_c, _) = c.send(VersionSnapshot).await.unwrap();
        assert_eq!(rec_c.nodes["n5"].copy, CopyState::Waiting);

        ag["n1"].report(&sha('a'), verified("origin"));
        settle().await;
        let granted = grants(&ag.get_mut("n1").unwrap().drain());
        assert_eq!(granted.len(), 2, "{granted:?}");
        for r in ["n2", "n3"] {
            let got = source_of(&ag.get_mut(r).unwrap().drain());
            let token = granted
                .iter()
                .find(|(rx, _)| rx == r)
                .map(|(_, t)| t.clone());
            assert_eq!(
                got,
                vec![WeightSource::Peer {
                    node: "n1".into(),
                    url: "http://n1".into(),
                    token: token.unwrap(),
                }],
                "{r}"
            );
        }
        // n1's origin slot went to c.
        let n5 = ag.get_mut("n5").unwrap().drain();
        assert!(
            matches!(source_of(&n5)[..], [WeightSource::Origin { .. }]),
            "{n5:?}"
        );
        assert_eq!(sh.origin_budget.total(), 2);
        let (rec, reads) = a.send(VersionSnapshot).await.unwrap();
        assert_eq!(reads, 0);
        assert_eq!(rec.nodes["n1"].copy, CopyState::Verified);
        assert_eq!(rec.nodes["n2"].source, "peer n1");
        // Recorded before the nodes were told: sled has what memory has.
        let stored = sh.gate.store().model_version("a:v1").unwrap().unwrap();
        assert_eq!(stored.nodes, rec.nodes);
    });
}

/// A receiver whose peer fails it is pointed at another holder (resuming
/// its bytes); a receiver whose peer is lost is re-sourced too.
#[test]
fn a_failed_peer_transfer_and_a_lost_peer_are_resourced() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let sh = shared_with(dir.path(), ServerConfig::default());
        let mut ag = agents(&sh, &["n1", "n2", "n3", "n4"]).await;
        let a = start(&sh, version("a", &sha('a')));
        needs(&a, "n1");
        settle().await;
        ag["n1"].report(&sha('a'), verified("origin"));
        settle().await;
        needs(&a, "n2");
        settle().await;
        ag["n2"].report(&sha('a'), verified("peer n1"));
        settle().await;
        // n3 reads from the holder with fewer transfers: both have none, n1 first.
        needs(&a, "n3");
        settle().await;
        for (_, g) in ag.iter_mut() {
            g.drain();
        }
        ag["n3"].report(
            &sha('a'),
            WarmupProgress::Failed {
                source: "peer n1".into(),
                bytes_done: 400,
                reason: "connection reset".into(),
            },
        );
        settle().await;
        assert_eq!(grants(&ag.get_mut("n2").unwrap().drain()).len(), 1);
        let got = source_of(&ag.get_mut("n3").unwrap().drain());
        assert!(
            matches!(&got[..], [WeightSource::Peer { node, .. }] if node == "n2"),
            "{got:?}"
        );
        let (rec, _) = a.send(VersionSnapshot).await.unwrap();
        assert_eq!(
            (rec.nodes["n3"].source.as_str(), rec.nodes["n3"].bytes_done),
            ("peer n2", 400)
        );

        // n2 is lost (revoked: declared lost, as a silent node is): n3 is
        // sent back to n1.
        let revoked = ag["n2"].node.send(crate::protocol::node::Revoke).await;
        assert!(matches!(revoked, Ok(Ok(true))), "{revoked:?}");
        settle().await;
        assert!(grants(&ag.get_mut("n1").unwrap().drain()).len() == 1);
        let got = source_of(&ag.get_mut("n3").unwrap().drain());
        assert!(
            matches!(&got[..], [WeightSource::Peer { node, .. }] if node == "n1"),
            "{got:?}"
        );
    });
}

/// With `models.peer-warmup = false` nodes only ever read the origin, one at a
/// time per version: the second waits for the first to finish.
#[test]
fn without_peer_warmup_nodes_read_the_origin_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::default();
    config.models.peer_warmup = false;
    run(async move {
        let sh = shared_with(dir.path(), config);
        let mut ag = agents(&sh, &["n1", "n2"]).await;
        let a = start(&sh, version("a", &sha('a')));
        needs(&a, "n1");
        needs(&a, "n2");
        settle().await;
        assert_eq!(source_of(&ag.get_mut("n1").unwrap().drain()).len(), 1);
        assert!(ag.get_mut("n2").unwrap().drain().is_empty());
        ag["n1"].report(&sha('a'), verified("origin"));
        settle().await;
        assert!(grants(&ag.get_mut("n1").unwrap().drain()).is_empty());
        let got = source_of(&ag.get_mut("n2").unwrap().drain());
        assert!(matches!(&got[..], [WeightSource::Origin { .. }]), "{got:?}");
    });
}

/// A restarted agent whose hello shows no fetch of a copy the record says
/// it is warming is told its source again; one still fetching it is not.
#[test]
fn a_hello_without_the_recorded_fetch_is_told_its_source_again() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let sh = shared_with(dir.path(), ServerConfig::default());
        let mut ag = agents(&sh, &["n1"]).await;
        let a = start(&sh, version("a", &sha('a')));
        needs(&a, "n1");
        settle().await;
        assert_eq!(source_of(&ag.get_mut("n1").unwrap().drain()).len(), 1);
        let n1 = ag.get_mut("n1").unwrap();
        hello_again(n1, "n1", &[(&sha('a'), "origin")]).await;
        settle().await;
        assert!(
            source_of(&n1.drain()).is_empty(),
            "still fetching: not told again"
        );
        hello_again(n1, "n1", &[]).await;
        settle().await;
        let got = source_of(&n1.drain());
        assert!(matches!(&got[..], [WeightSource::Origin { .. }]), "{got:?}");
        // A cut partial that nothing reads is no fetch under way either (or
        // an agent killed mid-fetch would wait until the timeout).
        hello_again(n1, "n1", &[(&sha('a'), "")]).await;
        settle().await;
        let got = source_of(&n1.drain());
        assert!(matches!(&got[..], [WeightSource::Origin { .. }]), "{got:?}");
        let (_, reads) = a.send(VersionSnapshot).await.unwrap();
        assert_eq!(reads, 1, "the same read, not a second one");
    });
}

/// The origin refused `n1`'s read before its first byte.
fn refused() -> WarmupProgress {
    WarmupProgress::Failed {
        source: "origin".into(),
        bytes_done: 0,
        reason: "connection refused".into(),
    }
}

/// A read that keeps failing: re-sourced at once the first time, then
/// `failed` with its reason once the budget (2 here) is spent, and then
/// read again only for a task new to the version, not for the same one.
#[test]
fn a_read_that_keeps_failing_gives_up_and_only_a_new_task_asks_again() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let mut config = ServerConfig::default();
        config.models.warm_retry_attempts = 2;
        let sh = shared_with(dir.path(), config);
        let mut ag = agents(&sh, &["n1"]).await;
        let a = start(&sh, version("a", &sha('a')));
        needs(&a, "n1");
        settle().await;
        assert_eq!(source_of(&ag.get_mut("n1").unwrap().drain()).len(), 1);
        ag["n1"].report(&sha('a'), refused());
        settle().await;
        // The first failure: read again at once.
        assert_eq!(source_of(&ag.get_mut("n1").unwrap().drain()).len(), 1);
        ag["n1"].report(&sha('a'), refused());
        settle().await;
        assert!(source_of(&ag.get_mut("n1").unwrap().drain()).is_empty());
        let (rec, reads) = a.send(VersionSnapshot).await.unwrap();
        let c = &rec.nodes["n1"];
        assert_eq!((c.copy, c.failures), (CopyState::Failed, 2), "{c:?}");
        assert!(c.reason.contains("origin: connection refused"), "{c:?}");
        assert_eq!(reads, 0, "a failed copy holds no origin slot");
        // The same task asking again changes nothing.
        needs(&a, "n1");
        settle().await;
        assert!(source_of(&ag.get_mut("n1").unwrap().drain()).is_empty());
        // A task new to the version: read again, the count forgotten.
        a.do_send(NodeNeeds {
            node: "n1".into(),
            task: Some("acme/another".into()),
        });
        settle().await;
        assert_eq!(source_of(&ag.get_mut("n1").unwrap().drain()).len(), 1);
        let (rec, _) = a.send(VersionSnapshot).await.unwrap();
        assert_eq!(rec.nodes["n1"].copy, CopyState::Warming);
        assert_eq!(rec.nodes["n1"].failures, 0);
    });
}

/// A failed read on a node where nothing needs the version any more (its
/// task ended) is not read again, and its copy leaves the record.
#[test]
fn a_failed_read_for_a_task_that_ended_is_not_read_again() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let sh = shared_with(dir.path(), ServerConfig::default());
        let mut ag = agents(&sh, &["n1"]).await;
        let a = start(&sh, version("a", &sha('a')));
        needs(&a, "n1");
        settle().await;
        ag.get_mut("n1").unwrap().drain();
        let store = sh.gate.store();
        let mut t = store.task("acme/task-on-n1").unwrap().unwrap();
        t.state = caldera_spec::TaskState::Released;
        let mut b = store.batch();
        b.put_task(&t);
        store.commit(b).unwrap();
        ag["n1"].report(&sha('a'), refused());
        settle().await;
        assert!(source_of(&ag.get_mut("n1").unwrap().drain()).is_empty());
        let (rec, _) = a.send(VersionSnapshot).await.unwrap();
        assert!(!rec.nodes.contains_key("n1"), "{:?}", rec.nodes);
    });
}

/// The second failure in a row waits out `models.warm-retry-first-ms` (no warm
/// sent now; the copy says when it is due) and frees its origin slot.
#[test]
fn a_second_failure_in_a_row_backs_off_and_frees_the_origin_slot() {
    let dir = tempfile::tempdir().unwrap();
    run(async move {
        let sh = shared_with(dir.path(), ServerConfig::default());
        let mut ag = agents(&sh, &["n1"]).await;
        let a = start(&sh, version("a", &sha('a')));
        needs(&a, "n1");
        settle().await;
        ag["n1"].report(&sha('a'), refused());
        settle().await;
        ag.get_mut("n1").unwrap().drain();
        let before = sh.now_ms();
        ag["n1"].report(&sha('a'), refused());
        settle().await;
        assert!(source_of(&ag.get_mut("n1").unwrap().drain()).is_empty());
        let (rec, reads) = a.send(VersionSnapshot).await.unwrap();
        let c = &rec.nodes["n1"];
        assert_eq!((c.copy, c.failures), (CopyState::Retrying, 2), "{c:?}");
        let due = c.retry_at_ms.unwrap_or(0);
        assert!(due >= before + 1000 && due <= sh.now_ms() + 1000, "{c:?}");
        assert_eq!(reads, 0);
        assert_eq!(sh.origin_budget.total(), 0);
    });
}
