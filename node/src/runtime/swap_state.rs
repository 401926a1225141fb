//! What a workload holds of a swap under way: the stage it is at and, for a
//! container, the new container's side. Kept apart from the code that
//! drives swaps (`swap`, `container_swap`) so the workload's record names
//! only this state, not the drivers.
use crate::shim::files::{ContainerShim, PidRecord};
use caldera_spec::wire::SwapCommand;
use std::path::PathBuf;

/// A swap under way on one workload.
#[derive(Debug, Clone)]
pub struct PendingSwap {
    pub cmd: SwapCommand,
    pub stage: SwapStage,
    /// A workload in a container: its new container's side.
    pub container: Option<Box<ContainerSwap>>,
}

/// Where a swap stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwapStage {
    /// Waiting for the new version's verified copy; the old process serves.
    Warming,
    /// The old process was asked to stop; its shim's end starts the new one
    /// on the copy at this path.
    Stopping(PathBuf),
    /// The new shim runs; its start report completes the swap.
    Starting,
    /// A container's: the new container runs beside the old one and is
    /// probed; the old one serves.
    Candidate,
    /// A container's: the new container is ready and the old one was asked
    /// to stop; its shim's end hands the workload over.
    Retiring,
}

/// The container side of a swap under way.
#[derive(Debug, Clone)]
pub struct ContainerSwap {
    /// The image the new container runs.
    pub image: String,
    /// The run number the swap's pull reports under.
    pub pull_run: u64,
    /// The new image's digest, once pulled.
    pub digest: Option<String>,
    /// The new version's verified copy, once ready.
    pub copy: Option<PathBuf>,
    /// The new container, once started.
    pub candidate: Option<Candidate>,
}

/// A swap's new container, beside the old one until it takes over.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub run: u64,
    pub dir: PathBuf,
    pub port: Option<u16>,
    pub container: ContainerShim,
    pub image: String,
    pub shim: Option<PidRecord>,
    pub pid: Option<u32>,
    pub probe: Option<tokio::task::AbortHandle>,
}
