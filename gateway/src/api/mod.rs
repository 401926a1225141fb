//! The one layer between the gateway's callers and the control plane: the
//! REST handlers (`routes`) and the portal's pages (`portal`) both call these
//! functions with the caller ([`User`](crate::principal::User)) and typed
//! inputs (spec requests, ids, typed queries), so who may see or change
//! what, tenant scoping and validation are written once, and a page shows
//! exactly what the API answers, under the same checks.
//!
//! Nothing here knows HTTP: an answer is a typed view or an
//! [`ApiError`](crate::error::ApiError). Reading a request (path, query,
//! body) and wrapping the answer in the envelope is the handler's job; a
//! page renders the same answer as HTML.
//!
//! A function that acts on a task takes a [`tasks::VisibleTask`], which only
//! [`tasks::find`] makes: an action cannot be reached without the tenant
//! checks having passed.
pub mod endpoints;
pub mod events;
pub mod images;
pub mod models;
pub mod nodes;
pub mod period;
pub mod query;
pub mod registry_credentials;
pub mod swap;
pub mod tasks;
pub mod tenants;
pub mod usage;
pub mod webhooks;
