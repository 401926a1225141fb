//! Task commands: `submit`, `status`, `tasks`, `release`, `logs` (`-f`: `follow.rs`).
use super::client::{block_on, encode, print_json, read_view, ApiClient, ClientOpts, Verb};
use super::display::{self, or_missing, MISSING};
use super::table::{key_values, Table};
use super::CliError;
use caldera_spec::container::PullProgress;
use caldera_spec::views::{DryRun, LogChunk, TaskPage, TaskView};
use caldera_spec::{Allocation, GpuGrant};
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
        let dry_run: DryRun = read_view(&answer.data)?;
        print!("{}", render_dry_run(&dry_run, display::now_ms()));
        return Ok(());
    }
    let task: TaskView = read_view(&answer.data)?;
    let (id, state) = (&task.task_id, &task.state);
    if answer.status == 200 {
        println!("task {id} already exists with the same spec: {state}");
    } else {
        println!("task {id} submitted: {state}");
    }
    if let Some(reason) = &task.pending_reason {
        println!("pending: {reason}");
    }
    for w in &task.warnings {
        eprintln!("warning: {w}");
    }
    Ok(())
}

/// A dry run's answer: where it would start, or why it would wait and when
/// it should start.
fn render_dry_run(d: &DryRun, now_ms: f64) -> String {
    let admission = admission_label(d.admission);
    let node = or_missing(d.node.as_deref());
    if d.placeable {
        let gpus: Vec<String> = d.gpu_indices.iter().map(u32::to_string).collect();
        return format!(
            "would start now on {node} (GPUs [{}]; admission: {admission})\n",
            gpus.join(", ")
        );
    }
    let starts = starts(d.estimated_start_ms, now_ms);
    if !d.preempts.is_empty() {
        let mut out = format!(
            "WARNING: submitting this preempts {} running task(s) on {node}:\n",
            d.preempts.len(),
        );
        for v in &d.preempts {
            out += &format!(
                "  {} ({} GPU(s), priority {}): {}\n",
                v.task, v.gpus, v.priority, v.reason
            );
        }
        out +=
            &format!("estimated start: {starts} once they have stopped (admission: {admission})\n");
        return out;
    }
    format!(
        "would wait: {}\nestimated start: {starts} (admission: {admission})\n",
        or_missing(d.reason.as_deref()),
    )
}

/// The tenant's standing as the API writes it (`over_quota`).
fn admission_label(a: caldera_spec::views::Admission) -> &'static str {
    use caldera_spec::views::Admission;
    match a {
        Admission::Guaranteed => "guaranteed",
        Admission::Borrowing => "borrowing",
        Admission::OverQuota => "over_quota",
    }
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
    print!("{}", render_status(&read_view(&task)?));
    Ok(())
}

/// Lists tasks: one page, or with `--all` every page, following
/// `next_cursor` until the server says there is no more.
pub fn list(args: TasksArgs) -> Result<(), CliError> {
    let client = ApiClient::from_opts(&args.opts)?;
    let mut cursor = args.cursor.clone().unwrap_or_default();
    let mut tasks = Vec::new();
    let mut raw_json = Vec::new();
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
        let raw = block_on(client.get("/v1/tasks", &query))?;
        if !args.all && args.opts.json {
            return print_json(&raw);
        }
        let page: TaskPage = read_view(&raw)?;
        if !args.all {
            print!("{}", render_task_list(&page, display::now_ms()));
            return Ok(());
        }
        // `--json --all` prints the tasks as the server sent them, fields
        // this caldera does not know included.
        let raw_tasks = raw.get("tasks").and_then(|t| t.as_array()).cloned();
        if args.opts.json {
            raw_json.extend(raw_tasks.into_iter().flatten());
        } else {
            tasks.extend(page.tasks);
        }
        match page.next_cursor {
            Some(next) if next == cursor => {
                return Err(CliError::Failed(format!(
                    "the server answered the cursor {next:?} with itself: stopped after {} tasks",
                    tasks.len() + raw_json.len()
                )))
            }
            Some(next) => cursor = next,
            None => break,
        }
    }
    if args.opts.json {
        return print_json(&serde_json::json!({ "tasks": raw_json, "next_cursor": null }));
    }
    let all = TaskPage {
        tasks,
        next_cursor: None,
    };
    print!("{}", render_task_list(&all, display::now_ms()));
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
    let task: TaskView = read_view(&task)?;
    println!("task {}: {}", task.task_id, task.state);
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
    let log: LogChunk = read_view(&log)?;
    print!("{}", log.content);
    if log.truncated {
        eprintln!("(log truncated: only its end is shown)");
    }
    // A reservation's, or an earlier run's of a task waiting to run again.
    if let Some(note) = &log.note {
        eprintln!("({note})");
    }
    Ok(())
}

