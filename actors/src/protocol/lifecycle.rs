//! Messages every supervised entity actor answers (task, service, node, tenant, and the
//! Scheduler): stop-and-rebuild, and the cheap observable state tests and the
//! API read instead of poking at internals.
use actix::prelude::*;
use serde::Serialize;

/// Stop as a fatal error would: the supervisor restarts the actor on the same
/// mailbox and it rebuilds its state from sled in `restarting()`. Sent by the
/// actor to itself when a commit fails, and by tests.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Rebuild {
    pub why: String,
}

/// Asks for the actor's [`Observation`].
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Observation")]
pub struct Observe;

/// How a supervised shell is doing, in one cheap copy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// What the actor is: "task", "node", "tenant", "scheduler".
    pub kind: &'static str,
    /// Its name (task id, node name, tenant name).
    pub name: String,
    /// Its state as the API names it ("running", "ready", "lost", ...).
    pub state: String,
    /// Times its supervisor rebuilt it from sled.
    pub restarts: u32,
    /// Why it was last rebuilt.
    pub last_fault: Option<String>,
}
