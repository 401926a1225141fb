//! What every supervised entity shell carries: a weak address of itself (so a
//! failed commit can stop it from inside any method, without a context), and
//! the counters its [`Observation`] reports.
//!
//! The rule (DESIGN.md, "Actors"): a fatal error or a failed commit stops the
//! actor; actix's `Supervisor` restarts it on the same mailbox, so every handle
//! others hold stays valid, and the actor's `restarting()` reads its state
//! back from sled. Memory never runs ahead of what was recorded for long: the
//! next message sees the rebuilt state.
use crate::protocol::lifecycle::{Observation, Rebuild};
use actix::prelude::*;
use actix::WeakAddr;
use caldera_storage::StorageError;

/// Rebuilds since the process started, by actor kind, for `/metrics`
/// (`caldera_actor_rebuilds_total`): a failed commit shows up there.
/// Process-wide, like the process it counts in.
pub static REBUILDS: Rebuilds = Rebuilds::new();

/// Counters of [`REBUILDS`].
pub struct Rebuilds {
    counts: [std::sync::atomic::AtomicU64; 5],
}

impl Rebuilds {
    /// The kinds counted, in the order of [`Rebuilds::snapshot`].
    pub const KINDS: [&'static str; 5] = ["task", "node", "tenant", "scheduler", "model"];

    const fn new() -> Self {
        Rebuilds {
            counts: [const { std::sync::atomic::AtomicU64::new(0) }; 5],
        }
    }

    /// One more rebuild of an actor of `kind` (one of [`Rebuilds::KINDS`]).
    pub fn count(&self, kind: &str) {
        if let Some(i) = Self::KINDS.iter().position(|k| *k == kind) {
            self.counts[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// `(kind, rebuilds)` for every kind.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        Self::KINDS
            .iter()
            .zip(&self.counts)
            .map(|(k, c)| (*k, c.load(std::sync::atomic::Ordering::Relaxed)))
            .collect()
    }
}

pub struct Supervision<A: Actor> {
    me: Option<WeakAddr<A>>,
    restarts: u32,
    last_fault: Option<String>,
}

impl<A: Actor> Default for Supervision<A> {
    fn default() -> Self {
        Supervision {
            me: None,
            restarts: 0,
            last_fault: None,
        }
    }
}

impl<A> Supervision<A>
where
    A: Actor<Context = Context<A>> + Handler<Rebuild>,
{
    /// Call from `Actor::started`: remembers the actor's own (weak) address.
    /// Weak, so that the actor still stops once nobody else holds it.
    pub fn started(&mut self, ctx: &mut Context<A>) {
        self.me = Some(ctx.address().downgrade());
    }

    /// A fatal error (a commit that failed): stop once the current message is
    /// done and be rebuilt from sled. Logged once here, with the reason.
    pub fn fail(&self, why: String) {
        tracing::error!(reason = %why, "stopping to be rebuilt from storage");
        if let Some(a) = self.me.as_ref().and_then(|w| w.upgrade()) {
            a.do_send(Rebuild { why });
        }
    }

    /// Call from the `Rebuild` handler, before `ctx.stop()`.
    pub fn stopping(&mut self, why: String) {
        self.last_fault = Some(why);
    }

    /// Call from `Supervised::restarting`, naming the actor's kind.
    pub fn restarted(&mut self, kind: &str) {
        self.restarts += 1;
        REBUILDS.count(kind);
    }

    /// The observable state, with what the actor says of itself.
    pub fn observe(&self, kind: &'static str, name: &str, state: &str) -> Observation {
        Observation {
            kind,
            name: name.to_string(),
            state: state.to_string(),
            restarts: self.restarts,
            last_fault: self.last_fault.clone(),
        }
    }
}

/// What a shell finds when it reads its record back in `restarting()`.
pub enum Reread<T> {
    Found(T),
    /// No record: the entity is gone.
    Gone,
    /// Storage itself cannot be read (logged): the actor keeps what it had,
    /// and the next failed commit stops it again.
    Unreadable,
}

/// Classifies a record read back from sled, logging an unreadable store once.
pub fn reread<T>(what: &str, name: &str, read: Result<Option<T>, StorageError>) -> Reread<T> {
    match read {
        Ok(Some(r)) => Reread::Found(r),
        Ok(None) => Reread::Gone,
        Err(e) => {
            tracing::error!(%what, %name, error = %e, "rebuilt from memory: storage unreadable");
            Reread::Unreadable
        }
    }
}

/// `Rebuild` for a shell with a `sup: Supervision<Self>` field: note why, stop,
/// and let the supervisor restart it (then `restarting()` reads sled).
macro_rules! rebuild_on_request {
    ($actor:ty) => {
        impl actix::Handler<$crate::protocol::lifecycle::Rebuild> for $actor {
            type Result = ();
            fn handle(
                &mut self,
                m: $crate::protocol::lifecycle::Rebuild,
                ctx: &mut actix::Context<Self>,
            ) {
                self.sup.stopping(m.why);
                actix::ActorContext::stop(ctx);
            }
        }
    };
}
pub(crate) use rebuild_on_request;
