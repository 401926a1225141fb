//! Messages a NodeActor answers.
pub use crate::node::{
    AgentGone, AgentHello, AgentMessage, Dispatch, FetchLogs, NodeSnapshot, Reannounce,
    StopWorkload,
};
