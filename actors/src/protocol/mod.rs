//! The control plane's protocol: every message an actor answers, grouped by the
//! actor that receives it. Shells and the gateway's facade name messages from
//! here, never from another shell's module.
pub mod cluster;
pub mod node;
pub mod scheduler;
pub mod task;
pub mod tenant;
