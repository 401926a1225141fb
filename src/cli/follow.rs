//! `caldera logs -f ID`: follows a task's log while it runs. It reads the
//! log from where the last read ended (`?from_byte=`, answered with
//! `end_byte`), every half second, until the task has ended; then it prints
//! the rest and stops. A run on another node (the task was requeued) has its
//! own log file there: reading starts again at its beginning.
use super::client::{encode, ApiClient};
use super::CliError;
use caldera_spec::codes;
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
    loop {
        // The state is read before the log: once it says ended, the read
        // that follows has everything the workload wrote.
        let task = client
            .get(&task_path, &[("tenant", tenant.clone())])
            .await?;
        let ended = ENDED.contains(&task["state"].as_str().unwrap_or(""));
        let Some(here) = task["allocation"]["node"].as_str() else {
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
        let chunk = match client.get(&log_path, &query).await {
            Ok(chunk) => chunk,
            // The node is reconnecting: try again, unless nothing more comes.
            Err(e) if !ended && e.to_string().contains(&codes::UNAVAILABLE.code.to_string()) => {
                tokio::time::sleep(POLL).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        if chunk["reservation"] == true {
            eprintln!(
                "{}",
                chunk["note"].as_str().unwrap_or("a reservation has no log")
            );
            return Ok(());
        }
        let Some(end) = chunk["end_byte"].as_u64() else {
            return Err(CliError::Failed(format!(
                "node {node} answered without an offset: its agent is too old to follow a log; use `caldera logs {id}`"
            )));
        };
        let content = chunk["content"].as_str().unwrap_or("");
        print!("{content}");
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
