//! The node <-> control plane protocol, carried as JSON text frames over one
//! WebSocket per node (`GET /v1/nodes/connect`, bearer = cluster join token).
//!
//! Session: the agent sends [`NodeMessage::Hello`] (identity, inventory, the
//! workloads it still runs); the control plane answers [`ServerMessage::Welcome`]
//! with a new lease epoch and which of those workloads the agent keeps (adopted)
//! or must kill (no longer its own: the node was declared lost meanwhile). Then
//! heartbeats flow one way and commands the other. Every command carries the
//! epoch it was issued under; an agent ignores commands of any other epoch, so
//! a command delayed across a reconnect can never act twice.
//!
//! Credentials (protocol 2): the join token only registers a name that is not
//! yet registered; the welcome of that first session carries the node's own
//! secret ([`Welcome::node_secret`]), which every later hello for the name must
//! present ([`Hello::node_secret`]). The control plane keeps only its SHA-256.
//!
//! Leases (protocol 3): every heartbeat carries a sequence number; the control
//! plane answers each one it accepts under the current epoch with
//! [`ServerMessage::LeaseRenewed`]. The node's lease then runs until the
//! instant the agent *sent* that heartbeat plus [`Welcome::lease_ms`] — measured
//! from the send, not the receipt, so the agent's deadline is never later than
//! the control plane's (which counts from when it answered). The agent hands the
//! deadline to each workload's shim; a shim whose lease runs out stops its
//! workload by itself, so a frozen or cut-off node cannot keep running a task
//! the control plane has requeued elsewhere.
//!
//! Drain (protocol 3): an agent asked to stop (SIGTERM) sends
//! [`NodeMessage::Draining`]; the control plane cordons the node and moves its
//! work away as a planned stop (no retry spent), then the agent exits once
//! nothing is left on it. When the whole cluster stops (`caldera up`), the
//! message says so and nothing waits to be moved to nodes that stop too.
//!
//! Weights (protocol 4): the hello and heartbeats carry the node's weight
//! cache ([`CacheReport`]) and the address it serves peers on; a start may
//! name a model ([`ModelMount`]); [`ServerMessage::Warm`], `PeerGrant`,
//! `Evict` and `Pin` drive the cache, and [`NodeMessage::Warmup`] reports on
//! it. The whole flow is in [`crate::weights`].
//!
//! Resync (protocol 5; heartbeats of usage only, protocol 6): the agent numbers the workload events it sends in a
//! session ([`WorkloadEvent::seq`], from 1) and every heartbeat says how many
//! it has sent ([`Heartbeat::events_sent`]); frames travel in order on the
//! one socket, so the control plane sees a missing or out-of-order event as
//! a hole in the numbers. On such a gap (or when one of its tasks may have
//! missed what its workload did) it asks for a [`ServerMessage::Resync`];
//! the agent answers with a [`Digest`] of what it holds under the epoch, the
//! same reports a hello carries, and the control plane repairs the
//! differences with its books in one place — the same place that answers a
//! hello. Heartbeats carry metrics, usage and the lease, never replays of
//! events.
use crate::node::{NodeInventory, NodeMetrics};
pub use crate::readiness::ReadinessProbe;
pub use crate::weights::{
    CacheCounters, CacheEntry, CacheFetch, CacheReport, EvictCommand, ModelMount, PeerGrant,
    PinCommand, WarmCommand, WarmupProgress, WarmupReport, WeightSource,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bumped on any incompatible change; a mismatching hello is refused.
pub const PROTOCOL_VERSION: u32 = 6;

/// Agent -> control plane. A hello is sent once a session, so its size
/// does not matter next to a heartbeat's.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeMessage {
    Hello(Hello),
    Heartbeat(Heartbeat),
    Event(WorkloadEvent),
    /// Answer to [`ServerMessage::FetchLogs`].
    Logs {
        request_id: u64,
        allocation_id: String,
        content: String,
        truncated: bool,
        /// Asked `from_byte`: the log's offset just past `content`, where the
        /// next read goes on (`caldera logs -f`). Absent otherwise, and from
        /// older agents.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end_byte: Option<u64>,
    },
    /// The agent is going away on purpose (SIGTERM, an upgrade): cordon the
    /// node and move its work elsewhere as a planned stop.
    Draining {
        epoch: u64,
        reason: String,
        /// The whole cluster stops with this node (`caldera up` stopping):
        /// no other node will stay to take its work, so nothing waits to be
        /// moved — service replicas are stopped and requeued like any task,
        /// not replaced elsewhere first. Absent from older agents: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cluster_stopping: bool,
    },
    /// What happened to one version's copy in the node's weight cache.
    Warmup(WarmupReport),
    /// How a pre-pull ([`ServerMessage::Prepull`]) ended.
    Prepulled(crate::images::PrepullReport),
    /// Answer to [`ServerMessage::Resync`]: what the node holds now.
    Digest(Digest),
}

