//! A container task's start command part, and what happens when it cannot
//! be built: a volume the operator withdrew since the submission fails the
//! start at once (it would be refused the same on every try); credentials
//! that cannot be read now back off as an undelivered start does.
use super::TaskActor;
use crate::container::start::{self, NotBuilt};
use crate::lifecycle::{self, Input};
use actix::prelude::*;
use caldera_spec::codes;
use caldera_spec::container::ContainerStart;
use caldera_spec::wire::WorkloadEventKind;
use caldera_spec::Allocation;

impl TaskActor {
    /// The container part of this task's start command (`None`: a process).
    pub(crate) fn container_start(&self) -> Result<Option<ContainerStart>, NotBuilt> {
        start::build(
            &self.sh.config,
            self.sh.gate.store(),
            &self.rec.tenant,
            &self.rec.spec,
        )
    }

    /// The start of `a` could not be built: said why, it fails the task or
    /// waits to be tried again.
    pub(crate) fn start_not_built(
        &mut self,
        ctx: &mut Context<Self>,
        a: &Allocation,
        why: NotBuilt,
    ) {
        match why {
            NotBuilt::Refused(reason) => {
                let kind = WorkloadEventKind::StartFailed {
                    reason: format!("{}: {reason}", codes::VOLUME_NOT_ALLOWED.name),
                    code: codes::VOLUME_NOT_ALLOWED.code,
                };
                let input = Input::Workload {
                    allocation_id: &a.allocation_id,
                    kind: &kind,
                    node_address: "",
                };
                self.react(ctx, input, None);
            }
            NotBuilt::Unreadable(why) => {
                self.dispatch_failures = self.dispatch_failures.saturating_add(1);
                let retry = lifecycle::dispatch_backoff(self.dispatch_failures);
                let input = Input::DispatchFailed {
                    node: &a.node,
                    why: &why,
                    retry_in_ms: retry.as_millis() as u64,
                };
                self.react(ctx, input, None);
            }
        }
    }
}
