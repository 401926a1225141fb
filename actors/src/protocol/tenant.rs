//! Messages a TenantActor answers.
pub use crate::tenant::{ChangeQuota, TenantSnapshot};
