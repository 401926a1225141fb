//! A task's model on its node: the mount its start command carries, the
//! version's actor told that the node needs a copy, and the Warming stage's
//! progress (throttled) and timeout.
use super::TaskActor;
use crate::lifecycle::{self, Input};
use crate::model::mount::mount_of_version;
use crate::protocol::model::NodeNeeds;
use actix::prelude::*;
use caldera_spec::weights::ModelMount;
use caldera_spec::wire::WorkloadEventKind;
use caldera_spec::TaskState;
use std::time::Duration;

/// Progress events of one warming task: at most one per this long (the
/// last, the copy complete, always).
const PROGRESS_EVERY_MS: u64 = 1000;

/// What a warming task last heard of its copy.
#[derive(Debug, Clone, Default)]
pub(crate) struct WarmingNote {
    pub model: String,
    pub source: String,
    pub bytes_done: u64,
    pub size_bytes: u64,
    /// When a progress event was last recorded (clock ms).
    pub recorded_at_ms: u64,
}

impl TaskActor {
    /// The mount of the task's model, from the registry's record (checked
    /// at submission; a version gone since starts the task without one and
    /// the agent refuses nothing it was not told).
    pub(crate) fn model_mount(&self) -> Option<ModelMount> {
        mount_of_version(self.sh.gate.store(), self.rec.spec.model.as_ref()?)
    }

    /// The start went out to `node`: the version's actor records that the
    /// node needs a copy and chooses where it reads it from.
    pub(crate) fn tell_model_needed(&self, node: &str) {
        let Some(model) = &self.rec.spec.model else {
            return;
        };
        if let Some(m) = self.sh.registry.model(model) {
            m.do_send(NodeNeeds {
                node: node.to_string(),
                task: Some(self.id().to_string()),
            });
        }
    }

    /// Whether a `Warming` report goes on to the lifecycle: the first
    /// always (it enters the stage), later ones about once a second, and
    /// the one that completes the copy. Every one updates the note the
    /// timeout's reason is written from.
    pub(crate) fn warming_due(&mut self, kind: &WorkloadEventKind) -> bool {
        let WorkloadEventKind::Warming {
            model,
            source,
            bytes_done,
            size_bytes,
            ..
        } = kind
        else {
            return true;
        };
        let now = self.sh.now_ms();
        let first = self.rec.state != TaskState::Warming;
        let note = self.warming.get_or_insert_with(WarmingNote::default);
        note.model = model.clone();
        note.source = source.clone();
        note.bytes_done = *bytes_done;
        note.size_bytes = *size_bytes;
        let due = first
            || bytes_done >= size_bytes
            || now.saturating_sub(note.recorded_at_ms) >= PROGRESS_EVERY_MS;
        if due {
            note.recorded_at_ms = now;
        }
        due
    }

    /// Arms the warming timeout of this attempt (on entering the stage, and
    /// when rebuilt in it).
    pub(crate) fn arm_warming_timeout(&mut self, ctx: &mut Context<Self>) {
        let attempt = self.rec.attempts;
        let after = Duration::from_millis(self.sh.config.models.warming_timeout_ms);
        ctx.run_later(after, move |act, ctx| {
            let n = act.warming.clone().unwrap_or_default();
            let model = act.rec.spec.model.clone().unwrap_or_default();
            let model = if n.model.is_empty() { model } else { n.model };
            let reading = lifecycle::reading(&model, &n.source, n.bytes_done, n.size_bytes);
            let input = Input::WarmingTimeout {
                attempt,
                after_secs: after.as_secs(),
                reading: &reading,
            };
            act.react(ctx, input, None);
        });
    }
}
