//! caldera-spec: the shared language of Caldera.
//!
//! Every other crate speaks in these types: what a user asks for ([`TaskSpec`]),
//! what a node offers ([`NodeInventory`]), what the control plane and the agents
//! say to each other ([`wire`]), and the records the control plane keeps
//! ([`TaskRecord`], [`Allocation`], [`Event`]), and the one error-code
//! registry ([`codes`]). No I/O lives here, and it depends on no other Caldera
//! crate: its Cargo.toml lists serde, serde_json, thiserror and url (read
//! as a browser reads one, for the checks of where a webhook may go) only.
pub mod address_class;
pub mod api;
pub mod billing;
pub mod codes;
pub mod confined_file;
pub mod container;
pub mod duration;
pub mod error;
pub mod event;
pub mod gpu_model;
pub mod image_ref;
pub mod images;
mod json;
pub mod limits;
pub mod model;
pub mod model_record;
pub mod node;
pub mod origin;
pub mod outbound;
pub mod readiness;
pub mod record;
pub mod registry_credential;
pub mod replica_slots;
pub mod resources;
pub mod swap;
pub mod task;
pub mod task_key;
pub mod tenant;
pub mod time;
pub mod validate;
pub mod validate_container;
pub mod views;
pub mod webhook;
pub mod webhook_request;
pub mod weights;
pub mod wire;

pub use api::{Envelope, ErrorBody};
pub use billing::{BilledGpu, BillingRecord, BorrowMark, ModelMark};
pub use codes::ErrorCode;
pub use error::{SpecError, SpecErrorKind};
pub use event::{Event, EventKind};
pub use model::{ModelRef, ModelState, ModelVersionSpec, WeightsSpec};
pub use model_record::{CopyState, ModelVersionRecord, NodeCopy, RetireOrder};
pub use node::{
    Cordon, CordonBy, DiskInfo, GpuInfo, NodeInventory, NodeMetrics, NodeRecord, NodeState,
};
pub use readiness::ReadinessProbe;
pub use record::{Allocation, Endpoint, GpuGrant, TaskRecord, TaskState, Transition};
pub use replica_slots::{replica_index, ReplicaMove, ReplicaSlots};
pub use resources::{CpuRequest, GpuRequest, ResourceRequest, SizeRequest};
pub use swap::{SwapAnswer, SwapPhase, SwapProgress, SwapReplica, SwapStep};
pub use task::{OnNodeLoss, Priority, TaskSpec, TaskType};
pub use task_key::{as_seen_by, local_id, names_a_replica, replica_id, task_key, tenant_of};
pub use tenant::{dominant_share, standing, Quota, Standing, TenantRecord, Usage};
pub use validate::{parse_task_spec, MAX_BODY_BYTES};
