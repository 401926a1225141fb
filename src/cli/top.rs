//! `caldera top`: the pool at a glance, redrawn every second until Ctrl-C —
//! capacity and use, the nodes with their GPUs, and the head of the queue
//! (what `squeue` and `nvidia-smi` users keep open in a terminal).
use super::client::{block_on, read_view, ApiClient, ClientOpts};
use super::nodes::{render_node_list, render_utilization};
use super::tasks::render_task_list;
use super::{display, CliError};
use caldera_spec::views::{NodeList, TaskPage, Utilization};
use std::time::Duration;

/// Queued tasks shown at most.
const QUEUE_ROWS: usize = 15;
/// Queued tasks read per frame (one page), to find those first in line.
const QUEUE_READ: u32 = 1000;

/// `caldera top [--once] [--interval-ms N]`
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Print one frame and exit (for scripts and logs).
    #[arg(long)]
    pub once: bool,
    /// Time between frames.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
    pub interval_ms: u64,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// One frame: utilization, nodes, the queue.
async fn frame(client: &ApiClient) -> Result<String, CliError> {
    let util = read_view(&client.get("/v1/utilization", &[]).await?)?;
    let nodes = read_view(&client.get("/v1/nodes", &[]).await?)?;
    let query = [
        ("state", "queued".to_string()),
        ("limit", QUEUE_READ.to_string()),
    ];
    let queue = read_view(&client.get("/v1/tasks", &query).await?)?;
    Ok(render_frame(&util, &nodes, &queue, display::now_ms()))
}

/// The text of a frame, in the three parts' own tables; the queue in line
/// order (its `queue_position`), the first [`QUEUE_ROWS`].
pub fn render_frame(util: &Utilization, nodes: &NodeList, queue: &TaskPage, now_ms: f64) -> String {
    let mut line = queue.tasks.clone();
    line.sort_by_key(|t| t.queue_position.unwrap_or(u32::MAX));
    let waiting = line.len();
    line.truncate(QUEUE_ROWS);
    let more = match queue.next_cursor {
        Some(_) => "+",
        None => "",
    };
    let line = TaskPage {
        tasks: line,
        next_cursor: None,
    };
    format!(
        "{}\nnodes:\n{}\nqueue ({waiting}{more} waiting, first in line):\n{}",
        render_utilization(util),
        render_node_list(nodes),
        render_task_list(&line, now_ms)
    )
}

/// Draws frames until interrupted; an unreachable server is shown in the
/// frame (and the view goes on), except with `--once`, where it fails.
pub fn run(args: TopArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    if args.once {
        print!("{}", block_on(frame(&client))?);
        return Ok(());
    }
    let interval = Duration::from_millis(args.interval_ms);
    block_on(async {
        loop {
            let text = match frame(&client).await {
                Ok(t) => t,
                Err(e) => format!("error: {e}\n"),
            };
            // Clear the screen and go home, then the frame.
            print!("\x1b[2J\x1b[H{text}");
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::nodes::tests::node;
    use crate::cli::tasks::tests::task_view;
    use serde_json::json;

    #[test]
    fn a_frame_holds_the_pool_the_nodes_and_the_queue() {
        let nodes = NodeList {
            nodes: vec![node(json!({"name": "n1"}))],
        };
        let queue = TaskPage {
            tasks: vec![
                task_view(json!({"task_id": "b-second", "queue_position": 2})),
                task_view(json!({"task_id": "a-first", "queue_position": 1})),
            ],
            next_cursor: None,
        };
        let out = render_frame(&Utilization::default(), &nodes, &queue, 0.0);
        assert!(out.starts_with("pool:\n"), "{out}");
        assert!(out.contains("\nnodes:\nNAME"), "{out}");
        assert!(
            out.contains("queue (2 waiting, first in line):\nID"),
            "{out}"
        );
        let first = out.find("\na-first ").unwrap_or(usize::MAX);
        let second = out.find("\nb-second ").unwrap_or(0);
        assert!(first < second, "in line order: {out}");
    }
}
