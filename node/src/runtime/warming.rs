//! Allocations whose task names a model wait in `warming` between Preparing
//! and Ready, until the node's weight cache holds a verified copy of the
//! version: a workload record without a shim (reported alive, no pid, so
//! the control plane keeps it), that a stop ends at once. Which copies are
//! in use comes from here, so the cache never evicts one a live allocation
//! (also one adopted after an agent restart) reads.
use super::{shim_link, Runtime, Workload};
use crate::cache::InUse;
use crate::error::StartError;
use caldera_spec::wire::{ModelMount, StartCommand, WorkloadEventKind};
use std::path::Path;

impl Runtime {
    /// Holds `cmd` in warming (its Preparing event is out).
    pub(super) fn park(&mut self, cmd: &StartCommand) {
        let log = super::logs::log_path(&self.data_dir, &cmd.task_id);
        let mut w = Workload::new(cmd, 0, Path::new(""), log);
        w.shim_dir = shim_link::dir_of(&self.data_dir, &cmd.allocation_id);
        w.warming = Some(Box::new(cmd.clone()));
        self.workloads.insert(cmd.allocation_id.clone(), w);
    }

    /// True when the runtime has (or recently had) this allocation.
    pub fn knows(&self, allocation_id: &str) -> bool {
        self.workloads.contains_key(allocation_id)
            || self.finished.iter().any(|(a, _)| a == allocation_id)
            || shim_link::dir_of(&self.data_dir, allocation_id).exists()
    }

    /// Refuses a start before anything ran (Preparing, then StartFailed).
    pub fn refuse(&mut self, cmd: &StartCommand, e: &StartError) {
        self.event(
            &cmd.allocation_id,
            &cmd.task_id,
            cmd.epoch,
            WorkloadEventKind::Preparing,
        );
        self.start_failed(&cmd.allocation_id, &cmd.task_id, cmd.epoch, e);
    }

    /// Model shas of the allocations waiting in warming.
    pub fn warming_shas(&self) -> Vec<(String, u64)> {
        let mut shas: Vec<(String, u64)> = self
            .workloads
            .values()
            .filter_map(|w| w.warming.as_ref()?.model.as_ref())
            .map(|m| (m.sha256.clone(), m.size_bytes))
            .collect();
        shas.dedup();
        shas
    }

    /// A progress event for every allocation waiting for `sha256`.
    pub fn warming_progress(
        &mut self,
        sha256: &str,
        source: &str,
        bytes_done: u64,
        rate_bytes_per_s: u64,
    ) {
        let mut waiting: Vec<(String, String, u64, ModelMount)> = self
            .workloads
            .values()
            .filter_map(|w| {
                let model = w.warming.as_ref()?.model.as_ref()?;
                (model.sha256 == sha256).then(|| {
                    let id = w.allocation_id.clone();
                    (id, w.task_id.clone(), w.epoch, model.clone())
                })
            })
            .collect();
        waiting.extend(self.swap_warming_targets(sha256));
        for (id, task, epoch, model) in waiting {
            let kind = WorkloadEventKind::Warming {
                model: super::launch::model_label(&model),
                source: source.to_string(),
                bytes_done,
                size_bytes: model.size_bytes,
                rate_bytes_per_s,
            };
            self.event(&id, &task, epoch, kind);
        }
    }

    /// The verified copy of `sha256` is at `path`: every allocation waiting
    /// for it goes on to Ready and its process starts; every swap waiting
    /// for it stops its old process.
    pub fn weights_ready(
        &mut self,
        sha256: &str,
        path: &Path,
        serves: &dyn Fn(Option<&str>) -> bool,
    ) {
        self.swap_copy_ready(sha256, path, serves);
        let ready: Vec<String> = self
            .workloads
            .values()
            .filter(|w| {
                w.warming
                    .as_ref()
                    .and_then(|c| c.model.as_ref())
                    .is_some_and(|m| m.sha256 == sha256 && serves(m.owner.as_deref()))
            })
            .map(|w| w.allocation_id.clone())
            .collect();
        for id in ready {
            let Some(w) = self.workloads.remove(&id) else {
                continue;
            };
            let Some(mut cmd) = w.warming else {
                continue;
            };
            // Under the epoch a welcome may have moved it to.
            cmd.epoch = w.epoch;
            self.launch_now(&cmd, Some(path.to_path_buf()));
        }
    }

    /// Live allocations per model sha256 (warming, running or swapping to it).
    pub fn models_in_use(&self) -> InUse {
        let mut in_use = InUse::new();
        for w in self.workloads.values().filter(|w| w.is_alive()) {
            if let Some(sha) = &w.model_sha256 {
                *in_use.entry(sha.clone()).or_default() += 1;
            }
            // A swap's new copy is in use from its warming on (the old one
            // until the new process replaced it).
            let swapping = w
                .swap
                .as_ref()
                .filter(|p| Some(&p.cmd.model.sha256) != w.model_sha256.as_ref());
            if let Some(p) = swapping {
                *in_use.entry(p.cmd.model.sha256.clone()).or_default() += 1;
            }
        }
        in_use
    }
}
