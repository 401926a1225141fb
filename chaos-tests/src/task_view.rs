//! Reading a task through the API the way every end-to-end test does: its
//! view, waiting for a condition on it, and the states of its history.
use std::time::Duration;

use serde_json::Value;

use crate::http::Api;
use crate::process::wait_until;

impl Api {
    /// `GET /v1/tasks/{id}`'s data (Null when the task is not visible).
    pub fn task(&self, id: &str) -> Value {
        self.get(&format!("/v1/tasks/{id}")).data().clone()
    }

    /// Polls task `id` until `until` holds, for at most `secs` seconds, and
    /// returns the view that satisfied it; panics naming `what` and the last
    /// view otherwise.
    pub fn wait_task(
        &self,
        id: &str,
        secs: u64,
        what: &str,
        until: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut v = Value::Null;
        let ok = wait_until(Duration::from_secs(secs), || {
            v = self.task(id);
            until(&v)
        });
        assert!(ok, "{id}: {what} not reached; last view: {v:#}");
        v
    }
}

/// The states of a task view's history, oldest first ("" where one has none).
pub fn history_states(view: &Value) -> Vec<&str> {
    view["history"]
        .as_array()
        .map(|h| {
            h.iter()
                .map(|e| e["state"].as_str().unwrap_or(""))
                .collect()
        })
        .unwrap_or_default()
}
