//! The process runtime against real processes (`sh -c`), each under a real
//! shim (the `caldera-shim` binary, which is `caldera shim`).
use caldera_node::cgroup::Isolation;
use caldera_node::runtime::{Note, Runtime, ShimCommand};
use caldera_spec::wire::{ExitStatus, StartCommand, WorkloadEvent, WorkloadEventKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

struct Harness {
    rt: Runtime,
    notes: UnboundedReceiver<Note>,
    events: Vec<WorkloadEvent>,
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
}

/// Shims are this crate's `caldera-shim` binary.
fn shim_command() -> ShimCommand {
    ShimCommand {
        program: env!("CARGO_BIN_EXE_caldera-shim").into(),
        args: vec![],
    }
}

/// A runtime on `data` as a (re)started agent makes it.
fn runtime(data: &Path, iso: Isolation) -> (Runtime, UnboundedReceiver<Note>) {
    let (mut rt, notes) = Runtime::new(data.to_path_buf(), iso, false);
    rt.set_shim_command(shim_command());
    (rt, notes)
}

fn harness(simulated: bool) -> Harness {
    harness_with(Isolation::None("test".into()), simulated)
}

/// A runtime with `iso` on a fresh data dir.
fn harness_with(iso: Isolation, simulated: bool) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let (mut rt, notes) = Runtime::new(data.clone(), iso, simulated);
    rt.set_shim_command(shim_command());
    Harness {
        rt,
        notes,
        events: Vec::new(),
        _dir: dir,
        data,
    }
}

fn start_cmd(alloc: &str, script: &str) -> StartCommand {
    StartCommand {
        container: None,
        allocation_id: alloc.into(),
        task_id: format!("task-{alloc}"),
        epoch: 1,
        command: if script.is_empty() {
            vec![]
        } else {
            vec!["sh".into(), "-c".into(), script.into()]
        },
        env: BTreeMap::from([("FROM_SPEC".to_string(), "yes".to_string())]),
        gpu_indices: vec![1, 3],
        gpu_uuids: vec![],
        gpu_memory_mb: 20480,
        cpu_milli: 1000,
        memory_mb: 512,
        disk_mb: 0,
        checkpoint_dir: None,
        resume_from: Some("/ckpt/step-7".into()),
        model: None,
        readiness: None,
    }
}

impl Drop for Harness {
    /// Shims outlive their agent by design: a test's must not outlive the test.
    fn drop(&mut self) {
        self.rt.stop_all(Duration::ZERO);
    }
}

