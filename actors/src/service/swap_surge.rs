//! A 1-replica service swapped with `max_surge: 1`: make-before-break on
//! free capacity, not in place. The swap is accepted only when the
//! Scheduler's dry run places one more replica of the service's shape now;
//! then one batch records the swap (its `surge: true` entry), the move of
//! slot 0 to a fresh surge index and the surge replica's record, whose spec
//! names the new version. The drain's machinery (`moves.rs`) starts it; the
//! swap — not the move's "it runs" — decides the end: once the surge replica
//! runs AND is ready, the slot is its and the old replica is released
//! (`done`); if it ends, cannot be placed or is not ready within the probe's
//! `ready_timeout_s`, it is released and the old replica keeps serving
//! (`rolled_back`). Each outcome is recorded before it is acted on; a
//! control plane rebuilt mid-swap reads the same record and asks again.
use super::ServiceActor;
use crate::errors::{ActorError, Result};
use crate::protocol::scheduler::DryRunPlacement;
use caldera_scheduling::queue::dry_run::DryRun;
use caldera_spec::{
    local_id, replica_index, EventKind, ModelRef, ReplicaMove, SwapPhase, SwapProgress,
    SwapReplica, SwapStep, TaskRecord, TaskState,
};

impl ServiceActor {
    /// The swap under way, when it is a surge swap: its surge entry's
    /// position in `replicas` and the surge replica's index.
    fn swap_surge(&self) -> Option<(usize, u32)> {
        let swap = self.rec.swap.as_ref().filter(|s| !s.phase.is_over())?;
        let at = swap.replicas.iter().position(|r| r.surge)?;
        let index = replica_index(self.id(), &swap.replicas[at].replica)?;
        Some((at, index))
    }

    /// `index` is the surge replica of the swap under way (its move is the
    /// swap's to finish, on readiness, not the drain's on "running").
    pub(super) fn is_swap_surge(&self, index: u32) -> bool {
        self.swap_surge().is_some_and(|(_, i)| i == index)
    }

    /// The Scheduler's question: where would one more replica of this
    /// service, on `to`, go now? (Read-only: nothing is bound.)
    pub(super) fn surge_question(&self, to: &ModelRef) -> DryRunPlacement {
        let index = self.rec.replica_slots.clone().take_surge();
        let mut spec = self.replica_record(&self.replica_id(index), 0).spec;
        spec.model = Some(to.to_string());
        DryRunPlacement {
            task_id: spec.task_id.clone(),
            tenant: self.rec.tenant.clone(),
            spec,
        }
    }

    /// Refuses the surge swap when the dry run found no room (nothing is
    /// recorded), else records it with its surge replica and starts that.
    pub(super) fn start_surge_swap(
        &mut self,
        mut swap: SwapProgress,
        room: DryRun,
    ) -> Result<(SwapProgress, crate::durability::Ticket)> {
        if !room.placeable {
            return Err(ActorError::SwapNoSurgeRoom(format!(
                "no free room for a surge replica of service {} on {}: {}. Free a node's GPUs or add a node, or swap without max_surge and with \"allow_downtime\": true",
                local_id(self.id()),
                swap.to,
                room.reason.as_deref().unwrap_or("the Scheduler places none now")
            )));
        }
        let now = self.sh.now_ms();
        let mut service = self.rec.clone();
        let index = service.replica_slots.take_surge();
        let old = swap.replicas.first().cloned().ok_or_else(|| {
            ActorError::Conflict(format!("service {} has no replica", local_id(self.id())))
        })?;
        service.replica_slots.moves.push(ReplicaMove {
            slot: 0,
            from: self.rec.replica_slots.index_of(0),
            to: index,
            node: old.node.clone(),
            since_ms: now,
        });
        let id = self.replica_id(index);
        let mut surge = self.replica_record(&id, 0);
        surge.spec.model = Some(swap.to.to_string());
        if let Some(image) = self.swap_image(&swap.to) {
            surge.spec.image = Some(image);
        }
        swap.replicas.push(SwapReplica {
            replica: id.clone(),
            allocation_id: String::new(),
            node: room.node.clone().unwrap_or_default(),
            step: SwapStep::WaitingReady,
            generation: 0,
            since_ms: now,
            surge: true,
            image: None,
            image_digest: None,
        });
        service.swap = Some(swap.clone());
        let msg = format!(
            "swap {} -> {} started by {}: surge replica {} starts on {} on free capacity (one extra replica while the swap lasts); {} serves {} until it is ready",
            swap.from,
            swap.to,
            swap.requested_by,
            local_id(&id),
            swap.to,
            local_id(&old.replica),
            swap.from
        );
        let e = self.event_of(&service, EventKind::ModelSwap, msg);
        let Some(ticket) = self.start_replacement(service, surge, e) else {
            return Err(ActorError::NotRecorded(format!(
                "the swap of service {} could not be recorded; retry",
                local_id(self.id())
            )));
        };
        Ok((swap, ticket))
    }