/// The `tasks` table plus the cursor of the next page, if any.
pub fn render_task_list(page: &TaskPage, now_ms: f64) -> String {
    let mut table = Table::new(&[
        "ID", "TENANT", "TYPE", "PRIORITY", "STATE", "POS", "STARTS", "NODE", "GPUS", "AGE",
    ]);
    for task in &page.tasks {
        table.row(vec![
            task.task_id.clone(),
            task.tenant.clone(),
            task.task_type.clone(),
            task.priority.clone(),
            task.state.clone(),
            or_missing(task.queue_position),
            starts(task.estimated_start_ms, now_ms),
            or_missing(task.allocation.as_ref().map(|a| &a.node)),
            gpus_of(task),
            task.history
                .first()
                .map(|t| display::age(now_ms - t.at_ms as f64))
                .unwrap_or_else(|| MISSING.into()),
        ]);
    }
    let mut out = table.render();
    if let Some(cursor) = &page.next_cursor {
        out.push_str(&format!("next cursor: {cursor}\n"));
    }
    out
}

/// What runs the task: "container registry.internal/x:1", or "process"
/// (with the image it only records, where it names one).
pub fn runtime_line(task: &TaskView) -> String {
    let runtime = &task.runtime;
    match &task.image {
        Some(image) if runtime == "container" => format!("container {image}"),
        Some(image) => format!("{runtime} (image {image} recorded, not run)"),
        None => runtime.to_string(),
    }
}

/// GPUs of a task: what it holds once allocated ("4xA100-80GB"), else what it
/// asks for ("4xA100", "0.5" for a share, "-" without GPUs).
pub fn gpus_of(task: &TaskView) -> String {
    let held = task.allocation.as_ref().map_or(&[][..], |a| &a.gpus[..]);
    if !held.is_empty() {
        let mut models: Vec<&str> = held.iter().map(|g| g.model.as_str()).collect();
        models.dedup();
        return format!("{}x{}", held.len(), models.join("+"));
    }
    let Some(gpu) = &task.spec.resources.gpu else {
        return MISSING.into();
    };
    let amount = match gpu.share {
        Some(share) => share.to_string(),
        None => gpu.count.to_string(),
    };
    match &gpu.model {
        Some(model) => format!("{amount}x{model}"),
        None => amount,
    }
}

/// When a waiting task is expected to start: "in 5m", "due" once the
/// estimate has passed, "-" without one (or once it runs).
fn starts(estimated_start_ms: Option<u64>, now_ms: f64) -> String {
    match estimated_start_ms.map(|at| at as f64) {
        Some(at) if at > now_ms => format!("in {}", display::age(at - now_ms)),
        Some(_) => "due".into(),
        None => MISSING.into(),
    }
}

/// The `status` view: summary, history, allocation.
pub fn render_status(task: &TaskView) -> String {
    let mut summary = vec![
        ("task", task.task_id.clone()),
        ("tenant", task.tenant.clone()),
        ("type", task.task_type.clone()),
        ("priority", task.priority.clone()),
        ("runtime", runtime_line(task)),
        ("state", task.state.clone()),
        ("created", task.created_at.clone()),
        ("attempts", task.attempts.to_string()),
        ("exit code", or_missing(task.exit_code)),
    ];
    let optional = [
        ("pending", task.pending_reason.clone()),
        ("est. start", task.estimated_start.clone()),
        ("replicas", task.replicas.map(|n| n.to_string())),
        ("service", task.service.clone()),
        (
            "preemptions",
            (task.preemptions > 0).then(|| task.preemptions.to_string()),
        ),
        ("checkpoint", task.checkpoint.clone()),
        ("image pull", task.pull.as_ref().map(pull_line)),
        ("failure", task.failure.as_ref().map(|_| failure_line(task))),
    ];
    summary.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
    let mut out = key_values(&summary);

    out.push_str("\nhistory:\n");
    let mut history = Table::new(&["STATE", "AT", "REASON"]);
    for step in &task.history {
        history.row(vec![
            step.state.clone(),
            step.at.clone(),
            or_missing(step.reason.as_deref()),
        ]);
    }
    out.push_str(&indent(&history.render()));

    out.push('\n');
    out.push_str(&render_allocation(task.allocation.as_ref()));
    out.push_str(&super::swap::render_swap(task.swap.as_ref()));
    out
}

/// A pull's progress as the task's Preparing events say it: "pulling
/// registry.internal/x:1: 2 of 5 layers, 40 MB done".
pub fn pull_line(pull: &PullProgress) -> String {
    pull.describe()
}

