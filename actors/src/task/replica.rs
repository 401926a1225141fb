//! A replica's side of its service: what it tells its ServiceActor (its
//! state, why it waits, that it is idle, that its node failed a swap) and
//! what it takes from it (the model it runs after a swap step). The
//! service is reached by its handle in the directory, by message only; a
//! task that is no replica tells nobody.
use super::TaskActor;
use crate::commit_site::CommitSite;
use crate::protocol::service::{ReplicaPending, ReplicaState, ReplicaSwapFailed, ScaleInIdle};
use crate::protocol::task::RunsModel;
use crate::protocol::ServiceHandle;
use actix::prelude::*;
use caldera_spec::wire::WorkloadEventKind;
use caldera_spec::TaskState;

impl TaskActor {
    /// A replica's service, if it lives.
    pub(crate) fn service(&self) -> Option<ServiceHandle> {
        let svc = self.rec.service.as_ref()?;
        self.sh.registry.service(svc)
    }

    /// A replica tells its service where it moved.
    pub(crate) fn tell_service(&self, state: TaskState) {
        if let Some(svc) = self.service() {
            svc.do_send(ReplicaState {
                replica: self.id().to_string(),
                state,
            });
        }
    }

    /// An idle replica: its service decides whether to scale in.
    pub(crate) fn ask_service_to_scale_in(&self, reason: String) {
        if let Some(svc) = self.service() {
            svc.do_send(ScaleInIdle {
                replica: self.id().to_string(),
                reason,
            });
        }
    }

    /// A replica waiting for room tells its service why.
    pub(crate) fn tell_service_pending(&self, reason: &str) {
        if self.rec.state != TaskState::Queued {
            return;
        }
        if let Some(svc) = self.service() {
            svc.do_send(ReplicaPending {
                replica: self.id().to_string(),
                reason: reason.to_string(),
            });
        }
    }

    /// A replica's swap news: true drops the event — a resync's repeat of
    /// "ready" for the generation it drains (it would put the replica back
    /// on the endpoints list just before its process is restarted).
    /// The answer to a Swap ends the drain; a SwapFailed also goes to the
    /// service.
    pub(crate) fn swap_news(&mut self, kind: &WorkloadEventKind) -> bool {
        match kind {
            WorkloadEventKind::Readiness {
                ready: true,
                generation,
                ..
            } => return self.swap_draining == Some(*generation),
            WorkloadEventKind::Swapped { .. } => self.swap_draining = None,
            WorkloadEventKind::SwapFailed { generation, reason } => {
                self.swap_draining = None;
                if let Some(svc) = self.service() {
                    svc.do_send(ReplicaSwapFailed {
                        replica: self.id().to_string(),
                        generation: *generation,
                        reason: reason.clone(),
                    });
                }
            }
            _ => {}
        }
        false
    }
}

impl Handler<RunsModel> for TaskActor {
    type Result = ();
    /// Recorded in the replica's own record (its actor owns it).
    fn handle(&mut self, m: RunsModel, _: &mut Context<Self>) {
        if self.rec.state.is_terminal() {
            return;
        }
        self.swap_draining = Some(self.rec.generation);
        let mut planned = self.rec.clone();
        planned.spec.model = Some(m.model);
        if let Some(image) = m.image {
            // A replica started again (requeued) runs what it was swapped to.
            planned.spec.image = Some(image);
        }
        planned.ready = false;
        // Not recorded: the replica is rebuilt from sled; its process still
        // runs what its node was told, and reports it (`serving_model`).
        let _ = self.record(CommitSite::TaskRecord, planned, Vec::new());
    }
}