/// What a node holds under its epoch, sent when the control plane asks
/// ([`ServerMessage::Resync`]): every workload alive, and every exit the
/// control plane has not yet let go of, as a hello reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    pub epoch: u64,
    /// The [`ServerMessage::Resync::request`] this answers.
    pub request: u64,
    /// Workload events sent in this session before the digest: what the
    /// digest covers.
    pub events_sent: u64,
    pub workloads: Vec<WorkloadReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub node_name: String,
    pub agent_version: String,
    /// The secret this name was registered with; None on a first join.
    #[serde(default)]
    pub node_secret: Option<String>,
    /// The agent's absolute data dir: a task's checkpoint dir is inside it, so a
    /// checkpoint path the node reports is accepted only below that dir.
    #[serde(default)]
    pub data_dir: String,
    pub inventory: NodeInventory,
    /// Workloads still alive on the node (or exited since the last session, not yet reported).
    pub workloads: Vec<WorkloadReport>,
    /// The weight cache (protocol 4; empty from older agents: no cache).
    #[serde(default)]
    pub cache: CacheReport,
    /// Where the agent serves its cache to peers (`http://host:port`);
    /// None: it serves no peers (`--peer-listen` off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_url: Option<String>,
    /// The host the node's workloads are reached at (`advertise-host`);
    /// None: the host the control plane saw the connection come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise_host: Option<String>,
    /// The images the node holds (empty from agents without a container
    /// runtime, or older ones).
    #[serde(default)]
    pub images: crate::images::ImageReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub epoch: u64,
    /// Numbers heartbeats within a session (from 1), so the answering
    /// [`ServerMessage::LeaseRenewed`] names the one it renews from.
    #[serde(default)]
    pub seq: u64,
    pub metrics: NodeMetrics,
    /// The measured usage of each live workload. Only metrics: what the
    /// workloads did comes in events, and a missed event is repaired by a
    /// resync ([`Digest`]), so a heartbeat never repeats news.
    pub workloads: Vec<UsageReport>,
    /// The weight cache now (protocol 4; None from older agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheReport>,
    /// The images the node holds, as last read (the agent reads its store
    /// every few seconds, not at every heartbeat); None: as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<crate::images::ImageReport>,
    /// Workload events sent in this session so far (the last one's
    /// [`WorkloadEvent::seq`]): more than the control plane received means
    /// one was lost, and it asks for a [`Digest`].
    #[serde(default)]
    pub events_sent: u64,
}

/// One live workload's measured usage, as a heartbeat carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    pub allocation_id: String,
    #[serde(default)]
    pub usage: AllocationUse,
}

