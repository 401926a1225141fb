//! The task spec: the seed's JSON, accepted as written, plus what running it needs.
use crate::resources::ResourceRequest;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// Training runs to completion; inference is a service of replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum TaskType {
    Training,
    Inference,
}

impl TaskType {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskType::Training => "training",
            TaskType::Inference => "inference",
        }
    }
}

/// Priority 0..=1000; `high` = 900, `medium` = 500, `low` = 100. Written as a
/// word or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub u16);

impl Priority {
    pub const HIGH: Priority = Priority(900);
    pub const MEDIUM: Priority = Priority(500);
    pub const LOW: Priority = Priority(100);
    pub const MAX: u16 = 1000;

    /// The word for the standard levels, else the number.
    pub fn label(self) -> String {
        match self.0 {
            900 => "high".into(),
            500 => "medium".into(),
            100 => "low".into(),
            n => n.to_string(),
        }
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority::MEDIUM
    }
}

impl Serialize for Priority {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            900 | 500 | 100 => s.serialize_str(&self.label()),
            n => s.serialize_u16(n),
        }
    }
}

/// On the wire a priority is a word (`high`, `medium`, `low`) or a number
/// 0..=1000 (the custom serde above): the schema says so, not "a u16".
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Priority {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["high", "medium", "low"])),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0))
                    .maximum(Some(Priority::MAX)),
            )
            .description(Some(
                "high (900), medium (500, the default), low (100), or a number 0..=1000",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Priority {}

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            Number(i64),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) => match w.to_ascii_lowercase().as_str() {
                "high" => Ok(Priority::HIGH),
                "medium" => Ok(Priority::MEDIUM),
                "low" => Ok(Priority::LOW),
                other => Err(serde::de::Error::custom(format!(
                    "priority must be high, medium, low or a number 0..=1000, not {other:?}"
                ))),
            },
            Raw::Number(n) if (0..=Priority::MAX as i64).contains(&n) => Ok(Priority(n as u16)),
            Raw::Number(n) => Err(serde::de::Error::custom(format!(
                "priority must be between 0 and 1000, not {n}"
            ))),
        }
    }
}

/// A task as submitted. Unknown fields are refused so typos never pass silently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Caller-chosen id; also the idempotency key of the submission.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")
    )]
    pub task_id: String,
    pub task_type: TaskType,
    #[serde(default)]
    pub priority: Priority,
    pub resources: ResourceRequest,
    /// Declared run time "HH:MM:SS"; used for start-time estimates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[0-9]{1,5}:[0-5][0-9]:[0-5][0-9]$")
    )]
    pub duration: Option<String>,
    /// The OCI image the workload runs in (`registry.internal/team/app:1.0`):
    /// the agent pulls it while the task is Preparing and runs `command` (or
    /// the image's own entrypoint) in a container of it on the allocated
    /// slice. Placed only on nodes whose container runtime is up, unless
    /// `runtime` says `process`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Which runtime runs the workload: `container` (the default when
    /// `image` is set) or `process` (the default without one: a host
    /// process under the agent's cgroup and uid isolation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<crate::container::RuntimeKind>,
    /// When the agent pulls the image: `if_not_present` (the default) or
    /// `always` (a moving tag is looked up again at every start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<crate::container::PullPolicy>,
    /// How long Preparing (pulling the image) may take before the start
    /// fails, "HH:MM:SS" (at most 24:00:00). Default: the server's
    /// `preparing-timeout-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[0-9]{1,5}:[0-5][0-9]:[0-5][0-9]$")
    )]
    pub prepare_timeout: Option<String>,
    /// Data volumes from the operator's allow-list (`data-volumes`),
    /// mounted into the container; read-only unless `read_write` is asked
    /// and the operator's entry allows it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub volumes: Vec<crate::container::VolumeRequest>,
    /// argv of the workload. Absent: in a container, the image's own
    /// entrypoint runs; without one (the process runtime), a pure
    /// reservation that holds its resources until released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Node labels the task requires (all must match).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Directory for checkpoints (passed as CALDERA_CHECKPOINT_DIR); default: per task under the node's data dir.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<String>,
    /// Model version the service serves (inference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Inference replicas (each is an allocation). Training: always 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub replicas: Option<u32>,
    /// How many times a lost node may requeue this task before it fails (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(maximum = 100))]
    pub max_retries: Option<u32>,
    /// Never reclaimed by the idle inspector (e.g. a warm standby).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle_exempt: bool,
    /// Inference: the fewest replicas the idle inspector may scale in to (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub min_replicas: Option<u32>,
    /// What a lost node means for this task (default: `fence` for training
    /// and reservations, `replace` for inference replicas; see [`OnNodeLoss`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_node_loss: Option<OnNodeLoss>,
    /// Inference: when a replica is ready for traffic (listed as an
    /// endpoint). Absent: ready as soon as its process starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<crate::readiness::ReadinessProbe>,
    /// Inference: how many of the service's replicas one node may hold.
    /// Unset: 1 where capacity allows, else a replica may join a node that
    /// holds one (never a GPU that does; its placement event says `placed
    /// without spread`). Set: a hard limit, the replica waits instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub max_replicas_per_node: Option<u32>,
}

