//! Messages a ModelVersionActor answers, and [`ModelHandle`].
use super::handle::handle;
use super::lifecycle::{Observe, Rebuild};
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::weights::WarmupReport;
use caldera_spec::{ModelState, ModelVersionRecord};

/// A node needs a copy of the version: a task using it was dispatched there
/// (`task`), or a prewarm named it. The actor records the need and the
/// source it chose, then tells the node (and the serving peer).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct NodeNeeds {
    pub node: String,
    /// The task key (`tenant/id`) that uses it, if a task does.
    pub task: Option<String>,
}

/// A node's report on its copy (forwarded by its NodeActor).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct WarmupFrom {
    pub node: String,
    pub report: WarmupReport,
}

/// A node's cache report changed (a hello, or a heartbeat whose verified
/// copies differ from the last): read it from the fleet directory.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct NodeCacheSeen {
    pub node: String,
    /// It came with a hello: the agent may have restarted and lost a fetch
    /// it was told to make.
    pub hello: bool,
}

/// A node was lost or revoked: it serves nobody and needs nothing now; the
/// receivers it served get another source.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct NodeGone {
    pub node: String,
}

/// Another version's origin read ended: a registry-wide slot may be free.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct OriginFreed;

/// The record and the origin reads it runs now.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "(ModelVersionRecord, u32)")]
pub struct VersionSnapshot;

/// Which nodes a prewarm warms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrewarmTarget {
    Nodes(Vec<String>),
    /// This many healthy nodes that hold no copy, by name.
    Count(u32),
}

/// `POST .../prewarm`: answers the nodes chosen.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<String>>")]
pub struct Prewarm {
    pub target: PrewarmTarget,
    pub pin: bool,
}

/// `PUT .../pin`: pins (or unpins) every copy; answers the record.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<ModelVersionRecord>")]
pub struct SetPinned {
    pub pinned: bool,
}

/// A change of the version's life state (`POST .../deprecate` today;
/// retiring and retired are the retire control message's, next).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<ModelVersionRecord>")]
pub struct ChangeState {
    pub to: ModelState,
}

/// A hot swap moved these tasks (keys) off the version, or rolled them
/// back off it: they no longer use it.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct TasksLeft {
    pub tasks: Vec<String>,
    /// Why, for its event (`swapped to llama:v4`).
    pub why: String,
}

/// `POST .../retire`: records `retiring` with who asked and what replaces
/// the version, then retires it once no task uses it. Answers the record.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<ModelVersionRecord>")]
pub struct Retire {
    /// Who asked (`operator`, or `tenant NAME`).
    pub by: String,
    /// `name:version` (checked: registered and accepting tasks).
    pub replace_with: Option<String>,
}

handle! {
    /// A model version's actor, as the directory holds it.
    ModelHandle: ModelPort {
        tell {
            rebuild: Rebuild,
            node_needs: NodeNeeds,
            warmup_from: WarmupFrom,
            node_cache_seen: NodeCacheSeen,
            node_gone: NodeGone,
            origin_freed: OriginFreed,
            tasks_left: TasksLeft,
        }
        ask {
            observe: Observe,
            snapshot: VersionSnapshot,
            prewarm: Prewarm,
            set_pinned: SetPinned,
            change_state: ChangeState,
            retire: Retire,
        }
    }
}
