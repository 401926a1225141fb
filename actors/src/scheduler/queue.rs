//! The queue of tasks waiting for room: ordered by priority, then submission.
use crate::placement::Demand;
use caldera_spec::{Priority, TaskSpec, Usage};
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

/// Order key: higher priority first, then earlier submission.
pub type QueueKey = (Reverse<Priority>, u64);

/// A task waiting to be placed.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub task_id: String,
    pub tenant: String,
    pub spec: TaskSpec,
    pub demand: Demand,
    pub usage: Usage,
    /// Attempt number the next allocation will carry.
    pub attempt: u32,
    /// Last reason told to the task, so it is told only on change.
    pub told_reason: Option<String>,
    /// The demand's identity: tasks of one shape that found no room in a pass
    /// are not tried again in that pass.
    pub shape: String,
}

#[derive(Default)]
pub struct Queue {
    order: BTreeMap<QueueKey, Waiting>,
    keys: HashMap<String, QueueKey>,
}

impl Queue {
    /// Adds (or replaces) a waiting task.
    pub fn push(&mut self, seq: u64, w: Waiting) -> QueueKey {
        self.remove(&w.task_id);
        let key = (Reverse(w.spec.priority), seq);
        self.keys.insert(w.task_id.clone(), key);
        self.order.insert(key, w);
        key
    }

    pub fn remove(&mut self, task_id: &str) -> Option<Waiting> {
        let key = self.keys.remove(task_id)?;
        self.order.remove(&key)
    }

    pub fn keys(&self) -> Vec<QueueKey> {
        self.order.keys().copied().collect()
    }

    pub fn get_mut(&mut self, key: &QueueKey) -> Option<&mut Waiting> {
        self.order.get_mut(key)
    }

    pub fn take(&mut self, key: &QueueKey) -> Option<Waiting> {
        let w = self.order.remove(key)?;
        self.keys.remove(&w.task_id);
        Some(w)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}