/// The failure's sentence, with its code's number and name where it has one:
/// "image ... not found ... [10220 image_not_found]".
fn failure_line(task: &TaskView) -> String {
    let why = or_missing(task.failure.as_deref());
    let Some(code) = task.failure_code else {
        return why;
    };
    match caldera_spec::codes::ALL.iter().find(|c| c.code == code) {
        Some(c) => format!("{why} [{} {}]", c.code, c.name),
        None => format!("{why} [{code}]"),
    }
}

fn render_allocation(alloc: Option<&Allocation>) -> String {
    let Some(alloc) = alloc else {
        return "allocation: none\n".into();
    };
    let borrowed = if alloc.borrowed {
        ", borrowed: preemptible"
    } else {
        ""
    };
    let mut out = format!(
        "allocation: {} on {} (epoch {}{borrowed})\n",
        alloc.allocation_id, alloc.node, alloc.epoch
    );
    out.push_str(&format!(
        "  cpu {} cores, memory {}, disk {}\n",
        display::cores_from_milli(alloc.cpu_milli as f64),
        display::size_mb(alloc.memory_mb as f64),
        display::size_mb(alloc.disk_mb as f64),
    ));
    if let Some(digest) = &alloc.image_digest {
        out.push_str(&format!("  image {digest}\n"));
    }
    if !alloc.gpus.is_empty() {
        let mut table = Table::new(&["GPU", "UUID", "MODEL", "MEMORY"]);
        for gpu in &alloc.gpus {
            table.row(vec![
                gpu.index.to_string(),
                gpu.uuid.clone(),
                model_label(gpu),
                display::size_mb(gpu.memory_mb as f64),
            ]);
        }
        out.push_str(&indent(&table.render()));
    }
    out
}

/// A GPU's model, marked when the GPU is simulated so nobody mistakes a
/// demo pool for hardware.
pub fn model_label(gpu: &GpuGrant) -> String {
    if gpu.simulated {
        format!("{} (simulated)", gpu.model)
    } else {
        gpu.model.clone()
    }
}