/// What happens to a task whose node is declared lost. A lost node may still
/// be running the task (frozen, or cut off from the control plane): only its
/// workload's lease, which the node's shim enforces, says when it has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnNodeLoss {
    /// Requeued only once the lease the control plane last renewed on that
    /// node, plus the stop grace, has run out: the old copy is gone before a
    /// new one starts, so the task never runs twice (two writers of one
    /// checkpoint). The default for training and reservations.
    Fence,
    /// Requeued at once: two copies may overlap for up to the lease. The
    /// default for inference replicas, which are stateless.
    Replace,
}

impl OnNodeLoss {
    pub fn as_str(self) -> &'static str {
        match self {
            OnNodeLoss::Fence => "fence",
            OnNodeLoss::Replace => "replace",
        }
    }
}

impl TaskSpec {
    /// Declared duration in seconds, if any and well-formed.
    pub fn duration_secs(&self) -> Option<u64> {
        self.duration
            .as_deref()
            .and_then(|d| crate::duration::parse_duration(d).ok())
    }

    /// The node-loss policy, written or the default: `replace` for an
    /// inference service's replicas (stateless, they run a command), `fence`
    /// for training and for reservations of either type.
    pub fn node_loss_policy(&self) -> OnNodeLoss {
        match (self.on_node_loss, self.task_type) {
            (Some(p), _) => p,
            (None, TaskType::Inference) if !self.is_reservation() => OnNodeLoss::Replace,
            (None, _) => OnNodeLoss::Fence,
        }
    }

    /// Retry budget for failures (a workload crash, a lost node); planned
    /// stops (drain, preemption, shutdown) never spend it.
    pub fn retry_budget(&self) -> u32 {
        self.max_retries.unwrap_or(3)
    }

    /// Declared duration in milliseconds.
    pub fn duration_ms(&self) -> Option<u64> {
        self.duration_secs().map(|s| s * 1000)
    }

    /// The runtime the workload runs in: as written, else `container` when
    /// the task names an image and `process` when it does not.
    pub fn runtime_kind(&self) -> crate::container::RuntimeKind {
        use crate::container::RuntimeKind;
        match (self.runtime, &self.image) {
            (Some(r), _) => r,
            (None, Some(_)) => RuntimeKind::Container,
            (None, None) => RuntimeKind::Process,
        }
    }

    /// A pure reservation: it holds its resources and runs nothing. That is
    /// a task without `command` that does not run in a container: a
    /// container task without `command` runs its image's own entrypoint (the
    /// seed's request names an image and no command, and means to run it).
    pub fn is_reservation(&self) -> bool {
        self.command.is_empty() && self.runtime_kind() == crate::container::RuntimeKind::Process
    }

    /// The task's own `prepare_timeout` in milliseconds, if set and well-formed.
    pub fn prepare_timeout_ms(&self) -> Option<u64> {
        self.prepare_timeout
            .as_deref()
            .and_then(|d| crate::duration::parse_duration(d).ok())
            .map(|s| s * 1000)
    }
}
