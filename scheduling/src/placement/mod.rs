//! The placement engine: pure functions, no clock, no I/O, deterministic given a
//! seed. The live Scheduler actor and `caldera sim` call the same code.
//!
//! Pipeline (Nomad / kube-scheduler style): [`filter`] plugins reject node states
//! that cannot host a demand (each rejection counted by reason), [`score`] plugins
//! rank the rest (one per [`PolicyName`]), and the [`Placer`] selects the best
//! with a seeded, uniform tie-break. The [`Pool`] indexes free room per GPU.
pub mod errors;
pub mod explain;
pub mod filter;
pub mod fit;
pub mod frag;
pub mod hash;
pub mod holes;
pub mod mix;
pub mod placer;
pub mod policy;
pub mod pool;
pub mod rejections;
pub mod rng;
pub mod score;
pub mod spread;
pub mod state;
pub mod types;

pub use errors::PlacementError;
pub use mix::{Shape, WorkloadMix};
pub use placer::Placer;
pub use policy::{PolicyName, UnknownPolicy};
pub use pool::Pool;
pub use rejections::Rejections;
pub use spread::{HeldReplicas, ReplicaSpread, Spread};
pub use types::{
    Demand, GpuDemand, GpuSlot, GpuUnit, ImageNeed, NodeId, NodeImages, NodeView, NodeWeights,
    Placement, WeightsNeed,
};

#[cfg(test)]
mod placer_tests;
#[cfg(test)]
mod placer_weights_tests;