/// A workload as the agent sees it (in a hello or a digest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    pub allocation_id: String,
    pub task_id: String,
    /// Epoch it was started under.
    pub epoch: u64,
    pub pid: Option<u32>,
    /// None while running.
    pub exit: Option<ExitStatus>,
    /// Measured use of this allocation (see [`AllocationUse`]).
    #[serde(default)]
    pub usage: AllocationUse,
    /// Still waiting for its model's weights (no process yet): alive, but
    /// not started, so a resync does not take it for a `started` one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warming: bool,
    /// Its running process's readiness as last reported in a `Readiness`
    /// event (None: none yet): a hello or digest carries it, so a control
    /// plane that could not record the event hears it in the resync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The generation that readiness is about (0: the first start).
    #[serde(default)]
    pub generation: u32,
    /// The port the workload was given (`CALDERA_PORT`): a hello or digest
    /// carries it, so a control plane that never recorded the `Started`
    /// event (killed first) learns the endpoint in the resync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// Measured use of one allocation. On simulated GPUs the CPU use of the
/// workload's process tree stands in for GPU utilisation (`gpu_source` says so).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllocationUse {
    pub cpu_pct: f32,
    pub memory_mb: u64,
    pub gpu_utilization_pct: f32,
    pub gpu_memory_used_mb: u64,
    /// "nvml" or "simulated: process-tree CPU".
    pub gpu_source: String,
}

/// How a workload ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// True when it ended because the control plane stopped it.
    pub stopped: bool,
    /// The kernel killed it for using more memory than its limit (the
    /// agent reads it from the workload's memory cgroup).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
}

impl ExitStatus {
    /// What a stop reports for an allocation with no process (a reservation,
    /// or one the node never saw).
    pub const STOPPED_WITHOUT_PROCESS: ExitStatus = ExitStatus {
        code: None,
        signal: None,
        stopped: true,
        oom_killed: false,
    };
}

/// Something that happened to a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadEvent {
    pub allocation_id: String,
    pub task_id: String,
    pub epoch: u64,
    pub at_ms: u64,
    pub kind: WorkloadEventKind,
    /// Its number among the events of this session (from 1), given as it
    /// goes out; 0: not numbered (not yet sent).
    #[serde(default)]
    pub seq: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadEventKind {
    /// The agent began preparing the environment (dirs, log file, cgroup).
    Preparing,
    /// Pulling the task's image; repeated (throttled) as layers arrive.
    Pulling(crate::container::PullProgress),
    /// Waiting for the task's model version to be verified in the node's
    /// cache; repeated (throttled) as bytes arrive. `source` is
    /// [`WeightSource::label`], or `cache` for a copy already there.
    Warming {
        model: String,
        source: String,
        bytes_done: u64,
        size_bytes: u64,
        rate_bytes_per_s: u64,
    },
    /// The environment is ready (and the weights verified, for a task with a
    /// model); the process is about to start.
    Ready {
        isolation: String,
    },
    /// The process runs (or, for a reservation without command, the slot is held).
    Started {
        pid: Option<u32>,
        /// The port the agent gave the workload as CALDERA_PORT.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// The digest of the image the container runs (`sha256:...`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image_digest: Option<String>,
    },
    Exited(ExitStatus),
    /// Preparing or starting failed; the message says why.
    StartFailed {
        reason: String,
        /// The error's number in `caldera_spec::codes` where one applies
        /// (a pull's failures: image not found, unauthorized, ...); 0 otherwise.
        #[serde(default, skip_serializing_if = "is_zero")]
        code: u32,
    },
    /// The workload wrote a checkpoint (a file appeared in its checkpoint dir).
    CheckpointSaved {
        path: String,
    },
    /// Readiness changed (and, once ready, after each start or swap). A
    /// workload without probe is reported ready right after it starts.
    /// `generation`: 0 for the first start, the swap's after a swap.
    Readiness {
        ready: bool,
        generation: u32,
        detail: String,
    },
    /// The workload was restarted in place on `model` (`name:version`),
    /// answering [`ServerMessage::Swap`] of `generation`.
    Swapped {
        generation: u32,
        model: String,
        pid: Option<u32>,
        /// Where it is reached now, when that moved: a container's new
        /// container came up beside the old one on another claimed port.
        /// None: the port it had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// The image and digest its container runs now (None: a process).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image_digest: Option<String>,
    },
    /// A swap of `generation` failed; `reason` says why and what runs now.
    SwapFailed {
        generation: u32,
        reason: String,
    },
}