impl Harness {
    /// Feeds notes to the runtime until an event matching `pred` for `alloc` shows up.
    async fn wait_for(
        &mut self,
        alloc: &str,
        pred: impl Fn(&WorkloadEventKind) -> bool,
    ) -> WorkloadEventKind {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            self.events.extend(self.rt.take_events());
            if let Some(e) = self
                .events
                .iter()
                .find(|e| e.allocation_id == alloc && pred(&e.kind))
            {
                return e.kind.clone();
            }
            let note = tokio::time::timeout_at(deadline, self.notes.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out; events so far: {:#?}", self.events))
                .expect("notes channel open");
            self.rt.handle(note);
        }
    }

    /// The pid of the workload, once its shim said it started.
    async fn started_pid(&mut self, alloc: &str) -> u32 {
        match self
            .wait_for(alloc, |k| matches!(k, WorkloadEventKind::Started { .. }))
            .await
        {
            WorkloadEventKind::Started { pid: Some(pid), .. } => pid,
            other => panic!("{alloc} started without a pid: {other:?}"),
        }
    }

    async fn exit_of(&mut self, alloc: &str) -> ExitStatus {
        match self
            .wait_for(alloc, |k| matches!(k, WorkloadEventKind::Exited(_)))
            .await
        {
            WorkloadEventKind::Exited(s) => s,
            _ => unreachable!(),
        }
    }

    fn kinds(&self, alloc: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e.allocation_id == alloc)
            .map(|e| {
                format!("{:?}", e.kind)
                    .split([' ', '(', '{'])
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    fn log(&self, alloc: &str) -> String {
        let path = caldera_node::runtime::logs::log_path(&self.data, &format!("task-{alloc}"));
        std::fs::read_to_string(path).unwrap_or_default()
    }
}

fn alive(pid: u32) -> bool {
    // A zombie waiting for a reaper that is not us counts as dead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

async fn wait_dead(pid: u32) {
    for _ in 0..100 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} still alive");
}

#[tokio::test]
async fn workload_sees_its_allocation_and_exit_code_and_log_are_kept() {
    let mut h = harness(true);
    let script =
        "echo CVD=$CUDA_VISIBLE_DEVICES TASK=$CALDERA_TASK_ID ALLOC=$CALDERA_ALLOCATION_ID \
                  MEM=$CALDERA_GPU_MEMORY_MB RESUME=$CALDERA_RESUME_FROM SPEC=$FROM_SPEC; \
                  test -d \"$CALDERA_CHECKPOINT_DIR\" && echo CKPT_OK; echo to-stderr >&2; exit 3";
    h.rt.start(&start_cmd("a1", script));
    let exit = h.exit_of("a1").await;
    assert_eq!(
        exit,
        ExitStatus {
            code: Some(3),
            signal: None,
            stopped: false,
            oom_killed: false
        }
    );
    // Without a readiness probe it is reported ready right after it starts.
    assert_eq!(
        h.kinds("a1"),
        ["Preparing", "Ready", "Started", "Readiness", "Exited"]
    );
    let log = h.log("a1");
    assert!(
        log.contains("CVD=1,3 TASK=task-a1 ALLOC=a1 MEM=20480 RESUME=/ckpt/step-7 SPEC=yes"),
        "{log}"
    );
    assert!(
        log.contains("CKPT_OK") && log.contains("to-stderr"),
        "{log}"
    );
    assert_eq!(h.rt.tail_log("a1", "", 10).0, "to-stderr\n");

    // A requeued run of the same task appends to the same file; no GPUs: empty CUDA_VISIBLE_DEVICES.
    let mut again = start_cmd("a2", "echo \"second CVD=[$CUDA_VISIBLE_DEVICES]\"");
    again.task_id = "task-a1".into();
    again.gpu_indices.clear();
    h.rt.start(&again);
    assert_eq!(h.exit_of("a2").await.code, Some(0));
    let log = h.log("a1");
    assert!(
        log.contains("to-stderr") && log.contains("second CVD=[]"),
        "{log}"
    );
}

#[tokio::test]
async fn stop_escalates_to_sigkill_and_kills_the_whole_group() {
    let mut h = harness(false);
    let pidfile = h.data.join("grandchild.pid");
    let script = format!(
        "trap '' TERM; sleep 30 & echo $! > {}; echo ready; while :; do sleep 0.05; done",
        pidfile.display()
    );
    h.rt.start(&start_cmd("a1", &script));
    h.wait_for("a1", |k| {
        matches!(k, WorkloadEventKind::Started { pid: Some(_), .. })
    })
    .await;
    wait_file(&pidfile).await;
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    let t0 = std::time::Instant::now();
    h.rt.stop("a1", Duration::from_millis(300), 1);
    let exit = h.exit_of("a1").await;
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        exit,
        ExitStatus {
            code: None,
            signal: Some(9),
            stopped: true,
            oom_killed: false
        }
    );
    wait_dead(grandchild).await;
}

#[tokio::test]
async fn a_workload_that_honours_sigterm_exits_within_grace() {
    let mut h = harness(false);
    h.rt.start(&start_cmd(
        "a1",
        "trap 'echo bye; exit 0' TERM; while :; do sleep 0.05; done",
    ));
    h.wait_for("a1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.rt.stop("a1", Duration::from_secs(10), 1);
    let t0 = std::time::Instant::now();
    let exit = h.exit_of("a1").await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(exit.stopped);
    assert!(h.log("a1").contains("bye"));
}

async fn wait_file(p: &Path) {
    for _ in 0..100 {
        if std::fs::read_to_string(p).is_ok_and(|s| s.ends_with('\n')) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never appeared", p.display());
}

#[tokio::test]
async fn a_missing_program_is_start_failed() {
    let mut h = harness(false);
    let mut cmd = start_cmd("a1", "");
    cmd.command = vec!["/no/such/program".into(), "x".into()];
    h.rt.start(&cmd);
    let kind = h
        .wait_for("a1", |k| matches!(k, WorkloadEventKind::StartFailed { .. }))
        .await;
    let WorkloadEventKind::StartFailed { reason, .. } = kind else {
        unreachable!()
    };
    assert!(
        reason.contains("/no/such/program") && reason.contains("not found"),
        "{reason}"
    );
    assert!(h.rt.all_exited());
}

#[tokio::test]
async fn a_reservation_holds_until_stopped_and_duplicates_never_run() {
    let mut h = harness(false);
    h.rt.start(&start_cmd("r1", ""));
    let kind = h
        .wait_for("r1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    assert!(matches!(kind, WorkloadEventKind::Started { pid: None, .. }));
    assert!(!h.rt.all_exited());
    h.rt.start(&start_cmd("r1", "echo SHOULD-NOT-RUN"));
    h.rt.stop("r1", Duration::from_secs(5), 1);
    let exit = h.exit_of("r1").await;
    assert_eq!(exit, ExitStatus::STOPPED_WITHOUT_PROCESS);
    // A stop for an allocation never seen here still gets an answer.
    h.rt.stop("ghost", Duration::from_secs(5), 1);
    let exit = h.exit_of("ghost").await;
    assert_eq!(exit, ExitStatus::STOPPED_WITHOUT_PROCESS);
    h.rt.start(&start_cmd("r1", "echo SHOULD-NOT-RUN"));
    assert_eq!(h.rt.pending_events(), 0);
    assert!(h.rt.workload("r1").is_some_and(|w| !w.is_alive()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!h.log("r1").contains("SHOULD-NOT-RUN"));
}

#[tokio::test]
async fn a_whole_cluster_stop_keeps_a_held_reservation_for_the_next_agent() {
    let mut h = harness(false);
    h.rt.start(&start_cmd("r1", ""));
    h.wait_for("r1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    h.rt.start(&start_cmd("a1", "sleep 30"));
    h.started_pid("a1").await;
    // Everything but the held reservation is stopped.
    h.rt.stop_all_but_held(Duration::from_secs(1));
    h.exit_of("a1").await;
    assert!(h.rt.only_held_left());
    assert!(!h.rt.all_exited(), "the reservation is still held");
    assert!(h.rt.workload("r1").is_some_and(|w| w.is_held_reservation()));
    // The next agent on the same data dir adopts it, still held.
    let (mut reborn, _notes) = runtime(&h.data, Isolation::None("test".into()));
    assert_eq!(reborn.adopt_shims().held, 1);
    let r1 = reborn.hello_reports();
    let r1 = r1.iter().find(|r| r.allocation_id == "r1");
    assert!(r1.is_some_and(|r| r.exit.is_none()), "{r1:?}");
}

#[tokio::test]
async fn checkpoints_usage_and_reports() {
    let mut h = harness(true);
    let script = "echo x > $CALDERA_CHECKPOINT_DIR/step-1; while :; do :; done";
    h.rt.start(&start_cmd("a1", script));
    h.wait_for("a1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    let ckpt = h.data.join("checkpoints/task-a1/step-1");
    wait_file(&ckpt).await;
    h.rt.poll_checkpoints();
    let kind = h
        .wait_for("a1", |k| {
            matches!(k, WorkloadEventKind::CheckpointSaved { .. })
        })
        .await;
    assert_eq!(
        kind,
        WorkloadEventKind::CheckpointSaved {
            path: ckpt.to_string_lossy().into_owned()
        }
    );
    h.rt.sample_usage(&Default::default());
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.rt.sample_usage(&Default::default());
    let report =
        h.rt.usage_reports()
            .into_iter()
            .find(|r| r.allocation_id == "a1")
            .unwrap();
    assert!(report.usage.cpu_pct > 5.0, "{:?}", report.usage);
    assert!(report.usage.memory_mb > 0 || report.usage.cpu_pct > 0.0);
    assert_eq!(report.usage.gpu_source, "simulated: process-tree CPU");
    assert!(report.usage.gpu_utilization_pct > 5.0);
    let per_gpu = h.rt.simulated_gpu_use();
    assert!(per_gpu[&1].0 > 2 && per_gpu[&3].0 > 2, "{per_gpu:?}");
    h.rt.stop("a1", Duration::ZERO, 1);
    assert!(h.exit_of("a1").await.stopped);
    // A heartbeat carries usage of live workloads only: the exit went out
    // as an event, and a hello still reports it.
    assert!(
        h.rt.usage_reports().is_empty(),
        "{:?}",
        h.rt.usage_reports()
    );
    assert_eq!(h.rt.hello_reports().len(), 1);
}

#[tokio::test]
async fn a_restarted_agent_adopts_a_running_workload_and_reports_one_that_ended() {
    let mut h = harness(false);
    h.rt.start(&start_cmd("a1", "echo first; sleep 30"));
    h.rt.start(&start_cmd("a2", "sleep 0.3; exit 7"));
    let pid = h.started_pid("a1").await;
    // A second runtime on the same data dir plays the agent after a kill -9;
    // the first one's waiters are gone with it (nothing of it is used again).
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (mut reborn, _notes) = runtime(&h.data, Isolation::None("test".into()));
    let adopted = reborn.adopt_shims();
    assert_eq!((adopted.running, adopted.exited), (1, 1), "{adopted:?}");
    let reports = reborn.hello_reports();
    let a1 = reports.iter().find(|r| r.allocation_id == "a1").unwrap();
    assert_eq!(
        (a1.pid, a1.exit.clone()),
        (Some(pid), None),
        "same process, running"
    );
    let a2 = reports.iter().find(|r| r.allocation_id == "a2").unwrap();
    assert_eq!(a2.exit.as_ref().and_then(|e| e.code), Some(7), "{a2:?}");
    assert!(alive(pid));
    // The welcome keeps a1 (adopted under epoch 2) and no longer owns a2.
    let reported = vec!["a1".to_string(), "a2".to_string()];
    assert_eq!(reborn.apply_welcome(2, &["a1".to_string()], &reported), 0);
    assert!(alive(pid));
    assert!(
        !h.data.join("shims/a2").exists(),
        "an exit acted on is forgotten"
    );
    // An allocation it had can never be started again.
    reborn.start(&start_cmd("a2", "echo SHOULD-NOT-RUN"));
    assert_eq!(reborn.workload("a1").map(|w| w.epoch), Some(2));
    // Stopping an adopted workload goes through its shim; its end is polled.
    reborn.stop("a1", Duration::ZERO, 2);
    let mut exit = None;
    for _ in 0..100 {
        reborn.poll_adopted();
        exit = reborn.workload("a1").and_then(|w| w.exit.clone());
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(exit.map(|e| (e.signal, e.stopped)), Some((Some(9), true)));
    wait_dead(pid).await;
    let events = reborn.take_events();
    assert!(
        !events.iter().any(|e| e.allocation_id == "a2"),
        "a2 never started again: {events:?}"
    );
    assert_eq!(h.log("a1"), "first\n");
}

#[tokio::test]
async fn a_kill_list_stops_an_adopted_workload() {
    let h = harness(false);
    let mut h = h;
    h.rt.start(&start_cmd("k1", "exec sleep 30"));
    let pid = h.started_pid("k1").await;
    let (mut reborn, _notes) = runtime(&h.data, Isolation::None("test".into()));
    assert_eq!(reborn.adopt_shims().running, 1);
    assert_eq!(reborn.apply_welcome(2, &[], &["k1".to_string()]), 1);
    wait_dead(pid).await;
}

#[tokio::test]
async fn workloads_join_their_cgroup_where_the_host_allows() {
    let iso = Isolation::detect("rt-test", std::path::Path::new("rt-test"));
    let label = iso.label();
    let mut h = harness_with(iso, false);
    h.rt.start(&start_cmd("cg1", "cat /proc/self/cgroup; exit 0"));
    let ready = h
        .wait_for("cg1", |k| matches!(k, WorkloadEventKind::Ready { .. }))
        .await;
    let WorkloadEventKind::Ready { isolation } = ready else {
        unreachable!()
    };
    assert!(isolation.starts_with(&label), "{isolation} / {label}");
    assert_eq!(h.exit_of("cg1").await.code, Some(0));
    if label.starts_with("cgroup-") {
        let log = h.log("cg1");
        assert!(
            log.contains("caldera-rt-test-") && log.contains("/cg1"),
            "{label}: {log}"
        );
    } else {
        eprintln!("no cgroup isolation on this host: {label}");
    }
    h.rt.isolation().cleanup();
}

#[tokio::test]
async fn a_process_killed_at_its_memory_limit_is_reported_oom_killed() {
    let iso = Isolation::detect("rt-oom", std::path::Path::new("rt-oom"));
    assert!(
        iso.label().starts_with("cgroup-"),
        "this test needs cgroup limits: {}",
        iso.label()
    );
    let mut h = harness_with(iso, false);
    let mut hog = start_cmd(
        "oom1",
        "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo SURVIVED",
    );
    hog.memory_mb = 32;
    h.rt.start(&hog);
    let exit = h.exit_of("oom1").await;
    assert!(
        exit.oom_killed && exit.signal == Some(9),
        "{exit:?}: {}",
        h.log("oom1")
    );
    // A kill -9 of its own, under its limit, is not one.
    h.rt.start(&start_cmd("kill1", "kill -9 $$"));
    let exit = h.exit_of("kill1").await;
    assert!(!exit.oom_killed && exit.signal == Some(9), "{exit:?}");
    h.rt.isolation().cleanup();
}

/// Runs `f` on a tokio runtime of its own (an agent's life).
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_workload_outlives_the_thread_and_runtime_that_started_it() {
    // No PR_SET_PDEATHSIG: the shim is in a session of its own, so the agent
    // can be restarted or upgraded without touching running work.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let thread_data = data.clone();
    let pid = std::thread::spawn(move || {
        block_on(async {
            let (mut rt, mut notes) = runtime(&thread_data, Isolation::None("test".into()));
            rt.start(&start_cmd("a1", "exec sleep 30"));
            let note = notes.recv().await.expect("the shim's start note");
            rt.handle(note);
            rt.workload("a1").and_then(|w| w.pid).expect("started")
        })
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        alive(pid),
        "workload {pid} died with the thread that started it"
    );
    // Clean up through a runtime that adopts it.
    block_on(async {
        let (mut rt, _notes) = runtime(&data, Isolation::None("test".into()));
        rt.adopt_shims();
        rt.stop_all(Duration::ZERO);
        wait_dead(pid).await;
    });
}

#[tokio::test]
async fn a_stop_kills_what_left_the_process_group() {
    let iso = Isolation::detect("rt-setsid", std::path::Path::new("rt-setsid"));
    if !iso.label().starts_with("cgroup-") {
        eprintln!("no cgroup isolation on this host: {}", iso.label());
        return;
    }
    let mut h = harness_with(iso.clone(), false);
    let pidfile = h.data.join("escaped.pid");
    let script = format!(
        "setsid sleep 30 & echo $! > {}; exec sleep 30",
        pidfile.display()
    );
    h.rt.start(&start_cmd("s1", &script));
    wait_file(&pidfile).await;
    let escaped: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let leader = h.started_pid("s1").await;
    // The escaped process is in its own session: a process-group kill misses it.
    let mut escaped_group = 0;
    for _ in 0..100 {
        escaped_group = caldera_node::procfs::stat(escaped).map_or(0, |s| s.pgrp);
        if escaped_group == escaped {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(escaped_group, escaped, "setsid did not take effect");
    assert_ne!(escaped_group, leader);
    // The shim's cgroup kill (v2) or the agent's reap of the cgroup (v1) gets it.
    h.rt.stop("s1", Duration::ZERO, 1);
    assert!(h.exit_of("s1").await.stopped);
    wait_dead(leader).await;
    wait_dead(escaped).await;
    iso.cleanup();
}

#[tokio::test]
async fn a_shim_stops_its_workload_when_the_lease_runs_out_and_not_before() {
    let mut h = harness(false);
    let now = caldera_node::shim::files::boottime_ms;
    h.rt.renew_leases(Some(now() + 60_000));
    h.rt.start(&start_cmd(
        "l1",
        "trap 'echo term; exit 0' TERM; while :; do sleep 0.05; done",
    ));
    h.started_pid("l1").await;
    // A server without leases lifts it: the workload runs past any deadline.
    h.rt.renew_leases(None);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(h.rt.workload("l1").is_some_and(|w| w.is_alive()));
    // A deadline already past: the shim stops it (SIGTERM first) by itself.
    h.rt.renew_leases(Some(now().saturating_sub(1)));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h.rt.workload("l1").is_some_and(|w| w.is_alive()) {
        let note = tokio::time::timeout_at(deadline, h.notes.recv())
            .await
            .expect("the shim stopped it")
            .expect("notes channel open");
        h.rt.handle(note);
    }
    let record = std::fs::read_to_string(h.data.join("shims/l1/exit.json")).unwrap();
    assert!(record.contains(r#""reason":"lease_expired""#), "{record}");
    assert!(h.log("l1").contains("term"));
    // It exited 0 on SIGTERM, but did not end on its own: it is not reported
    // as an exit (a code 0 would finish the task), and a hello leaves it out.
    let events = h.rt.take_events();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, WorkloadEventKind::Exited(_))),
        "{events:?}"
    );
    assert!(
        h.rt.hello_reports().is_empty(),
        "{:?}",
        h.rt.hello_reports()
    );
    assert!(h.rt.usage_reports().is_empty());
    // A stop for it is answered as stopped, without a code.
    h.rt.stop("l1", Duration::from_secs(1), 1);
    let answer = h.rt.take_events();
    assert!(
        matches!(&answer[..], [e] if matches!(&e.kind, WorkloadEventKind::Exited(x) if x.stopped && x.code.is_none())),
        "{answer:?}"
    );
    // The next welcome (the hello left it out) forgets it.
    h.rt.apply_welcome(2, &[], &[]);
    assert!(!h.data.join("shims/l1").exists());
}

#[tokio::test]
async fn an_exit_is_kept_until_the_control_plane_no_longer_owns_it() {
    let mut h = harness(false);
    h.rt.start(&start_cmd("e1", "exit 5"));
    assert_eq!(h.exit_of("e1").await.code, Some(5));
    // Heartbeats never carry it (usage only); memory and disk keep it:
    // nothing said the control plane acted on it. A hello of this agent
    // still reports it and a stop for it is answered with it.
    h.rt.take_events();
    assert!(h.rt.usage_reports().is_empty());
    assert!(h.data.join("shims/e1/exit.json").exists());
    let hello = h.rt.hello_reports();
    assert!(
        matches!(&hello[..], [w] if w.allocation_id == "e1" && w.exit.as_ref().is_some_and(|x| x.code == Some(5))),
        "{hello:?}"
    );
    h.rt.stop("e1", Duration::from_secs(1), 2);
    let answer = h.rt.take_events();
    assert!(
        matches!(&answer[..], [e] if matches!(&e.kind, WorkloadEventKind::Exited(x) if x.code == Some(5))),
        "{answer:?}"
    );
    // A welcome that still keeps it keeps it; one that does not lets it go.
    h.rt.apply_welcome(2, &["e1".to_string()], &["e1".to_string()]);
    assert_eq!(h.rt.hello_reports().len(), 1);
    // A restarted agent reports it again (a control plane that lost it, e.g.
    // a failed commit, hears it again); a stop for it is answered with it.
    let (mut reborn, _notes) = runtime(&h.data, Isolation::None("test".into()));
    assert_eq!(reborn.adopt_shims().exited, 1);
    reborn.stop("e1", Duration::from_secs(1), 3);
    let answer = reborn.take_events();
    assert!(
        matches!(&answer[..], [e] if e.kind == WorkloadEventKind::Exited(ExitStatus { code: Some(5), signal: None, stopped: false, oom_killed: false })),
        "{answer:?}"
    );
    // Still owned: kept. No longer owned: gone.
    reborn.apply_welcome(4, &["e1".to_string()], &["e1".to_string()]);
    assert!(h.data.join("shims/e1/exit.json").exists());
    let (mut third, _notes) = runtime(&h.data, Isolation::None("test".into()));
    third.adopt_shims();
    third.apply_welcome(5, &[], &["e1".to_string()]);
    assert!(!h.data.join("shims/e1").exists());
}

#[tokio::test]
async fn a_shim_killed_under_its_workload_takes_the_workload_with_it() {
    let mut h = harness(false);
    h.rt.start(&start_cmd("x1", "sleep 30 & exec sleep 30"));
    let pid = h.started_pid("x1").await;
    let shim =
        h.rt.workload("x1")
            .and_then(|w| w.shim.clone())
            .expect("a shim");
    // SAFETY: kill(2) on the shim this test started.
    unsafe { libc::kill(shim.pid as i32, libc::SIGKILL) };
    let exit = h.exit_of("x1").await;
    assert_eq!((exit.signal, exit.stopped), (Some(9), false));
    let record = std::fs::read_to_string(h.data.join("shims/x1/exit.json")).unwrap();
    assert!(record.contains(r#""reason":"shim_lost""#), "{record}");
    wait_dead(pid).await;
}

#[tokio::test]
async fn other_gpus_device_files_are_denied_where_the_host_has_a_devices_cgroup() {
    let iso = Isolation::detect("rt-devices", std::path::Path::new("rt-devices"));
    if !iso.limits_devices() {
        eprintln!("no devices cgroup on this host: {}", iso.label());
        return;
    }
    // Stand-ins for /dev/nvidia0 and /dev/nvidia1 (no driver behind them: an
    // open that the cgroup allows fails with ENXIO instead).
    let devices = tempfile::tempdir().unwrap();
    for minor in [0, 1] {
        let path =
            std::ffi::CString::new(format!("{}/nvidia{minor}", devices.path().display())).unwrap();
        // SAFETY: mknod with a valid C string; creates a device file in our temp dir.
        let rc = unsafe {
            libc::mknod(
                path.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(195, minor),
            )
        };
        assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    }
    let mut h = harness_with(iso.clone(), false);
    h.rt.set_device_dir(devices.path().to_path_buf());
    let d = devices.path().display();
    // The allocation holds GPUs 1 and 3 (start_cmd): nvidia1 is its own, nvidia0 not.
    h.rt.start(&start_cmd(
        "d1",
        &format!("head -c1 {d}/nvidia0; head -c1 {d}/nvidia1; exit 0"),
    ));
    let ready = h
        .wait_for("d1", |k| matches!(k, WorkloadEventKind::Ready { .. }))
        .await;
    assert!(format!("{ready:?}").contains("devices cgroup"), "{ready:?}");
    assert_eq!(h.exit_of("d1").await.code, Some(0));
    let log = h.log("d1");
    assert!(
        log.contains(&format!(
            "{d}/nvidia0' for reading: Operation not permitted"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "{d}/nvidia1' for reading: No such device or address"
        )),
        "allowed (there is no driver behind it): {log}"
    );
    iso.cleanup();
}

/// An adopted shim takes the grace the new agent was welcomed with: its old
/// agent gave it 30 s between SIGTERM and SIGKILL for a lapsed lease, the
/// restarted one was told 1 s (the control plane starts fenced tasks
/// elsewhere after lease + its stop grace, so a longer grace would let two
/// copies overlap). The shim says the grace it stops with in its log.
#[tokio::test]
async fn an_adopted_shim_stops_a_lapsed_lease_with_the_new_agents_grace() {
    let mut h = harness(false);
    let now = caldera_node::shim::files::boottime_ms;
    h.rt.set_lease_grace(Duration::from_secs(30));
    h.rt.renew_leases(Some(now() + 60_000));
    h.rt.start(&start_cmd(
        "g1",
        "trap '' TERM; while :; do sleep 0.05; done",
    ));
    let pid = h.started_pid("g1").await;
    let (mut reborn, _notes) = runtime(&h.data, Isolation::None("test".into()));
    assert_eq!(reborn.adopt_shims().running, 1);
    reborn.set_lease_grace(Duration::from_secs(1));
    reborn.apply_welcome(2, &["g1".to_string()], &["g1".to_string()]);
    reborn.renew_leases(Some(now().saturating_sub(1)));
    wait_dead(pid).await;
    let shim_log = std::fs::read_to_string(h.data.join("shims/g1/shim.log")).unwrap();
    let grace = shim_log
        .split("lease_expired, grace ")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or_default()
        .to_string();
    assert!(
        grace.ends_with("ms") || grace == "1s" || grace.starts_with("0ns"),
        "stopped with grace {grace:?}, not about 1 s: {shim_log}"
    );
}
