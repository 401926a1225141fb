//! What the HTTP API answers: the `data` of each envelope, as types.
//!
//! The gateway builds and returns these, the CLI deserializes its answers
//! into them, and `/openapi.json` derives its schemas from them (with the
//! `openapi` feature), so the server, its one client and the document
//! cannot disagree about a field: a field dropped here fails to compile
//! wherever it is read. Readers tolerate fields they do not know (serde's
//! default), and what the server may leave out is an `Option`.
pub mod cost;
pub mod dry_run;
pub mod endpoints;
pub mod event;
pub mod model;
pub mod node;
pub mod pool;
pub mod registry;
pub mod stats;
pub mod task;
pub mod tenant;
pub mod webhook;
pub mod whoami;

pub use cost::{BillingRecordView, CostLineView, CostReportView, CostTotalView, PricesView};
pub use dry_run::{Admission, DryRun, WouldPreempt};
pub use endpoints::{EndpointView, ServiceEndpoints};
pub use event::{EventPage, EventView};
pub use model::{CopyView, ModelView, Prewarmed, VersionView};
pub use node::{runtime_label, runtimes_or_process, Allocations, GpuView, NodeList, NodeView};
pub use pool::{Dim, Dims, Keyed, Utilization};
pub use registry::{
    Prepulled, RegistryCredentialDeleted, RegistryCredentialList, RegistryCredentialView,
};
pub use stats::{EstimateAccuracy, Health, PoolHistoryView, PoolPoint, PoolSample};
pub use task::{allocation_view, LogChunk, Submitted, TaskPage, TaskView, TransitionView};
pub use tenant::{TenantList, TenantUsagePoint, TenantUsageView, TenantView, UsagePair};
pub use webhook::{
    AttemptView, DeliveryPage, DeliveryView, WebhookDeleted, WebhookList, WebhookView,
    DELIVERY_FAILED,
};
pub use whoami::{PrincipalKind, Whoami};
