//! What operators (and a tenant, for its own versions) ask of a version:
//! prewarm caches ahead of a rollout, pin, deprecate. Each is recorded
//! before it is acted on and answered once durable.
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use crate::protocol::model::{ChangeState, Prewarm, PrewarmTarget, SetPinned};
use actix::prelude::*;
use caldera_spec::{CopyState, EventKind, ModelState, ModelVersionRecord};
use caldera_spec::{SpecError, SpecErrorKind as K};

/// Whether a version may go from `from` to `to`. `registered -> active` is
/// a task's first use; `deprecated` is an operator's flag (still usable);
/// `retiring -> retired` belong to the retire control message (next issue):
/// allowed here so its plumbing is ready, reachable from no route yet.
pub fn may_change(from: ModelState, to: ModelState) -> bool {
    use ModelState as S;
    matches!(
        (from, to),
        (S::Registered, S::Active)
            | (S::Registered | S::Active, S::Deprecated)
            | (S::Registered | S::Active | S::Deprecated, S::Retiring)
            | (S::Retiring, S::Retired)
    )
}

impl ModelVersionActor {
    /// The nodes a prewarm warms: those named (each must be known), or the
    /// first `n` by name of the live nodes holding no copy and reading none.
    fn prewarm_nodes(&self, target: &PrewarmTarget) -> Result<Vec<String>> {
        match target {
            PrewarmTarget::Nodes(names) => {
                for n in names {
                    if self.sh.registry.node(n).is_none() {
                        return Err(ActorError::Invalid(SpecError::new(
                            K::OutOfRange,
                            "nodes",
                            format!("node {n:?} is not known"),
                        )));
                    }
                }
                Ok(names.clone())
            }
            PrewarmTarget::Count(n) => {
                let sha = &self.rec.spec.weights.sha256;
                let owner = self.rec.owner.as_deref();
                Ok(self
                    .sh
                    .fleet
                    .all()
                    .into_iter()
                    .filter(|(_, c)| c.live && c.report.capacity_bytes > 0 && !c.holds(sha, owner))
                    .filter(|(name, _)| {
                        !self.rec.nodes.get(name).is_some_and(|c| {
                            matches!(c.copy, CopyState::Verified | CopyState::Warming)
                        })
                    })
                    .map(|(name, _)| name)
                    .take(*n as usize)
                    .collect())
            }
        }
    }

    /// Answers `rec` once the latest commit is durable.
    pub(super) fn durable_answer<T: Send + 'static>(&self, value: T) -> ResponseFuture<Result<T>> {
        let gate = self.sh.gate.clone();
        let t = gate.latest();
        Box::pin(async move {
            gate.durable(t).await;
            Ok(value)
        })
    }
}

impl Handler<Prewarm> for ModelVersionActor {
    type Result = ResponseFuture<Result<Vec<String>>>;
    fn handle(&mut self, m: Prewarm, ctx: &mut Context<Self>) -> Self::Result {
        let nodes = match self.prewarm_nodes(&m.target) {
            Ok(n) => n,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let mut plan = self.plan();
        if m.pin && !plan.rec.pinned {
            plan.rec.pinned = true;
            let msg = format!("model {} pinned by a prewarm", self.key());
            plan.events
                .push(self.event(None, EventKind::ModelStateChanged, msg));
        }
        let msg = format!("prewarm of {} on {}", self.key(), nodes.join(", "));
        plan.events
            .push(self.event(None, EventKind::ModelWarmup, msg));
        // The warm commands carry the pin as planned.
        let pinned_before = self.rec.pinned;
        self.rec.pinned = plan.rec.pinned;
        for n in &nodes {
            if plan
                .rec
                .nodes
                .get(n)
                .is_some_and(|c| matches!(c.copy, CopyState::Verified | CopyState::Warming))
            {
                continue;
            }
            // The operator asking again is what a copy that gave up waits for.
            Self::forget_failures(&mut plan, n);
            self.serve(&mut plan, n, None);
            if let Some(c) = plan.rec.nodes.get_mut(n) {
                c.prewarm = matches!(c.copy, CopyState::Warming | CopyState::Waiting);
            }
        }
        self.rec.pinned = pinned_before;
        if !self.carry_out(ctx, CommitSite::ModelWarmup, plan) {
            return Box::pin(async {
                Err(ActorError::NotRecorded(
                    "the prewarm could not be recorded; nothing was changed; retry".into(),
                ))
            });
        }
        if self.rec.pinned && !pinned_before {
            self.pin_holders();
        }
        self.durable_answer(nodes)
    }
}

impl Handler<SetPinned> for ModelVersionActor {
    type Result = ResponseFuture<Result<ModelVersionRecord>>;
    fn handle(&mut self, m: SetPinned, _: &mut Context<Self>) -> Self::Result {
        if self.rec.pinned == m.pinned {
            return self.durable_answer(self.rec.clone());
        }
        let mut planned = self.rec.clone();
        planned.pinned = m.pinned;
        let what = if m.pinned { "pinned" } else { "unpinned" };
        let msg = format!("model {} {what}", self.key());
        let e = self.event(None, EventKind::ModelStateChanged, msg);
        if let Err(e) = self.record(CommitSite::ModelState, planned, vec![e]) {
            return Box::pin(async move { Err(e) });
        }
        self.pin_holders();
        self.durable_answer(self.rec.clone())
    }
}

impl Handler<ChangeState> for ModelVersionActor {
    type Result = ResponseFuture<Result<ModelVersionRecord>>;
    fn handle(&mut self, m: ChangeState, _: &mut Context<Self>) -> Self::Result {
        let from = self.rec.state;
        if from == m.to {
            return self.durable_answer(self.rec.clone());
        }
        if !may_change(from, m.to) {
            let e = ActorError::Conflict(format!(
                "model {} is {}; it cannot become {}",
                self.key(),
                from.as_str(),
                m.to.as_str()
            ));
            return Box::pin(async move { Err(e) });
        }
        let mut planned = self.rec.clone();
        planned.state = m.to;
        let msg = format!(
            "model {}: {} -> {}",
            self.key(),
            from.as_str(),
            m.to.as_str()
        );
        let e = self.event(None, EventKind::ModelStateChanged, msg);
        if let Err(e) = self.record(CommitSite::ModelState, planned, vec![e]) {
            return Box::pin(async move { Err(e) });
        }
        self.durable_answer(self.rec.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::may_change;
    use caldera_spec::ModelState as S;

    #[test]
    fn the_states_a_version_may_take() {
        let rows = [
            (S::Registered, S::Active, true),
            (S::Active, S::Deprecated, true),
            (S::Registered, S::Deprecated, true),
            (S::Deprecated, S::Active, false),
            (S::Active, S::Registered, false),
            (S::Deprecated, S::Retiring, true),
            (S::Retiring, S::Retired, true),
            (S::Retired, S::Active, false),
            (S::Retiring, S::Deprecated, false),
        ];
        for (from, to, ok) in rows {
            assert_eq!(may_change(from, to), ok, "{from:?} -> {to:?}");
        }
    }
}
