//! Task commands: `submit`, `status`, `tasks`, `release`, `logs` (`-f`: `follow.rs`).
use super::client::{block_on, encode, print_json, ApiClient, ClientOpts, Verb};
use super::fields::{self, get, items, number, text, MISSING};
use super::table::{key_values, Table};
use super::CliError;
use serde_json::Value;
use std::io::Read;

/// `caldera submit FILE|-`
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// Task spec as JSON (the seed's format plus `command`, `env`, `labels`); `-` reads stdin.
    pub file: String,
    /// The task's tenant (`?tenant=`): task ids are each tenant's own, so
    /// the operator token names the tenant; a tenant token may leave it out.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Create nothing: show where the task would go now, or why not and
    /// when it should start (`?dry_run=true`).
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera status ID`
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Task id.
    pub id: String,
    /// The task's tenant (`?tenant=`): task ids are each tenant's own, so
    /// the operator token names the tenant; a tenant token may leave it out.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera tasks [--state S] [--type T] [--tenant T] [--limit N] [--cursor C] [--all]`
#[derive(clap::Args, Debug)]
pub struct TasksArgs {
    /// Only tasks in this state (queued, running, finished, ...).
    #[arg(long)]
    pub state: Option<String>,
    /// Only tasks of this type (training, inference).
    #[arg(long = "type", value_name = "TYPE")]
    pub task_type: Option<String>,
    /// The operator: only this tenant's tasks (`?tenant=`).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Tasks per page (server default 100, at most 1000).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Continue after the `next cursor` printed by the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Follow every page to the last and show them as one list.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera release ID`
#[derive(clap::Args, Debug)]
pub struct ReleaseArgs {
    /// Task id: its workload is stopped and everything it holds is freed.
    pub id: String,
    /// The task's tenant (`?tenant=`): task ids are each tenant's own, so
    /// the operator token names the tenant; a tenant token may leave it out.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// `caldera logs ID [--tail BYTES] [-f]`
#[derive(clap::Args, Debug)]
pub struct LogsArgs {
    /// Task id.
    pub id: String,
    /// Only the last BYTES bytes of the log.
    #[arg(long, value_name = "BYTES", conflicts_with = "follow")]
    pub tail: Option<u64>,
    /// Follow the log while the task runs; stop once it has ended.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The task's tenant (`?tenant=`): task ids are each tenant's own, so
    /// the operator token names the tenant; a tenant token may leave it out.
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub opts: ClientOpts,
}

/// Sends a task spec. The body goes to the server as read, so the server's
/// validation names the offending field in the user's own document.
pub fn submit(args: SubmitArgs) -> Result<(), CliError> {
    let body = read_spec(&args.file)?;
    let client = ApiClient::from_opts(&args.opts)?;
    let dry_run = if args.dry_run { "true" } else { "" };
    let query = [
        ("tenant", args.tenant.unwrap_or_default()),
        ("dry_run", dry_run.to_string()),
    ];
    let answer = block_on(client.call(Verb::Post, "/v1/tasks", &query, Some(body)))?;
    if args.opts.json {
        return print_json(&answer.data);
    }
    if args.dry_run {
        print!("{}", render_dry_run(&answer.data, fields::now_ms()));
        return Ok(());
    }
    let id = text(&answer.data, "task_id");
    let state = text(&answer.data, "state");
    if answer.status == 200 {
        println!("task {id} already exists with the same spec: {state}");
    } else {
        println!("task {id} submitted: {state}");
    }
    if let Some(reason) = get(&answer.data, "pending_reason") {
        println!("pending: {}", fields::show(reason));
    }
    let warnings = get(&answer.data, "warnings").and_then(|w| w.as_array());
    for w in warnings.into_iter().flatten() {
        eprintln!("warning: {}", fields::show(w));
    }
    Ok(())
}

/// A dry run's answer: where it would start, or why it would wait and when
/// it should start.
fn render_dry_run(d: &Value, now_ms: f64) -> String {
    let admission = text(d, "admission");
    if get(d, "placeable").and_then(Value::as_bool) == Some(true) {
        let gpus: Vec<String> = items(d, "gpu_indices").iter().map(fields::show).collect();
        return format!(
            "would start now on {} (GPUs [{}]; admission: {admission})\n",
            text(d, "node"),
            gpus.join(", ")
        );
    }
    let victims = items(d, "preempts");
    if !victims.is_empty() {
        let mut out = format!(
            "WARNING: submitting this preempts {} running task(s) on {}:\n",
            victims.len(),
            text(d, "node")
        );
        for v in victims {
            out += &format!(
                "  {} ({} GPU(s), priority {}): {}\n",
                text(v, "task"),
                text(v, "gpus"),
                text(v, "priority"),
                text(v, "reason")
            );
        }
        out += &format!(
            "estimated start: {} once they have stopped (admission: {admission})\n",
            starts(d, now_ms)
        );
        return out;
    }
    format!(
        "would wait: {}\nestimated start: {} (admission: {admission})\n",
        text(d, "reason"),
        starts(d, now_ms)
    )
}

fn read_spec(file: &str) -> Result<Vec<u8>, CliError> {
    if file == "-" {
        let mut body = Vec::new();
        std::io::stdin()
            .read_to_end(&mut body)
            .map_err(|e| CliError::Failed(format!("reading the task spec from stdin: {e}")))?;
        return Ok(body);
    }
    std::fs::read(file).map_err(|e| CliError::Usage(format!("cannot read {file}: {e}")))
}

/// Shows one task in full.
pub fn status(args: StatusArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let query = [("tenant", args.tenant.unwrap_or_default())];
    let task = block_on(client.get(&format!("/v1/tasks/{}", encode(&args.id)), &query))?;
    if args.opts.json {
        return print_json(&task);
    }
    print!("{}", render_status(&task));
    Ok(())
}

/// Lists tasks: one page, or with `--all` every page, following
/// `next_cursor` until the server says there is no more.
pub fn list(args: TasksArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let mut cursor = args.cursor.clone().unwrap_or_default();
    let mut tasks = Vec::new();
    loop {
        let query = [
            ("state", args.state.clone().unwrap_or_default()),
            ("type", args.task_type.clone().unwrap_or_default()),
            ("tenant", args.tenant.clone().unwrap_or_default()),
            (
                "limit",
                args.limit.map(|n| n.to_string()).unwrap_or_default(),
            ),
            ("cursor", cursor.clone()),
        ];
        let page = block_on(client.get("/v1/tasks", &query))?;
        if !args.all {
            if args.opts.json {
                return print_json(&page);
            }
            print!("{}", render_task_list(&page, fields::now_ms()));
            return Ok(());
        }
        tasks.extend(items(&page, "tasks").iter().cloned());
        match get(&page, "next_cursor").and_then(Value::as_str) {
            Some(next) if next == cursor => {
                return Err(CliError::Failed(format!(
                    "the server answered the cursor {next:?} with itself: stopped after {} tasks",
                    tasks.len()
                )))
            }
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    let all = serde_json::json!({ "tasks": tasks, "next_cursor": null });
    if args.opts.json {
        return print_json(&all);
    }
    print!("{}", render_task_list(&all, fields::now_ms()));
    Ok(())
}

/// Releases a task and shows the state it ended in.
pub fn release(args: ReleaseArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let path = format!("/v1/tasks/{}/release", encode(&args.id));
    let query = [("tenant", args.tenant.unwrap_or_default())];
    let task = block_on(client.call(Verb::Post, &path, &query, None))?.data;
    if args.opts.json {
        return print_json(&task);
    }
    println!("task {}: {}", text(&task, "task_id"), text(&task, "state"));
    Ok(())
}

/// Prints a task's log as it is (it is the workload's own output).
pub fn logs(args: LogsArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    if args.follow {
        return block_on(super::follow::follow(&client, &args.id, args.tenant));
    }
    let path = format!("/v1/tasks/{}/logs", encode(&args.id));
    let query = [
        (
            "tail_bytes",
            args.tail.map(|n| n.to_string()).unwrap_or_default(),
        ),
        ("tenant", args.tenant.unwrap_or_default()),
    ];
    let log = block_on(client.get(&path, &query))?;
    if args.opts.json {
        return print_json(&log);
    }
    print!(
        "{}",
        get(&log, "content").and_then(Value::as_str).unwrap_or("")
    );
    if get(&log, "truncated").and_then(Value::as_bool) == Some(true) {
        eprintln!("(log truncated: only its end is shown)");
    }
    // A reservation's, or an earlier run's of a task waiting to run again.
    if let Some(note) = get(&log, "note").and_then(Value::as_str) {
        eprintln!("({note})");
    }
    Ok(())
}

/// The `tasks` table plus the cursor of the next page, if any.
pub fn render_task_list(page: &Value, now_ms: f64) -> String {
    let mut table = Table::new(&[
        "ID", "TENANT", "TYPE", "PRIORITY", "STATE", "POS", "STARTS", "NODE", "GPUS", "AGE",
    ]);
    for task in items(page, "tasks") {
        table.row(vec![
            text(task, "task_id"),
            text(task, "tenant"),
            text(task, "task_type"),
            text(task, "priority"),
            text(task, "state"),
            text(task, "queue_position"),
            starts(task, now_ms),
            text(task, "allocation.node"),
            gpus_of(task),
            created_ms(task)
                .map(|at| fields::age(now_ms - at))
                .unwrap_or_else(|| MISSING.into()),
        ]);
    }
    let mut out = table.render();
    if let Some(cursor) = get(page, "next_cursor") {
        out.push_str(&format!("next cursor: {}\n", fields::show(cursor)));
    }
    out
}

/// What runs the task: "container registry.internal/x:1", or "process"
/// (with the image it only records, where it names one).
pub fn runtime_line(task: &Value) -> String {
    let runtime = get(task, "runtime")
        .and_then(Value::as_str)
        .unwrap_or("process");
    match get(task, "image").and_then(Value::as_str) {
        Some(image) if runtime == "container" => format!("container {image}"),
        Some(image) => format!("{runtime} (image {image} recorded, not run)"),
        None => runtime.to_string(),
    }
}

/// GPUs of a task: what it holds once allocated ("4xA100-80GB"), else what it
/// asks for ("4xA100", "0.5", "-" without GPUs).
pub fn gpus_of(task: &Value) -> String {
    let held = items(task, "allocation.gpus");
    if !held.is_empty() {
        let mut models: Vec<String> = held.iter().map(|g| text(g, "model")).collect();
        models.dedup();
        return format!("{}x{}", held.len(), models.join("+"));
    }
    let amount =
        get(task, "spec.resources.gpu.count").or_else(|| get(task, "spec.resources.gpu.share"));
    match (amount, get(task, "spec.resources.gpu.model")) {
        (Some(n), Some(model)) => format!("{}x{}", fields::show(n), fields::show(model)),
        (Some(n), None) => fields::show(n),
        _ => MISSING.into(),
    }
}

/// When the task was created, ms since the epoch: the first history entry,
/// or a numeric `created_at`/`created_at_ms`.
/// When a waiting task is expected to start: "in 5m", "due" once the
/// estimate has passed, "-" without one (or once it runs).
fn starts(task: &Value, now_ms: f64) -> String {
    match number(task, "estimated_start_ms") {
        Some(at) if at > now_ms => format!("in {}", fields::age(at - now_ms)),
        Some(_) => "due".into(),
        None => MISSING.into(),
    }
}

fn created_ms(task: &Value) -> Option<f64> {
    number(task, "history.0.at_ms")
        .or_else(|| number(task, "created_at_ms"))
        .or_else(|| number(task, "created_at"))
}

/// The `status` view: summary, history, allocation.
pub fn render_status(task: &Value) -> String {
    let mut summary = vec![
        ("task", text(task, "task_id")),
        ("tenant", text(task, "tenant")),
        ("type", text(task, "task_type")),
        ("priority", text(task, "priority")),
        ("runtime", runtime_line(task)),
        ("state", text(task, "state")),
        ("created", text(task, "created_at")),
        ("attempts", text(task, "attempts")),
        ("exit code", text(task, "exit_code")),
    ];
    if get(task, "pending_reason").is_some() {
        summary.push(("pending", text(task, "pending_reason")));
    }
    if get(task, "estimated_start").is_some() {
        summary.push(("est. start", text(task, "estimated_start")));
    }
    if get(task, "replicas").is_some() {
        summary.push(("replicas", text(task, "replicas")));
    }
    if get(task, "service").is_some() {
        summary.push(("service", text(task, "service")));
    }
    if task
        .get("preemptions")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 0)
    {
        summary.push(("preemptions", text(task, "preemptions")));
    }
    if get(task, "checkpoint").is_some() {
        summary.push(("checkpoint", text(task, "checkpoint")));
    }
    if let Some(pull) = get(task, "pull") {
        summary.push(("image pull", pull_line(pull)));
    }
    if get(task, "failure").is_some() {
        summary.push(("failure", failure_line(task)));
    }
    let mut out = key_values(&summary);

    out.push_str("\nhistory:\n");
    let mut history = Table::new(&["STATE", "AT", "REASON"]);
    for step in items(task, "history") {
        history.row(vec![
            text(step, "state"),
            text(step, "at"),
            text(step, "reason"),
        ]);
    }
    out.push_str(&indent(&history.render()));

    out.push('\n');
    out.push_str(&render_allocation(task));
    out.push_str(&super::swap::render_swap(task));
    out
}

/// A pull's progress as the task's Preparing events say it: "pulling
/// registry.internal/x:1: 2 of 5 layers, 40 MB done".
pub fn pull_line(pull: &Value) -> String {
    match serde_json::from_value::<caldera_spec::container::PullProgress>(pull.clone()) {
        Ok(p) => p.describe(),
        Err(_) => fields::show(pull),
    }
}

/// The failure's sentence, with its code's number and name where it has one:
/// "image ... not found ... [10220 image_not_found]".
fn failure_line(task: &Value) -> String {
    let why = text(task, "failure");
    let Some(code) = number(task, "failure_code") else {
        return why;
    };
    match caldera_spec::codes::ALL
        .iter()
        .find(|c| f64::from(c.code) == code)
    {
        Some(c) => format!("{why} [{} {}]", c.code, c.name),
        None => format!("{why} [{code}]"),
    }
}

fn render_allocation(task: &Value) -> String {
    let Some(alloc) = get(task, "allocation") else {
        return "allocation: none\n".into();
    };
    let borrowed = if alloc.get("borrowed").and_then(Value::as_bool) == Some(true) {
        ", borrowed: preemptible"
    } else {
        ""
    };
    let mut out = format!(
        "allocation: {} on {} (epoch {}{borrowed})\n",
        text(alloc, "allocation_id"),
        text(alloc, "node"),
        text(alloc, "epoch")
    );
    out.push_str(&format!(
        "  cpu {} cores, memory {}, disk {}\n",
        number(alloc, "cpu_milli")
            .map(fields::cores_from_milli)
            .unwrap_or_else(|| MISSING.into()),
        fields::size_mb_at(alloc, "memory_mb"),
        fields::size_mb_at(alloc, "disk_mb"),
    ));
    if let Some(digest) = get(alloc, "image_digest").and_then(Value::as_str) {
        out.push_str(&format!("  image {digest}\n"));
    }
    let gpus = items(alloc, "gpus");
    if !gpus.is_empty() {
        let mut table = Table::new(&["GPU", "UUID", "MODEL", "MEMORY"]);
        for gpu in gpus {
            table.row(vec![
                text(gpu, "index"),
                text(gpu, "uuid"),
                model_label(gpu),
                fields::size_mb_at(gpu, "memory_mb"),
            ]);
        }
        out.push_str(&indent(&table.render()));
    }
    out
}

/// A GPU's model, marked when the GPU is simulated so nobody mistakes a
/// demo pool for hardware.
pub fn model_label(gpu: &Value) -> String {
    let model = text(gpu, "model");
    if get(gpu, "simulated").and_then(Value::as_bool) == Some(true) {
        format!("{model} (simulated)")
    } else {
        model
    }
}

fn indent(block: &str) -> String {
    block.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn running_task() -> Value {
        json!({
            "task_id": "train_20240716_001", "tenant": "demo", "task_type": "training",
            "priority": "high", "state": "running", "attempts": 1,
            "created_at": "2026-11-29T10:00:00Z",
            "history": [
                {"state": "queued", "at": "2026-11-29T10:00:00Z", "at_ms": 1_000_000},
                {"state": "running", "at": "2026-11-29T10:00:01Z", "at_ms": 1_001_000, "reason": "started"}
            ],
            "allocation": {
                "allocation_id": "a-7", "node": "node-1", "epoch": 3, "cpu_milli": 32000,
                "memory_mb": 262144, "disk_mb": 204800,
                "gpus": [
                    {"index": 0, "uuid": "GPU-0", "model": "A100-80GB", "memory_mb": 81920, "simulated": true},
                    {"index": 1, "uuid": "GPU-1", "model": "A100-80GB", "memory_mb": 81920, "simulated": true}
                ]
            },
            "spec": {"resources": {"gpu": {"count": 2, "model": "A100"}}}
        })
    }

    #[test]
    fn the_task_list_shows_one_aligned_row_per_task_and_the_next_cursor() {
        let page = json!({
            "tasks": [running_task(), {"task_id": "q1", "state": "queued",
                "queue_position": 1, "estimated_start_ms": 1_420_000,
                "history": [{"state": "queued", "at_ms": 1_060_000}],
                "spec": {"resources": {"gpu": {"share": 0.5}}}}],
            "next_cursor": "c2"
        });
        assert_eq!(
            render_task_list(&page, 1_120_000.0),
            "ID                  TENANT  TYPE      PRIORITY  STATE    POS  STARTS  NODE    GPUS         AGE\n\
             train_20240716_001  demo    training  high      running  -    -       node-1  2xA100-80GB  2m\n\
             q1                  -       -         -         queued   1    in 5m   -       0.5          1m\n\
             next cursor: c2\n"
        );
    }

    #[test]
    fn a_dry_run_shows_where_it_would_start_or_why_it_would_wait() {
        let fits = json!({"placeable": true, "node": "node-a", "gpu_indices": [0, 3],
            "reason": null, "estimated_start_ms": 1_000, "admission": "guaranteed"});
        assert_eq!(
            render_dry_run(&fits, 1_000.0),
            "would start now on node-a (GPUs [0, 3]; admission: guaranteed)\n"
        );
        let waits = json!({"placeable": false, "node": null, "gpu_indices": [],
            "reason": "1 node: 2 fewer than 2 idle GPUs", "estimated_start_ms": 301_000,
            "admission": "borrowing"});
        // 301 s - 1 s = 300 s from now: "in 5m".
        assert_eq!(
            render_dry_run(&waits, 1_000.0),
            "would wait: 1 node: 2 fewer than 2 idle GPUs\nestimated start: in 5m (admission: borrowing)\n"
        );
        let preempts = json!({"placeable": false, "node": "node-a", "gpu_indices": [],
            "reason": "would preempt 1 running task(s) on node-a to make room, then start once they have stopped",
            "estimated_start_ms": 11_000, "admission": "guaranteed",
            "preempts": [{"task": "another tenant's task", "gpus": 6, "priority": "medium",
                "reason": "priority 900 outranks 500"}]});
        assert_eq!(
            render_dry_run(&preempts, 1_000.0),
            "WARNING: submitting this preempts 1 running task(s) on node-a:\n  another tenant's task (6 GPU(s), priority medium): priority 900 outranks 500\nestimated start: in 10s once they have stopped (admission: guaranteed)\n"
        );
    }

    #[test]
    fn an_empty_list_is_the_header_alone() {
        let text = render_task_list(&json!({"tasks": [], "next_cursor": null}), 0.0);
        assert_eq!(
            text,
            "ID  TENANT  TYPE  PRIORITY  STATE  POS  STARTS  NODE  GPUS  AGE\n"
        );
    }

    #[test]
    fn status_shows_history_and_the_allocation_with_simulated_gpus_marked() {
        let out = render_status(&running_task());
        assert!(out.starts_with("task:       train_20240716_001\n"), "{out}");
        assert!(out.contains("state:      running\n"), "{out}");
        assert!(out.contains("exit code:  -\n"), "{out}");
        assert!(
            out.contains("  running  2026-11-29T10:00:01Z  started\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "allocation: a-7 on node-1 (epoch 3)\n  cpu 32 cores, memory 256G, disk 200G\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("  0    GPU-0  A100-80GB (simulated)  80G\n"),
            "{out}"
        );
    }

    #[test]
    fn status_shows_the_pull_the_failure_code_and_the_digest_run() {
        let task = json!({"task_id": "t", "state": "failed",
            "failure": "image registry.internal/nope:1 not found in its registry",
            "failure_code": 10220,
            "pull": {"image": "registry.internal/nope:1", "layers_done": 0,
                     "layers_total": 0, "bytes_done": 0},
            "allocation": {"allocation_id": "a-1", "node": "n1", "epoch": 1, "gpus": [],
                           "image_digest": "sha256:abc"}});
        let out = render_status(&task);
        assert!(
            out.contains("image registry.internal/nope:1 not found in its registry [10220 image_not_found]\n"),
            "{out}"
        );
        assert!(
            out.contains("pulling registry.internal/nope:1: no layer started yet"),
            "{out}"
        );
        assert!(out.contains("  image sha256:abc\n"), "{out}");
    }

    #[test]
    fn a_queued_task_shows_why_it_waits_and_no_allocation() {
        let task = json!({"task_id": "t", "state": "queued", "allocation": null,
            "pending_reason": "2 nodes: 2 no single GPU with 20 GB free"});
        let out = render_status(&task);
        assert!(
            out.contains("pending:    2 nodes: 2 no single GPU with 20 GB free\n"),
            "{out}"
        );
        assert!(out.ends_with("allocation: none\n"), "{out}");
    }

    #[test]
    fn status_says_what_runs_the_task() {
        let shown = |t: Value| {
            render_status(&t)
                .lines()
                .find(|l| l.starts_with("runtime:"))
                .map(|l| l["runtime:".len()..].trim().to_string())
        };
        let image = "registry.internal/deeplearning/pytorch:2.1-cu12.1";
        assert_eq!(
            shown(json!({"task_id": "t", "runtime": "container", "image": image})).as_deref(),
            Some("container registry.internal/deeplearning/pytorch:2.1-cu12.1")
        );
        assert_eq!(
            shown(json!({"task_id": "t", "runtime": "process", "image": image})).as_deref(),
            Some("process (image registry.internal/deeplearning/pytorch:2.1-cu12.1 recorded, not run)")
        );
        assert_eq!(
            shown(json!({"task_id": "t", "runtime": "process"})).as_deref(),
            Some("process")
        );
    }
}
