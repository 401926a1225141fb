//! Signed webhooks: subscriptions (`POST /v1/webhooks`), and the
//! [`Dispatcher`](dispatcher::Dispatcher) that follows the event log and
//! POSTs each event to the subscriptions that want it.
//!
//! The guarantee is at-least-once: a delivery is recorded in sled (and
//! flushed) before its first attempt and stays queued until a 2xx is
//! recorded, so a control plane killed at any point sends it again after its
//! restart. The event id is the event's seq; receivers deduplicate by it.
//! Each POST is signed (`signature.rs`); failures are retried with
//! exponential backoff (`backoff.rs`) for `webhooks.retry-for-ms`. Where a
//! webhook may go is checked when it is made and before every attempt
//! (`target.rs`); who may attempt when is `slots.rs`; how many deliveries
//! are kept is `retention.rs`.
pub mod backoff;
pub mod dispatcher;
pub mod payload;
pub mod retention;
pub mod send;
pub mod signature;
pub mod slots;
pub mod subscriptions;
pub mod target;

use crate::config::ServerConfig;
use caldera_spec::outbound::OutboundPolicy;

/// Attempts in flight at once to one subscription: a slow receiver holds
/// at most these, never the whole budget.
pub const MAX_IN_FLIGHT_PER_WEBHOOK: usize = 4;

/// Where webhooks may go under `c` (`webhooks.allow-hosts`). A list that
/// does not read (refused at start by the config's `validate`) allows
/// nothing beyond the default.
pub fn policy(c: &ServerConfig) -> OutboundPolicy {
    OutboundPolicy::parse(&c.webhooks.allow_hosts).unwrap_or_default()
}
