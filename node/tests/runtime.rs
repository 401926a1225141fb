//! The process runtime against real processes (`sh -c`).
use caldera_node::cgroup::Isolation;
use caldera_node::runtime::{Note, Runtime};
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

fn harness(simulated: bool) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let (rt, notes) = Runtime::new(data.clone(), Isolation::None("test".into()), simulated);
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
        checkpoint_dir: None,
        resume_from: Some("/ckpt/step-7".into()),
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
        std::fs::read_to_string(self.data.join("logs").join(format!("task-{alloc}.log")))
            .unwrap_or_default()
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
            stopped: false
        }
    );
    assert_eq!(h.kinds("a1"), ["Preparing", "Ready", "Started", "Exited"]);
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
        matches!(k, WorkloadEventKind::Started { pid: Some(_) })
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
            stopped: true
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
    let WorkloadEventKind::StartFailed { reason } = kind else {
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
    assert_eq!(kind, WorkloadEventKind::Started { pid: None });
    assert!(!h.rt.all_exited());
    h.rt.start(&start_cmd("r1", "echo SHOULD-NOT-RUN"));
    h.rt.stop("r1", Duration::from_secs(5), 1);
    let exit = h.exit_of("r1").await;
    assert_eq!(exit, ExitStatus::STOPPED_WITHOUT_PROCESS);
    // A stop for an allocation never seen here still gets an answer.
    h.rt.stop("ghost", Duration::from_secs(5), 1);
    let exit = h.exit_of("ghost").await;
    assert_eq!(exit, ExitStatus::STOPPED_WITHOUT_PROCESS);
    h.rt.purge_reported();
    h.rt.start(&start_cmd("r1", "echo SHOULD-NOT-RUN"));
    assert_eq!(h.rt.pending_events(), 0);
    assert!(h.rt.workload("r1").is_none());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!h.log("r1").contains("SHOULD-NOT-RUN"));
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
        h.rt.reports()
            .into_iter()
            .find(|r| r.allocation_id == "a1")
            .unwrap();
    assert!(report.exit.is_none() && report.pid.is_some());
    assert!(report.usage.cpu_pct > 5.0, "{:?}", report.usage);
    assert!(report.usage.memory_mb > 0 || report.usage.cpu_pct > 0.0);
    assert_eq!(report.usage.gpu_source, "simulated: process-tree CPU");
    assert!(report.usage.gpu_utilization_pct > 5.0);
    let per_gpu = h.rt.simulated_gpu_use();
    assert!(per_gpu[&1].0 > 2 && per_gpu[&3].0 > 2, "{per_gpu:?}");
    h.rt.stop("a1", Duration::ZERO, 1);
    assert!(h.exit_of("a1").await.stopped);
    // The exit stays reported until it went out and a heartbeat followed.
    assert_eq!(h.rt.reports().len(), 1);
    h.rt.purge_reported();
    assert!(h.rt.reports().is_empty());
}

#[tokio::test]
async fn a_restarted_agent_kills_what_the_previous_one_left() {
    let mut h = harness(false);
    h.rt.start(&start_cmd("a1", "sleep 30 & sleep 30"));
    let Some(pid) = h.rt.workload("a1").and_then(|w| w.pid) else {
        panic!("no pid: {:?}", h.rt.take_events());
    };
    // A second runtime on the same data dir plays the agent after a kill -9.
    let (mut reborn, _notes) = Runtime::new(h.data.clone(), Isolation::None("test".into()), false);
    reborn.recover_leftovers();
    wait_dead(pid).await;
    let reports = reborn.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].exit.as_ref().and_then(|e| e.signal), Some(9));
    // Its allocation can never be started again by this agent.
    reborn.apply_welcome(2, &[], &["a1".to_string()]);
    assert!(reborn.reports().is_empty());
    reborn.start(&start_cmd("a1", "echo SHOULD-NOT-RUN"));
    assert_eq!(reborn.pending_events(), 0);
    let ledger = std::fs::read_to_string(h.data.join("workloads.json")).unwrap();
    assert_eq!(ledger.trim(), "[]");
}

#[tokio::test]
async fn workloads_join_their_cgroup_where_the_host_allows() {
    let dir = tempfile::tempdir().unwrap();
    let iso = Isolation::detect("rt-test");
    let label = iso.label();
    let (rt, notes) = Runtime::new(dir.path().to_path_buf(), iso, false);
    let mut h = Harness {
        rt,
        notes,
        events: Vec::new(),
        data: dir.path().to_path_buf(),
        _dir: dir,
    };
    h.rt.start(&start_cmd("cg1", "cat /proc/self/cgroup; exit 0"));
    let ready = h
        .wait_for("cg1", |k| matches!(k, WorkloadEventKind::Ready { .. }))
        .await;
    assert_eq!(
        ready,
        WorkloadEventKind::Ready {
            isolation: label.clone()
        }
    );
    assert_eq!(h.exit_of("cg1").await.code, Some(0));
    if label.starts_with("cgroup-") {
        let log = h.log("cg1");
        assert!(log.contains("caldera-rt-test/cg1"), "{label}: {log}");
    } else {
        eprintln!("no cgroup isolation on this host: {label}");
    }
    h.rt.isolation().cleanup();
}

#[test]
fn a_workload_dies_with_the_thread_that_started_it() {
    // PR_SET_PDEATHSIG: when the agent (its spawning thread) dies, so does the
    // workload, instead of running on unowned while the task is requeued elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let pid = std::thread::spawn(move || {
        let tokio_rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio_rt.block_on(async {
            let (mut rt, _notes) = Runtime::new(data, Isolation::None("test".into()), false);
            rt.start(&start_cmd("a1", "exec sleep 30"));
            rt.workload("a1").and_then(|w| w.pid).expect("started")
        })
    })
    .join()
    .unwrap();
    for _ in 0..100 {
        if !alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("workload {pid} outlived the thread that spawned it");
}

#[tokio::test]
async fn a_restarted_agent_kills_leftovers_that_left_the_process_group() {
    let iso = Isolation::detect("rt-setsid");
    if !iso.label().starts_with("cgroup-") {
        eprintln!("no cgroup isolation on this host: {}", iso.label());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let (mut rt, _notes) = Runtime::new(data.clone(), iso.clone(), false);
    let pidfile = data.join("escaped.pid");
    let script = format!(
        "setsid sleep 30 & echo $! > {}; exec sleep 30",
        pidfile.display()
    );
    rt.start(&start_cmd("s1", &script));
    wait_file(&pidfile).await;
    let escaped: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let leader = rt.workload("s1").and_then(|w| w.pid).unwrap();
    // The escaped process is in its own session: a process-group kill misses it.
    let mut escaped_group = 0;
    for _ in 0..100 {
        escaped_group = caldera_node::runtime::procfs::stat(escaped).map_or(0, |s| s.pgrp);
        if escaped_group == escaped {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(escaped_group, escaped, "setsid did not take effect");
    assert_ne!(escaped_group, leader);
    let (mut reborn, _n) = Runtime::new(data, iso.clone(), false);
    reborn.recover_leftovers();
    wait_dead(leader).await;
    wait_dead(escaped).await;
    iso.cleanup();
}