/// Control plane -> agent. A start is sent once per allocation, so its
/// size (it carries a readiness probe) does not matter next to a lease renewal's.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    Welcome(Welcome),
    Start(StartCommand),
    Stop(StopCommand),
    FetchLogs {
        request_id: u64,
        epoch: u64,
        allocation_id: String,
        /// The allocation's task: its log file's name, so a restarted agent
        /// finds the log of an allocation it no longer remembers. Absent from
        /// older servers (then only remembered allocations are found).
        #[serde(default)]
        task_id: String,
        tail_bytes: u64,
        /// Read from this offset of the log, at most `tail_bytes` bytes,
        /// instead of its tail: following a log (`caldera logs -f`). Older
        /// agents ignore it and answer the tail without `end_byte`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_byte: Option<u64>,
    },
    /// The hello (or a report) was refused (bad protocol, wrong node secret,
    /// a live session for the name, a revoked node, a stale epoch); the agent
    /// retries later.
    Refused {
        reason: String,
        /// The error's number in `caldera_spec::codes` (0 from older servers).
        #[serde(default)]
        code: u32,
    },
    /// Heartbeat `seq` was accepted under `epoch`: the node's lease runs until
    /// the agent's send instant of that heartbeat plus [`Welcome::lease_ms`].
    LeaseRenewed {
        epoch: u64,
        seq: u64,
    },
    /// Get a verified copy of a version into the node's cache.
    Warm(WarmCommand),
    /// Serve a version to one receiver's token (sent to the serving peer).
    PeerGrant(PeerGrant),
    /// Delete a cached copy.
    Evict(EvictCommand),
    /// Pin or unpin a cached copy.
    Pin(PinCommand),
    /// Restart one allocation's workload in place on another model version.
    Swap(SwapCommand),
    /// An operator rotated the node secret: keep `secret` in place of the
    /// old one, which no longer opens a session. Sent only over the live
    /// session the old secret opened, under its epoch.
    NodeSecret {
        epoch: u64,
        secret: String,
    },
    /// Pull an image onto the node ahead of use (the operator's pre-pull).
    Prepull(crate::images::PrepullCommand),
    /// Send a [`Digest`] of what the node holds under `epoch`: the control
    /// plane saw a gap in the session's events, or a task of the node may
    /// have missed what its workload did.
    Resync {
        epoch: u64,
        /// Numbers the requests of a session; the digest names the one it answers.
        request: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub node_name: String,
    pub epoch: u64,
    pub heartbeat_interval_ms: u64,
    /// How long a lease lasts after the heartbeat that renewed it; 0 from a
    /// server without leases (then shims run without one).
    #[serde(default)]
    pub lease_ms: u64,
    /// The control plane's stop grace: after the lease it waits only this
    /// (and a small margin) before starting a lost node's fenced tasks
    /// elsewhere, so a shim whose lease ran out must have SIGKILLed its
    /// workload by then; an agent configured with a longer grace uses this
    /// one for lapsed leases. 0 from older servers (no cap).
    #[serde(default)]
    pub stop_grace_ms: u64,
    /// Reported workloads the node still owns: adopt them under the new epoch.
    pub keep: Vec<String>,
    /// Reported workloads it no longer owns: kill them now.
    pub kill: Vec<String>,
    /// Issued once, on the session that registered the name (or claimed a name
    /// registered before node secrets existed): keep it, present it on every
    /// later hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_secret: Option<String>,
}

