//! The portal: server-rendered pages for operators and tenants, served by
//! the gateway at `/` on the API's port. Pages are maud templates (checked
//! at compile time) rendered from the API's own answers: each page calls
//! the functions of [`crate::api`] that the REST handlers call, with typed
//! inputs built from its address and forms, so a page shows exactly what the
//! API would, under the same tenant checks and with the same refusals.
//! Charts and GPU memory bars are SVG/HTML drawn here; one small script
//! refreshes each page's live region in place. No build toolchain, no network.
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
pub mod login_rate;
pub mod membar;
pub mod model_actions;
pub mod models;
pub mod nodes;
pub mod overview;
pub mod respond;
pub mod session;
pub mod spec_form;
pub mod submit;
pub mod task_lookup;
pub mod task_page;
pub mod tasks;
pub mod tenants;

pub use error::PortalError;

/// The portal's state in the gateway: its sessions and login counts.
pub struct Portal {
    pub sessions: session::Sessions,
    pub logins: login_rate::LoginRate,
}

/// How the portal's logins are bounded (the `portal-*` config keys).
#[derive(Debug, Clone, Copy)]
pub struct PortalLimits {
    /// How long a session lasts, ms.
    pub session_ttl_ms: u64,
    /// Most sessions one principal holds at once.
    pub sessions_per_principal: usize,
    /// Logins one principal, and failed logins one address, per minute.
    pub logins_per_minute: u32,
}

impl Portal {
    pub fn new(limits: PortalLimits) -> Portal {
        Portal {
            sessions: session::Sessions::new(limits.session_ttl_ms, limits.sessions_per_principal),
            logins: login_rate::LoginRate::new(limits.logins_per_minute),
        }
    }
}
