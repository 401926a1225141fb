//! Messages the Cluster (the root) answers.
pub use crate::cluster::{CreateTenant, NodeSession, Submit};