/// Prepare and start one allocation's workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartCommand {
    pub allocation_id: String,
    pub task_id: String,
    pub epoch: u64,
    /// Empty: a reservation (nothing runs, the slot is held until stopped),
    /// unless `container` is set: then the image's entrypoint runs.
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub gpu_indices: Vec<u32>,
    pub gpu_uuids: Vec<String>,
    /// The per-GPU memory slice, MiB (CALDERA_GPU_MEMORY_MB).
    pub gpu_memory_mb: u64,
    pub cpu_milli: u64,
    pub memory_mb: u64,
    /// The task's `disk.size_gb` in MiB: the most its container's scratch
    /// space holds (0: not sized).
    #[serde(default)]
    pub disk_mb: u64,
    pub checkpoint_dir: Option<String>,
    /// Latest checkpoint to resume from (CALDERA_RESUME_FROM).
    pub resume_from: Option<String>,
    /// The model version the workload serves: it starts only once the copy
    /// is verified in the node's cache, with CALDERA_MODEL_PATH (read-only),
    /// CALDERA_MODEL_NAME and CALDERA_MODEL_VERSION.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelMount>,
    /// When the workload is ready (see [`ReadinessProbe`]); None: ready once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ReadinessProbe>,
    /// Run in a container of this image (None: the process runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<crate::container::ContainerStart>,
}

impl StartCommand {
    /// Holds the slot and runs nothing: no command and no container (a
    /// container without a command runs its image's entrypoint).
    pub fn is_reservation(&self) -> bool {
        self.command.is_empty() && self.container.is_none()
    }
}

/// Restart one allocation's workload on another model version IN PLACE: same
/// allocation id, GPUs, cgroup, uid, port and env except CALDERA_MODEL_*.
/// The agent makes sure `model` is verified in its cache (as for a start),
/// then stops the running process (SIGTERM, grace_ms, SIGKILL), starts the
/// task's command again with the new model mount, and reports `Swapped` then
/// `Readiness`, or `SwapFailed`. A workload in a container is swapped
/// make-before-break instead: `container`'s image is pulled and the copy
/// warmed while the old container serves, the new container starts beside
/// it (another claimed port), and the old one stops only once the new one
/// is ready. A repeated generation is answered with the outcome already
/// reached (idempotent: the control plane resends after a restart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapCommand {
    pub allocation_id: String,
    pub task_id: String,
    pub epoch: u64,
    pub generation: u32,
    pub model: ModelMount,
    pub grace_ms: u64,
    /// The container the new generation runs in (the version's image, else
    /// the task's), for a workload that runs in a container; None: a process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<crate::container::ContainerStart>,
}

