//! A hot swap in place: a service's replicas move from one
//! model version to another on the allocations they already hold, one
//! replica at a time, with rollback. The progress is recorded in the
//! service's task record ([`crate::TaskRecord::swap`]) BEFORE each action,
//! so a control plane killed mid-swap resumes from the recorded step.
//!
//! The rule, as the API states it: with 2 or more replicas the swap goes
//! replica by replica and only swaps one while another is ready, so the
//! service never has zero ready replicas; with 1 replica it is refused unless
//! the request allows downtime or asks for one surge replica that free
//! capacity can hold right now.
use crate::model::ModelRef;
use serde::{Deserialize, Serialize};

/// A swap of one service, recorded in the service's task record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SwapProgress {
    /// The version the service served when the swap started.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "llama:v3"))]
    #[serde(with = "as_text")]
    pub from: ModelRef,
    /// The version it is moving to.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "llama:v4"))]
    #[serde(with = "as_text")]
    pub to: ModelRef,
    /// Who asked for it: a tenant, or `retire:<operator>` for a retirement.
    pub requested_by: String,
    pub allow_downtime: bool,
    /// 1: a 1-replica service gets a surge replica on `to` first.
    pub max_surge: u32,
    pub phase: SwapPhase,
    /// One entry per replica, in the order they are swapped.
    pub replicas: Vec<SwapReplica>,
    /// Why it rolled back (names the replica and the reason), or was refused midway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub started_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
}

/// Where a whole swap stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SwapPhase {
    /// Replicas are being moved to `to`, one at a time.
    Swapping,
    /// Every replica serves `to`.
    Done,
    /// A replica failed on `to`: the swapped ones go back to `from`.
    RollingBack,
    /// Every replica serves `from` again; `reason` says why.
    RolledBack,
    /// The service was released before the swap ended: its replicas were
    /// stopped wherever they stood; `reason` says who released it.
    Cancelled,
}

impl SwapPhase {
    /// Ended: a new swap may start.
    pub fn is_over(self) -> bool {
        matches!(
            self,
            SwapPhase::Done | SwapPhase::RolledBack | SwapPhase::Cancelled
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SwapPhase::Swapping => "swapping",
            SwapPhase::Done => "done",
            SwapPhase::RollingBack => "rolling_back",
            SwapPhase::RolledBack => "rolled_back",
            SwapPhase::Cancelled => "cancelled",
        }
    }
}

/// One replica's part of a swap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SwapReplica {
    /// The replica's task id (`svc.r0`), as its record is keyed.
    pub replica: String,
    /// Its allocation: the same before, during and after the swap.
    pub allocation_id: String,
    pub node: String,
    pub step: SwapStep,
    /// The process generation the last Swap command asked for (0: none sent).
    #[serde(default)]
    pub generation: u32,
    /// When the current step began (its timeout counts from here).
    pub since_ms: u64,
    /// A surge replica (a 1-replica swap with `max_surge: 1`): started on
    /// `to` by a make-before-break move, not swapped in place.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub surge: bool,
    /// The image its container runs once swapped (the version's, else the
    /// service's), and that image's digest as its node ran it; absent for
    /// a replica that runs as a process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
}

/// Where one replica of a swap stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SwapStep {
    /// Not started: waits for its turn (and for another replica to be ready).
    Pending,
    /// `to`'s weights are being warmed into its node's cache; `from` serves.
    Warming,
    /// The Swap command was sent: the node restarts the process on `to`.
    Restarting,
    /// The node said Swapped; waiting for the readiness probe.
    WaitingReady,
    /// Ready on `to`.
    Done,
    /// Being swapped back to `from` (a new generation).
    RollingBack,
    /// Serves `from` again.
    RolledBack,
}

impl SwapStep {
    pub fn as_str(self) -> &'static str {
        match self {
            SwapStep::Pending => "pending",
            SwapStep::Warming => "warming",
            SwapStep::Restarting => "restarting",
            SwapStep::WaitingReady => "waiting_ready",
            SwapStep::Done => "done",
            SwapStep::RollingBack => "rolling_back",
            SwapStep::RolledBack => "rolled_back",
        }
    }
}

/// What a swap request got: a swap under way, or a no-op that says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SwapAnswer {
    /// Accepted and recorded; it runs replica by replica.
    Started { swap: SwapProgress },
    /// The service already serves that version: nothing to do.
    AlreadyServing {
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        #[serde(with = "as_text")]
        model: ModelRef,
        message: String,
    },
}

/// A version as `name:version` text in JSON, as every other view writes it.
mod as_text {
    use crate::model::ModelRef;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &ModelRef, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(m)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ModelRef, D::Error> {
        let text = String::deserialize(d)?;
        ModelRef::parse(&text, "model").map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_written_as_name_colon_version() {
        let m = |v: &str| ModelRef {
            name: "llama".into(),
            version: v.into(),
        };
        let a = SwapAnswer::AlreadyServing {
            model: m("v4"),
            message: "x".into(),
        };
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains(r#""model":"llama:v4""#), "{text}");
        assert_eq!(serde_json::from_str::<SwapAnswer>(&text).unwrap(), a);
    }
}
