//! The portal: server-rendered pages for operators and tenants, served by
//! the gateway at `/` on the API's port. Pages are maud templates (checked
//! at compile time) rendered from the API's own handlers (each page calls
//! the `routes::*` functions the JSON API answers with, so a page shows
//! exactly what the API would, under the same tenant checks); charts and GPU
//! memory bars are SVG/HTML drawn here; one small script refreshes each
//! page's live region in place. No build toolchain, no network.
//!
//! Login exchanges an API token for a server-side session (see
//! [`session`]); every form POST carries the session's CSRF token
//! ([`auth::Form`]). Every page answers `Server-Timing: render;dur=<ms>`.
pub mod assets;
pub mod auth;
pub mod chart;
pub mod dry_run;
pub mod error;
pub mod events;
pub mod layout;
pub mod login;
pub mod membar;
pub mod models;
pub mod nodes;
pub mod overview;
pub mod respond;
pub mod session;
pub mod spec_form;
pub mod submit;
pub mod task_page;
pub mod tasks;
pub mod tenants;

pub use error::PortalError;

/// The portal's state in the gateway: its sessions.
pub struct Portal {
    pub sessions: session::Sessions,
}

impl Portal {
    /// A portal whose sessions last `session_ttl_ms`.
    pub fn new(session_ttl_ms: u64) -> Portal {
        Portal {
            sessions: session::Sessions::new(session_ttl_ms),
        }
    }
}