/// Stop one allocation's workload: SIGTERM to its process group, `grace_ms`, then SIGKILL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopCommand {
    pub allocation_id: String,
    pub epoch: u64,
    pub grace_ms: u64,
    pub reason: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_type_tags() {
        let m = ServerMessage::Stop(StopCommand {
            allocation_id: "a1".into(),
            epoch: 3,
            grace_ms: 5000,
            reason: "released".into(),
        });
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.starts_with(r#"{"type":"stop""#), "{text}");
        let back: ServerMessage = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        let e = NodeMessage::Event(WorkloadEvent {
            allocation_id: "a1".into(),
            task_id: "t".into(),
            epoch: 3,
            at_ms: 1,
            kind: WorkloadEventKind::Exited(ExitStatus {
                code: Some(0),
                signal: None,
                stopped: false,
                oom_killed: false,
            }),
            seq: 4,
        });
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<NodeMessage>(&text).unwrap(), e);
    }

    #[test]
    fn credentials_are_optional_on_the_wire_and_the_secret_is_sent_only_when_issued() {
        let w = Welcome {
            node_name: "n".into(),
            epoch: 1,
            heartbeat_interval_ms: 1000,
            lease_ms: 0,
            stop_grace_ms: 0,
            keep: vec![],
            kill: vec![],
            node_secret: None,
        };
        let text = serde_json::to_string(&ServerMessage::Welcome(w)).unwrap();
        assert!(!text.contains("node_secret"), "{text}");
        let refused: ServerMessage =
            serde_json::from_str(r#"{"type":"refused","reason":"r"}"#).unwrap();
        assert_eq!(
            refused,
            ServerMessage::Refused {
                reason: "r".into(),
                code: 0
            }
        );
    }

    #[test]
    fn swap_and_readiness_messages_round_trip() {
        let swap = ServerMessage::Swap(SwapCommand {
            allocation_id: "a1".into(),
            task_id: "svc.r0".into(),
            epoch: 2,
            generation: 4,
            model: ModelMount {
                name: "m".into(),
                version: "v4".into(),
                sha256: "ab".repeat(32),
                size_bytes: 10,
                private: false,
                owner: None,
            },
            grace_ms: 1000,
            container: None,
        });
        let text = serde_json::to_string(&swap).unwrap();
        assert!(!text.contains("container"), "{text}");
        assert!(text.starts_with(r#"{"type":"swap""#), "{text}");
        assert_eq!(serde_json::from_str::<ServerMessage>(&text).unwrap(), swap);
        for kind in [
            WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(7),
                port: Some(20001),
            },
            WorkloadEventKind::Readiness {
                ready: true,
                generation: 4,
                detail: "GET /ready: 200".into(),
            },
            WorkloadEventKind::Swapped {
                generation: 4,
                model: "m:v4".into(),
                pid: Some(8),
                port: None,
                image: None,
                image_digest: None,
            },
            WorkloadEventKind::Swapped {
                generation: 5,
                model: "m:v5".into(),
                pid: Some(9),
                port: Some(20002),
                image: Some("registry.internal/app:2".into()),
                image_digest: Some(format!("sha256:{}", "cd".repeat(32))),
            },
            WorkloadEventKind::SwapFailed {
                generation: 4,
                reason: "verify failed".into(),
            },
        ] {
            let e = NodeMessage::Event(WorkloadEvent {
                allocation_id: "a1".into(),
                task_id: "svc.r0".into(),
                epoch: 2,
                at_ms: 1,
                kind,
                seq: 1,
            });
            let text = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<NodeMessage>(&text).unwrap(), e);
        }
        // An older agent's started event has no port.
        let old: WorkloadEventKind = serde_json::from_str(r#"{"kind":"started","pid":3}"#).unwrap();
        assert_eq!(
            old,
            WorkloadEventKind::Started {
                image_digest: None,
                pid: Some(3),
                port: None
            }
        );
    }

    #[test]
    fn a_start_without_probe_has_no_readiness_field() {
        let start: StartCommand = serde_json::from_str(
            r#"{"allocation_id":"a","task_id":"t","epoch":1,"command":["x"],"env":{},
                "gpu_indices":[],"gpu_uuids":[],"gpu_memory_mb":0,"cpu_milli":100,
                "memory_mb":10,"checkpoint_dir":null,"resume_from":null}"#,
        )
        .unwrap();
        assert_eq!(start.readiness, None);
        let mut with = start.clone();
        with.readiness = Some(ReadinessProbe::http("/ready"));
        let text = serde_json::to_string(&with).unwrap();
        assert_eq!(serde_json::from_str::<StartCommand>(&text).unwrap(), with);
        assert!(!serde_json::to_string(&start).unwrap().contains("readiness"));
    }

    #[test]
    fn a_draining_of_an_older_agent_is_an_ordinary_drain() {
        let old = r#"{"type":"draining","epoch":3,"reason":"SIGTERM"}"#;
        let m: NodeMessage = serde_json::from_str(old).unwrap();
        let ordinary = NodeMessage::Draining {
            epoch: 3,
            reason: "SIGTERM".into(),
            cluster_stopping: false,
        };
        assert_eq!(m, ordinary);
        // An ordinary drain is written as before; a cluster stop says so.
        assert_eq!(serde_json::to_string(&ordinary).unwrap(), old);
        let stopping = NodeMessage::Draining {
            epoch: 3,
            reason: "up".into(),
            cluster_stopping: true,
        };
        let text = serde_json::to_string(&stopping).unwrap();
        assert!(text.contains(r#""cluster_stopping":true"#), "{text}");
        assert_eq!(
            serde_json::from_str::<NodeMessage>(&text).unwrap(),
            stopping
        );
    }
}