    /// One look at a surge swap: finish it once the surge replica is ready,
    /// roll it back once it ended or ran out of time, else wait.
    pub(super) fn drive_surge(&mut self) {
        let Some((at, index)) = self.swap_surge() else {
            return;
        };
        let Some(swap) = self.rec.swap.clone() else {
            return;
        };
        let r = &swap.replicas[at];
        let name = local_id(&r.replica).to_string();
        let rec = match self.sh.gate.store().task(&r.replica) {
            Ok(rec) => rec,
            Err(_) => return, // unreadable now: looked at again next turn
        };
        let ready_ms = self.swap_limits().ready_ms;
        match rec {
            Some(rec) if rec.state == TaskState::Running && rec.ready => {
                self.finish_surge(swap, at, index, &rec);
            }
            Some(rec) if rec.state.is_terminal() => self.roll_back_surge(format!(
                "surge replica {name} ended ({}) before it was ready",
                rec.state.as_str()
            )),
            None => self.roll_back_surge(format!("surge replica {name} has no record")),
            Some(_) if self.sh.now_ms().saturating_sub(r.since_ms) > ready_ms => self
                .roll_back_surge(format!(
                    "surge replica {name} not ready within {} s (the probe's ready_timeout_s)",
                    ready_ms / 1000
                )),
            Some(_) => {}
        }
    }

    /// Records the swap done — the slot is the surge replica's, the spec
    /// names the new version — then releases the old replica.
    fn finish_surge(&mut self, mut swap: SwapProgress, at: usize, index: u32, rec: &TaskRecord) {
        let now = self.sh.now_ms();
        swap.phase = SwapPhase::Done;
        swap.finished_ms = Some(now);
        for r in &mut swap.replicas {
            r.step = SwapStep::Done;
            r.since_ms = now;
        }
        if let Some(a) = &rec.allocation {
            swap.replicas[at].allocation_id = a.allocation_id.clone();
            swap.replicas[at].node = a.node.clone();
        }
        let surge = local_id(&swap.replicas[at].replica).to_string();
        let old: Vec<&str> = swap
            .replicas
            .iter()
            .filter(|r| !r.surge)
            .map(|r| local_id(&r.replica))
            .collect();
        let msg = format!(
            "swap {} -> {} done: surge replica {surge} ready on {} in {:.1} s serves the slot; {} ({}) is released",
            swap.from,
            swap.to,
            swap.to,
            now.saturating_sub(swap.started_ms) as f64 / 1000.0,
            old.join(", "),
            swap.from
        );
        let by = format!(
            "swap of {} to {}: surge replica {surge} ready (planned, no retry spent)",
            local_id(self.id()),
            swap.to
        );
        let mut planned = self.rec.clone();
        super::swap_drive::serve_target(&mut planned, &swap.to, self.swap_image(&swap.to));
        planned.swap = Some(swap.clone());
        let e = self.event_of(&planned, EventKind::ModelSwap, msg);
        if self.finish_move_with(index, planned, e, by) {
            self.tell_version_left(&swap, &swap.from, &swap.to);
            self.settle();
        }
    }

    /// Records the surge swap rolled back for `reason` — the move dropped,
    /// the surge replica retiring — then releases the surge replica; the
    /// old replica never stopped serving.
    pub(super) fn roll_back_surge(&mut self, reason: String) {
        let Some((at, index)) = self.swap_surge() else {
            return;
        };
        let Some(mut swap) = self.rec.swap.clone() else {
            return;
        };
        let now = self.sh.now_ms();
        swap.phase = SwapPhase::RolledBack;
        swap.reason = Some(reason.clone());
        swap.finished_ms = Some(now);
        for r in &mut swap.replicas {
            r.step = SwapStep::RolledBack;
            r.since_ms = now;
        }
        let mut planned = self.rec.clone();
        let slots = &mut planned.replica_slots;
        slots.moves.retain(|m| m.to != index);
        // An old replica that stopped first gave the slot away: it is back.
        slots.serving.retain(|_, i| *i != index);
        if !slots.retiring.contains(&index) {
            slots.retiring.push(index);
        }
        planned.pending_reason = None;
        planned.swap = Some(swap.clone());
        let surge = local_id(&swap.replicas[at].replica).to_string();
        let msg = format!(
            "swap {} -> {} rolled back ({reason}); surge replica {surge} is released, the service serves {}",
            swap.from, swap.to, swap.from
        );
        let e = self.event_of(&planned, EventKind::ModelSwap, msg);
        let site = crate::commit_site::CommitSite::ServiceSwap;
        if self.record(site, planned, vec![e]).is_err() {
            return;
        }
        let by = format!("swap rollback of {}: {reason}", local_id(self.id()));
        self.retire(index, by);
        self.tell_version_left(&swap, &swap.to, &swap.from);
        self.ensure_replicas();
        self.settle();
    }
}
