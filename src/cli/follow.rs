//! `caldera logs -f ID`: follows a task's log while it runs. It reads the
//! log from where the last read ended (`?from_byte=`, answered with
//! `end_byte`), every half second, until the task has ended; then it prints
//! the rest and stops. A run on another node (the task was requeued) has its
//! own log file there: reading starts again at its beginning. While the
//! task's image is being pulled, each new pull progress is printed to
//! stderr (stdout is the workload's own output).
use super::client::{encode, read_view, ApiClient};
use super::CliError;
use caldera_spec::codes;
use caldera_spec::container::PullProgress;
use caldera_spec::views::{LogChunk, TaskView};
use std::io::Write;
use std::time::Duration;

/// How long between two reads of a log that had nothing new.
const POLL: Duration = Duration::from_millis(500);
/// Most bytes one read asks for (the agent's cap per answer).
const CHUNK: u64 = 1024 * 1024;
/// States after which nothing more is written.
const ENDED: [&str; 4] = ["finished", "failed", "cancelled", "released"];

/// Follows task `id`'s log until the task ends.
pub async fn follow(client: &ApiClient, id: &str, tenant: Option<String>) -> Result<(), CliError> {
    let tenant = tenant.unwrap_or_default();
    let task_path = format!("/v1/tasks/{}", encode(id));
    let log_path = format!("{task_path}/logs");
    let mut from = 0u64;
    let mut node = String::new();
    let mut last_pull = None;
    loop {
        // The state is read before the log: once it says ended, the read
        // that follows has everything the workload wrote.
        let task: TaskView = read_view(
            &client
                .get(&task_path, &[("tenant", tenant.clone())])
                .await?,
        )?;
        let ended = ENDED.contains(&task.state.as_str());
        if let Some(line) = pull_news(&task, &mut last_pull) {
            eprintln!("{line}");
        }
        let Some(here) = task.allocation.as_ref().map(|a| a.node.as_str()) else {
            if ended {
                return Ok(()); // never ran
            }
            tokio::time::sleep(POLL).await;
            continue;
        };
        if here != node {
            node = here.to_string();
            from = 0;
        }
        let query = [
            ("from_byte", from.to_string()),
            ("tail_bytes", CHUNK.to_string()),
            ("tenant", tenant.clone()),
        ];
        let chunk: LogChunk = match client.get(&log_path, &query).await {
            Ok(chunk) => read_view(&chunk)?,
            // The node is reconnecting: try again, unless nothing more comes.
            Err(e) if !ended && e.to_string().contains(&codes::UNAVAILABLE.code.to_string()) => {
                tokio::time::sleep(POLL).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        if chunk.reservation == Some(true) {
            eprintln!(
                "{}",
                chunk.note.as_deref().unwrap_or("a reservation has no log")
            );
            return Ok(());
        }
        let Some(end) = chunk.end_byte else {
            return Err(CliError::Failed(format!(
                "node {node} answered without an offset: its agent is too old to follow a log; use `caldera logs {id}`"
            )));
        };
        print!("{}", chunk.content);
        let _ = std::io::stdout().flush();
        let full = end.saturating_sub(from) >= CHUNK;
        from = end;
        if full {
            continue; // more is waiting: read on at once
        }
        if ended {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The task's pull progress when it moved since `last` (which it updates).
fn pull_news(task: &TaskView, last: &mut Option<PullProgress>) -> Option<String> {
    let pull = task.pull.as_ref()?;
    if last.as_ref() == Some(pull) {
        return None;
    }
    *last = Some(pull.clone());
    Some(pull.describe())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tasks::tests::task_view;
    use serde_json::json;

    #[test]
    fn pull_progress_is_printed_once_per_change() {
        let mut last = None;
        let pull = |layers: u32| {
            task_view(
                json!({"state": "preparing", "pull": {"image": "registry.internal/x:1",
                "layers_done": layers, "layers_total": 2, "bytes_done": 5_000_000}}),
            )
        };
        assert_eq!(
            pull_news(&task_view(json!({"state": "scheduled"})), &mut last),
            None
        );
        assert_eq!(
            pull_news(&pull(1), &mut last).as_deref(),
            Some("pulling registry.internal/x:1: 1 of 2 layers, 5 MB done")
        );
        assert_eq!(pull_news(&pull(1), &mut last), None);
        assert!(pull_news(&pull(2), &mut last).is_some());
    }
}