fn indent(block: &str) -> String {
    block.lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// `over` written onto `base`, objects key by key.
    fn merge(base: &mut Value, over: &Value) {
        match (base, over) {
            (Value::Object(b), Value::Object(o)) => {
                for (k, v) in o {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
            (b, o) => *b = o.clone(),
        }
    }

    /// A task view as the server writes one: `fields` over a queued
    /// training task's required fields.
    pub(crate) fn task_view(fields: Value) -> TaskView {
        let mut v = json!({
            "task_id": "t", "tenant": "demo", "task_type": "training", "priority": "medium",
            "runtime": "process", "state": "queued", "history": [], "allocation": null,
            "attempts": 0, "retries_used": 0, "preemptions": 0, "ready": false,
            "generation": 0, "created_at": "2026-11-29T10:00:00Z",
            "spec": {"task_id": "t", "task_type": "training",
                     "resources": {"cpu": {"cores": 1}}, "duration": "00:10:00"}
        });
        merge(&mut v, &fields);
        serde_json::from_value(v).expect("a task view")
    }

    /// An allocation as the server writes one: `fields` over one on node-1.
    fn allocation(fields: Value) -> Value {
        let mut v = json!({"allocation_id": "a-1", "task_id": "t", "tenant": "demo",
            "node": "n1", "gpus": [], "cpu_milli": 1000, "memory_mb": 1024, "disk_mb": 1024,
            "exclusive": false, "epoch": 1, "created_ms": 1_000_000});
        merge(&mut v, &fields);
        v
    }

    fn dry_run(v: Value) -> DryRun {
        serde_json::from_value(v).expect("a dry run")
    }

    fn running_task() -> TaskView {
        task_view(json!({
            "task_id": "train_20240716_001", "tenant": "demo", "task_type": "training",
            "priority": "high", "state": "running", "attempts": 1,
            "created_at": "2026-11-29T10:00:00Z",
            "history": [
                {"state": "queued", "at": "2026-11-29T10:00:00Z", "at_ms": 1_000_000},
                {"state": "running", "at": "2026-11-29T10:00:01Z", "at_ms": 1_001_000, "reason": "started"}
            ],
            "allocation": allocation(json!({
                "allocation_id": "a-7", "node": "node-1", "epoch": 3, "cpu_milli": 32000,
                "memory_mb": 262144, "disk_mb": 204800,
                "gpus": [
                    {"index": 0, "uuid": "GPU-0", "model": "A100-80GB", "memory_mb": 81920, "simulated": true},
                    {"index": 1, "uuid": "GPU-1", "model": "A100-80GB", "memory_mb": 81920, "simulated": true}
                ]
            })),
            "spec": {"resources": {"gpu": {"count": 2, "model": "A100"}}}
        }))
    }

    #[test]
    fn the_task_list_shows_one_aligned_row_per_task_and_the_next_cursor() {
        let queued = task_view(json!({"task_id": "q1", "tenant": "beta",
            "task_type": "inference", "priority": "low", "state": "queued",
            "queue_position": 1, "estimated_start_ms": 1_420_000,
            "history": [{"state": "queued", "at": "-", "at_ms": 1_060_000}],
            "spec": {"resources": {"gpu": {"count": 1, "share": 0.5}}}}));
        let page = TaskPage {
            tasks: vec![running_task(), queued],
            next_cursor: Some("c2".into()),
        };
        // A share of one GPU is shown as the share, not as its count of 1.
        assert_eq!(
            render_task_list(&page, 1_120_000.0),
            "ID                  TENANT  TYPE       PRIORITY  STATE    POS  STARTS  NODE    GPUS         AGE\n\
             train_20240716_001  demo    training   high      running  -    -       node-1  2xA100-80GB  2m\n\
             q1                  beta    inference  low       queued   1    in 5m   -       0.5          1m\n\
             next cursor: c2\n"
        );
    }

    #[test]
    fn a_dry_run_shows_where_it_would_start_or_why_it_would_wait() {
        let fits = dry_run(
            json!({"placeable": true, "node": "node-a", "gpu_indices": [0, 3],
            "reason": null, "estimated_start_ms": 1_000, "admission": "guaranteed",
            "preempts": []}),
        );
        assert_eq!(
            render_dry_run(&fits, 1_000.0),
            "would start now on node-a (GPUs [0, 3]; admission: guaranteed)\n"
        );
        let waits = dry_run(json!({"placeable": false, "node": null, "gpu_indices": [],
            "reason": "1 node: 2 fewer than 2 idle GPUs", "estimated_start_ms": 301_000,
            "admission": "borrowing", "preempts": []}));
        // 301 s - 1 s = 300 s from now: "in 5m".
        assert_eq!(
            render_dry_run(&waits, 1_000.0),
            "would wait: 1 node: 2 fewer than 2 idle GPUs\nestimated start: in 5m (admission: borrowing)\n"
        );
        let preempts = dry_run(
            json!({"placeable": false, "node": "node-a", "gpu_indices": [],
            "reason": "would preempt 1 running task(s) on node-a to make room, then start once they have stopped",
            "estimated_start_ms": 11_000, "admission": "guaranteed",
            "preempts": [{"task": "another tenant's task", "gpus": 6, "priority": "medium",
                "reason": "priority 900 outranks 500"}]}),
        );
        assert_eq!(
            render_dry_run(&preempts, 1_000.0),
            "WARNING: submitting this preempts 1 running task(s) on node-a:\n  another tenant's task (6 GPU(s), priority medium): priority 900 outranks 500\nestimated start: in 10s once they have stopped (admission: guaranteed)\n"
        );
    }

    #[test]
    fn every_admission_is_written_as_the_api_writes_it() {
        use caldera_spec::views::Admission;
        for a in [
            Admission::Guaranteed,
            Admission::Borrowing,
            Admission::OverQuota,
        ] {
            assert_eq!(json!(a), json!(admission_label(a)));
        }
    }

    #[test]
    fn an_empty_list_is_the_header_alone() {
        let empty = TaskPage {
            tasks: vec![],
            next_cursor: None,
        };
        assert_eq!(
            render_task_list(&empty, 0.0),
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
        let task = task_view(json!({"task_id": "t", "state": "failed",
            "failure": "image registry.internal/nope:1 not found in its registry",
            "failure_code": 10220,
            "pull": {"image": "registry.internal/nope:1", "layers_done": 0,
                     "layers_total": 0, "bytes_done": 0},
            "allocation": allocation(json!({"image_digest": "sha256:abc"}))}));
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
        let task = task_view(
            json!({"task_id": "t", "state": "queued", "allocation": null,
            "pending_reason": "2 nodes: 2 no single GPU with 20 GB free"}),
        );
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
            render_status(&task_view(t))
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

    #[test]
    fn a_task_answer_without_a_field_the_view_needs_is_an_error_naming_it() {
        let mut answer = serde_json::to_value(running_task()).expect("a view serializes");
        answer["allocation"]
            .as_object_mut()
            .map(|a| a.remove("node"));
        answer["a_field_from_a_newer_server"] = json!(1);
        let err = read_view::<TaskView>(&answer).unwrap_err().to_string();
        assert!(
            err.contains("`allocation`") && err.contains("`node`"),
            "{err}"
        );
        // Fields it does not know are read past.
        answer["allocation"]["node"] = json!("node-1");
        assert_eq!(read_view::<TaskView>(&answer).ok(), Some(running_task()));
    }
}
