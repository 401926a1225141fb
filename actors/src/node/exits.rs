//! Exits as the NodeActor passes them on: each forwarded to its task once
//! per session (a resync may repeat them), and kept, so a task rebuilt before
//! it could record its exit (a failed commit) hears it again when it asks
//! ([`ResendExit`]). Persist-before-act stays the task's: it acts on the
//! exit only once its own transition is recorded.
use super::NodeActor;
use crate::protocol::node::ResendExit;
use crate::protocol::task::Workload;
use actix::prelude::*;
use caldera_spec::wire::WorkloadEventKind;

impl NodeActor {
    /// Tells a task what its workload did; an exit once per session.
    pub(super) fn forward(&mut self, task_id: &str, allocation_id: &str, kind: WorkloadEventKind) {
        if let WorkloadEventKind::Exited(x) = &kind {
            if self.exits_forwarded.contains_key(allocation_id) {
                return;
            }
            let kept = (task_id.to_string(), x.clone());
            self.exits_forwarded.insert(allocation_id.to_string(), kept);
        }
        self.tell_task(task_id, allocation_id, kind);
    }

    fn tell_task(&self, task_id: &str, allocation_id: &str, kind: WorkloadEventKind) {
        if let Some(t) = self.sh.registry.task(task_id) {
            t.do_send(Workload {
                allocation_id: allocation_id.to_string(),
                kind,
                node: self.rec.name.clone(),
                node_data_dir: self.data_dir.clone(),
                node_address: self.address.clone(),
            });
        }
    }
}

impl Handler<ResendExit> for NodeActor {
    type Result = ();
    /// An exit already forwarded goes again, only to the task it was
    /// forwarded to, for that allocation: the task's own record decides what
    /// it means (news of an older attempt is ignored there), and it acts
    /// only once that is recorded. Without one, the workload may have done
    /// something else the task never recorded (started, became ready): the
    /// node is asked for a digest, and the resync tells the task.
    fn handle(&mut self, m: ResendExit, _: &mut Context<Self>) {
        if let Some((task, exit)) = self.exits_forwarded.get(&m.allocation_id) {
            if *task == m.task_id {
                let kind = WorkloadEventKind::Exited(exit.clone());
                self.tell_task(&m.task_id, &m.allocation_id, kind);
            }
            return;
        }
        let epoch = self.rec.epoch;
        let held = self.held.check(epoch, epoch, &m.allocation_id, &m.task_id);
        if held == crate::node_trust::Verdict::Accept(m.task_id.clone()) {
            let why = format!(
                "task {} was rebuilt and may have missed what its workload did",
                m.task_id
            );
            self.ask_digest(&why, true);
        }
    }
}
