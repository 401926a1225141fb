//! The container runtime against real podman: starts with an image run in a
//! container made from it, under a real shim (`caldera-shim`), with the
//! slice's limits, and stopped, adopted and cleaned up by name. Every test
//! needs the container host (`scripts/container-host`) and fails without it.
use caldera_chaos_tests::container_host::{self, SEED_IMAGE, SEED_IMAGE_OS};
use caldera_node::cgroup::Isolation;
use caldera_node::container::{engine, pull::Puller, run_args};
use caldera_node::runtime::{ContainerHost, Note, Runtime, ShimCommand};
use caldera_node::scratch_volume::ScratchVolumes;
use caldera_spec::container::{ContainerStart, PullPolicy};
use caldera_spec::wire::{ExitStatus, StartCommand, WorkloadEvent, WorkloadEventKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

struct Harness {
    rt: Runtime,
    notes: UnboundedReceiver<Note>,
    events: Vec<WorkloadEvent>,
    data: PathBuf,
    node: String,
    _dir: tempfile::TempDir,
}

/// A runtime on `data` that runs containers, as an agent named `node` makes it.
fn runtime(
    data: &Path,
    iso: Isolation,
    pids_limit: u32,
) -> (Runtime, UnboundedReceiver<Note>, String) {
    container_host::require();
    let (mut rt, notes) = Runtime::new(data.to_path_buf(), iso, true);
    rt.set_shim_command(ShimCommand {
        program: env!("CARGO_BIN_EXE_caldera-shim").into(),
        args: vec![],
    });
    let detected = engine::detect(engine::Mode::Podman);
    let engine = detected
        .engine
        .unwrap_or_else(|| panic!("podman is not usable here: {:?}", detected.reported));
    let node = run_args::agent_identity("ctr-test", data);
    let host = ContainerHost {
        puller: Puller::new(engine.podman.clone(), data),
        node: node.clone(),
        pids_limit,
        engine,
    };
    rt.set_containers(Some(host), detected.reported);
    (rt, notes, node)
}

fn harness_with(iso: impl FnOnce(&Path) -> Isolation, pids_limit: u32) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let (rt, notes, node) = runtime(&data, iso(&data), pids_limit);
    Harness {
        rt,
        notes,
        events: Vec::new(),
        data,
        node,
        _dir: dir,
    }
}

fn harness() -> Harness {
    harness_with(|_| Isolation::None("test".into()), 256)
}

/// A harness whose workloads get real cgroups (limits, OOM counters).
fn harness_with_cgroups(pids_limit: u32) -> Harness {
    harness_with(|d| Isolation::detect("ctr-test", d), pids_limit)
}

fn start_cmd(alloc: &str, script: &str) -> StartCommand {
    StartCommand {
        container: Some(ContainerStart {
            image: SEED_IMAGE.into(),
            pull: PullPolicy::IfNotPresent,
            prepare_timeout_ms: 60_000,
            volumes: vec![],
            registry_auth: None,
        }),
        allocation_id: format!("acme/{alloc}"),
        task_id: format!("acme/task-{alloc}"),
        epoch: 1,
        command: vec!["sh".into(), "-c".into(), script.into()],
        env: BTreeMap::from([("FROM_SPEC".to_string(), "yes".to_string())]),
        gpu_indices: vec![1],
        gpu_uuids: vec![],
        gpu_memory_mb: 1024,
        cpu_milli: 1000,
        memory_mb: 256,
        disk_mb: 0,
        checkpoint_dir: None,
        resume_from: None,
        model: None,
        readiness: None,
    }
}

/// The allocations the tests start (their cgroups are removed at the end).
const ALLOCATIONS: &[&str] = &[
    "a1", "iso", "s1", "s2", "ad", "fork", "oom", "probe", "use", "disk", "kept",
];

impl Drop for Harness {
    /// Shims outlive their agent by design: a test's must not outlive the
    /// test, nor its containers.
    fn drop(&mut self) {
        self.rt.stop_all(Duration::ZERO);
        // Each shim removes its container and then ends.
        for _ in 0..200 {
            let shims = caldera_chaos_tests::shims::shims(&self.data);
            if shims.iter().all(|s| s.shim.is_none()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for name in container_host::containers_labelled(&format!("caldera.node={}", self.node)) {
            let _ = container_host::podman(&["rm", "-f", "-t", "0", &name]);
        }
        for alloc in ALLOCATIONS {
            self.rt.isolation().reap(&format!("acme/{alloc}"));
        }
        // A filesystem left mounted would outlive the test's data dir.
        ScratchVolumes::detect(&self.data).release_all_but(&Default::default());
        self.rt.isolation().cleanup();
    }
}

impl Harness {
    /// Feeds notes to the runtime until an event matching `pred` for `alloc` shows up.
    async fn wait_for(
        &mut self,
        alloc: &str,
        pred: impl Fn(&WorkloadEventKind) -> bool,
    ) -> WorkloadEventKind {
        let id = format!("acme/{alloc}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            self.events.extend(self.rt.take_events());
            if let Some(e) = self
                .events
                .iter()
                .find(|e| e.allocation_id == id && pred(&e.kind))
            {
                return e.kind.clone();
            }
            let next = tokio::time::timeout(Duration::from_millis(100), self.notes.recv()).await;
            match next {
                Ok(Some(note)) => self.rt.handle(note),
                Ok(None) => panic!("notes channel closed"),
                Err(_) => self.rt.poll_adopted(),
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out; events so far: {:#?}",
                self.events
            );
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

    fn log(&self, alloc: &str) -> String {
        let path = caldera_node::runtime::logs::log_path(&self.data, &format!("acme/task-{alloc}"));
        std::fs::read_to_string(path).unwrap_or_default()
    }

    fn name(&self, alloc: &str) -> String {
        run_args::container_name(&self.node, &format!("acme/{alloc}"))
    }

    /// Waits until the log holds `text` (feeding the runtime its notes: the
    /// pull's outcome launches the container).
    async fn log_shows(&mut self, alloc: &str, text: &str) {
        for _ in 0..400 {
            if self.log(alloc).contains(text) {
                return;
            }
            if let Ok(Some(note)) =
                tokio::time::timeout(Duration::from_millis(50), self.notes.recv()).await
            {
                self.rt.handle(note);
            }
            self.events.extend(self.rt.take_events());
        }
        panic!("log of {alloc} never showed {text:?}: {}", self.log(alloc));
    }
}

/// The container's id, or None when podman has no container of that name.
fn container_id(name: &str) -> Option<String> {
    container_host::podman(&["inspect", "--format", "{{.Id}}", name])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[tokio::test]
async fn a_start_with_an_image_runs_in_it_with_its_exit_code_log_and_digest() {
    let mut h = harness();
    let script = "cat /etc/os-release; echo CKPT=$CALDERA_CHECKPOINT_DIR SCRATCH=$CALDERA_SCRATCH_DIR \
                  SPEC=$FROM_SPEC CVD=$CUDA_VISIBLE_DEVICES HOME=$HOME; \
                  touch $CALDERA_CHECKPOINT_DIR/saved && echo WROTE; ls /dev | grep caldera-sim-gpu; exit 3";
    h.rt.start(&start_cmd("a1", script));
    let started = h
        .wait_for("a1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    let WorkloadEventKind::Started { image_digest, .. } = started else {
        unreachable!()
    };
    let digest = image_digest.expect("a container's start reports its image's digest");
    assert!(digest.starts_with("sha256:"), "{digest}");
    let exit = h.exit_of("a1").await;
    assert_eq!((exit.code, exit.oom_killed), (Some(3), false), "{exit:?}");
    let log = h.log("a1");
    assert!(
        log.contains(SEED_IMAGE_OS),
        "the image's OS, not the host's: {log}"
    );
    assert!(
        log.contains("CKPT=/caldera/checkpoints SCRATCH=/caldera/scratch SPEC=yes CVD=0 HOME=/caldera/scratch"),
        "{log}"
    );
    assert!(
        log.contains("WROTE"),
        "the checkpoint dir is writable: {log}"
    );
    // Only the allocated GPU (index 1), through CDI.
    assert!(
        log.contains("caldera-sim-gpu1") && !log.contains("caldera-sim-gpu0"),
        "{log}"
    );
    let saved = h
        .data
        .join("checkpoints")
        .join("acme+task-a1")
        .join("saved");
    assert!(
        saved.exists(),
        "the checkpoint landed in the task's tree on the host"
    );
    assert_eq!(
        container_id(&h.name("a1")),
        None,
        "the container is gone once it ended"
    );
}

#[tokio::test]
async fn the_container_sees_none_of_the_hosts_data_or_secrets() {
    let mut h = harness();
    let data = h.data.display().to_string();
    // Another tenant's checkpoint tree and the node secret, on the host.
    let other = h.data.join("checkpoints").join("other+task-x");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("weights.ckpt"), "other tenant's").unwrap();
    std::fs::write(h.data.join("node-secret"), "s3cret").unwrap();
    let script = format!(
        "for p in {data} {data}/node-secret {data}/checkpoints/other+task-x/weights.ckpt /caldera/checkpoints/../other+task-x; do \
           if cat $p >/dev/null 2>&1 || ls $p >/dev/null 2>&1; then echo READ $p; else echo DENIED $p; fi; done"
    );
    h.rt.start(&start_cmd("iso", &script));
    let exit = h.exit_of("iso").await;
    assert_eq!(exit.code, Some(0), "{exit:?}: {}", h.log("iso"));
    let log = h.log("iso");
    assert_eq!(log.matches("DENIED").count(), 4, "{log}");
    assert!(!log.contains("READ"), "{log}");
}

#[tokio::test]
async fn a_stop_sends_sigterm_into_the_container_and_removes_it() {
    let mut h = harness();
    let script = "trap 'echo GOT-TERM; exit 0' TERM; echo UP; while true; do sleep 0.1; done";
    h.rt.start(&start_cmd("s1", script));
    h.log_shows("s1", "UP").await;
    assert!(
        container_id(&h.name("s1")).is_some(),
        "running under its fixed name"
    );
    h.rt.stop("acme/s1", Duration::from_secs(10), 1);
    let exit = h.exit_of("s1").await;
    assert!(exit.stopped && exit.code == Some(0), "{exit:?}");
    assert!(h.log("s1").contains("GOT-TERM"), "{}", h.log("s1"));
    assert_eq!(
        container_id(&h.name("s1")),
        None,
        "gone when the exit is reported"
    );
    // One that ignores SIGTERM is killed after the grace.
    h.rt.start(&start_cmd(
        "s2",
        "trap '' TERM; echo UP; while true; do sleep 0.1; done",
    ));
    h.log_shows("s2", "UP").await;
    h.rt.stop("acme/s2", Duration::from_millis(300), 1);
    let exit = h.exit_of("s2").await;
    assert!(exit.stopped, "{exit:?}");
    assert_eq!(container_id(&h.name("s2")), None);
}

#[tokio::test]
async fn a_restarted_agent_adopts_the_same_container_and_removes_orphans() {
    let mut h = harness();
    h.rt.start(&start_cmd("ad", "echo UP; while true; do sleep 0.1; done"));
    h.log_shows("ad", "UP").await;
    let before = container_id(&h.name("ad")).expect("running");
    // An orphan of this agent's (an allocation it does not hold) and a
    // container of another agent's on the same host.
    let orphan = format!("caldera-test-orphan-{}", std::process::id());
    let stranger = format!("caldera-test-stranger-{}", std::process::id());
    for (name, node) in [
        (&orphan, h.node.clone()),
        (&stranger, "someone-else".to_string()),
    ] {
        container_host::podman(&[
            "run",
            "-d",
            "--name",
            name,
            "--label",
            &format!("caldera.node={node}"),
            "--label",
            "caldera.allocation=acme/gone",
            "--pull=never",
            SEED_IMAGE,
            "sleep",
            "60",
        ])
        .unwrap();
    }
    // The agent goes (its runtime dropped without stopping anything), and
    // the next one on the same data dir adopts.
    let (mut reborn, mut notes, _) = runtime(&h.data, Isolation::None("test".into()), 256);
    let adopted = reborn.adopt_shims();
    assert_eq!(adopted.running, 1, "{adopted:?}");
    assert_eq!(reborn.remove_orphaned_containers(), 1);
    assert_eq!(container_id(&orphan), None, "the orphan is removed");
    // After a welcome the sweep runs off the loop: its listing comes back
    // as a note, and only what is still not held is removed.
    container_host::podman(&[
        "run",
        "-d",
        "--name",
        &orphan,
        "--label",
        &format!("caldera.node={}", h.node),
        "--label",
        "caldera.allocation=acme/gone",
        "--pull=never",
        SEED_IMAGE,
        "sleep",
        "60",
    ])
    .unwrap();
    reborn.sweep_orphans();
    let note = tokio::time::timeout(Duration::from_secs(30), notes.recv())
        .await
        .expect("the sweep's listing")
        .expect("notes open");
    reborn.handle(note);
    for _ in 0..200 {
        if container_id(&orphan).is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(container_id(&orphan), None, "the swept orphan is removed");
    assert!(
        container_id(&stranger).is_some(),
        "another agent's container is not touched"
    );
    let _ = container_host::podman(&["rm", "-f", "-t", "0", &stranger]);
    assert_eq!(
        container_id(&h.name("ad")),
        Some(before),
        "the same container, not a new one"
    );
    assert!(
        h.log("ad").matches("UP").count() == 1,
        "not restarted: {}",
        h.log("ad")
    );
    // The adopted one is still stopped by name.
    reborn.stop("acme/ad", Duration::ZERO, 1);
    for _ in 0..200 {
        reborn.poll_adopted();
        if reborn.workload("acme/ad").is_some_and(|w| !w.is_alive()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reborn.workload("acme/ad").is_some_and(|w| !w.is_alive()));
    assert_eq!(container_id(&h.name("ad")), None);
}

#[tokio::test]
async fn limits_hold_a_fork_flood_meets_the_pids_limit_and_an_oom_kill_is_named() {
    let mut h = harness_with_cgroups(64);
    // The flood runs in a subshell (a shell whose fork fails gives up), then
    // the processes are counted without forking (a glob).
    let script = "(i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); done) 2>/dev/null; \
                  set -- /proc/[0-9]*; echo PROCS=$#";
    h.rt.start(&start_cmd("fork", script));
    let exit = h.exit_of("fork").await;
    let log = h.log("fork");
    let procs: u32 = log
        .split("PROCS=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            let shim_log = std::fs::read_to_string(h.data.join("shims/acme+fork/shim.log"));
            panic!("no count in {log:?} ({exit:?}; shim: {shim_log:?})")
        });
    assert!(procs <= 64, "{procs} processes under a limit of 64: {log}");
    assert!(procs >= 30, "the flood did run ({procs})");
    assert_eq!(exit.code, Some(0), "{exit:?}");
    assert!(!exit.oom_killed);
    // 32 MiB, and a workload that wants far more.
    let mut oom = start_cmd(
        "oom",
        "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo SURVIVED",
    );
    oom.memory_mb = 32;
    h.rt.start(&oom);
    let exit = h.exit_of("oom").await;
    assert!(exit.oom_killed, "{exit:?}: {}", h.log("oom"));
    assert!(!h.log("oom").contains("SURVIVED"));
    assert_eq!(container_id(&h.name("oom")), None);
}

#[tokio::test]
async fn a_command_readiness_probe_runs_inside_the_container() {
    let mut h = harness();
    // A marker only the container's own /tmp will hold.
    let marker = format!("/tmp/caldera-ready-{}", std::process::id());
    let mut cmd = start_cmd(
        "probe",
        &format!("sleep 1; touch {marker}; echo UP; sleep 60"),
    );
    cmd.readiness = Some(caldera_spec::ReadinessProbe {
        http_path: None,
        command: vec!["test".into(), "-f".into(), marker.clone()],
        period_s: 1,
        timeout_s: 5,
        failure_threshold: 3,
        ready_timeout_s: 60,
    });
    h.rt.start(&cmd);
    let ready = h
        .wait_for("probe", |k| {
            matches!(k, WorkloadEventKind::Readiness { ready: true, .. })
        })
        .await;
    let WorkloadEventKind::Readiness { detail, .. } = ready else {
        unreachable!()
    };
    assert!(detail.contains("in the container"), "{detail}");
    assert!(
        !Path::new(&marker).exists(),
        "the marker is the container's, not the host's"
    );
}

#[tokio::test]
async fn a_containers_usage_is_measured_from_its_cgroup_not_the_podman_client() {
    let mut h = harness_with_cgroups(256);
    // About 120 MB held by the workload, which is no child of the client
    // (the client alone keeps about 37 MB).
    let script = "x=$(head -c 120000000 /dev/zero | tr '\\0' a); echo HELD; sleep 30; echo ${#x}";
    let mut cmd = start_cmd("use", script);
    cmd.memory_mb = 1024;
    h.rt.start(&cmd);
    h.log_shows("use", "HELD").await;
    h.rt.sample_usage(&Default::default());
    let w = h.rt.workload("acme/use").expect("running");
    assert!(
        w.usage.memory_mb >= 100,
        "the container's memory, not the client's: {:?}",
        w.usage
    );
}

/// Whether `dir` is a mount point (on another device than its parent).
fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    dev(dir).is_some() && dev(dir) != dir.parent().and_then(dev)
}

#[tokio::test]
async fn scratch_holds_the_tasks_disk_size_and_a_write_past_it_fails_inside_the_container() {
    let mut h = harness();
    // The workload fills its scratch, says how that went, then waits for
    // the test to look at the node before it ends.
    let script = "dd if=/dev/zero of=/caldera/scratch/big bs=1M count=200 2>&1; echo DD-EXIT=$?; \
                  df -k /caldera/scratch; echo FILLED; \
                  while [ ! -e /caldera/checkpoints/go ]; do sleep 0.1; done";
    let mut cmd = start_cmd("disk", script);
    // disk.size_gb 0.0625, the least a task may ask for.
    cmd.disk_mb = 64;
    h.rt.start(&cmd);
    let ready = h
        .wait_for("disk", |k| matches!(k, WorkloadEventKind::Ready { .. }))
        .await;
    let WorkloadEventKind::Ready { isolation } = ready else {
        unreachable!()
    };
    assert!(isolation.contains("scratch 64 MiB"), "{isolation}");
    h.log_shows("disk", "FILLED").await;
    let log = h.log("disk");
    assert!(log.contains("No space left on device"), "{log}");
    assert!(!log.contains("DD-EXIT=0"), "the write must fail: {log}");
    let volumes = ScratchVolumes::detect(&h.data);
    let image = volumes.image_of("acme/disk");
    let scratch = volumes.scratch_dir_of("acme/disk");
    assert!(is_mount_point(&scratch), "its own filesystem on the node");
    // Everything it wrote is in its image, which holds at most its size:
    // the node's own disk took at most 64 MiB of the 200 it was asked for.
    let on_disk = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&image).unwrap()) * 512;
    assert!(on_disk <= 64 << 20, "{on_disk} bytes on the node's disk");
    std::fs::write(h.data.join("checkpoints/acme+task-disk/go"), "").unwrap();
    let exit = h.exit_of("disk").await;
    assert_eq!(exit.code, Some(0), "{exit:?}: {log}");
    assert!(
        !image.exists(),
        "the image is deleted once the workload ended"
    );
    assert!(!is_mount_point(&scratch), "and its filesystem unmounted");
    assert!(!scratch.join("big").exists());
    assert_eq!(container_id(&h.name("disk")), None);
}

#[tokio::test]
async fn a_restarted_agent_keeps_an_adopted_containers_scratch_and_releases_a_leftover() {
    let mut h = harness();
    let mut cmd = start_cmd(
        "kept",
        "echo UP; while true; do echo x >> /caldera/scratch/ticks; sleep 0.1; done",
    );
    cmd.disk_mb = 64;
    h.rt.start(&cmd);
    h.log_shows("kept", "UP").await;
    // A filesystem an earlier agent left for an allocation no longer here.
    let volumes = ScratchVolumes::detect(&h.data);
    std::fs::create_dir_all(volumes.scratch_dir_of("acme/gone")).unwrap();
    assert_eq!(
        volumes
            .size("acme/gone", 64, None)
            .map_err(|e| e.to_string()),
        Ok(true)
    );
    let (kept, gone) = (
        volumes.scratch_dir_of("acme/kept"),
        volumes.scratch_dir_of("acme/gone"),
    );
    assert!(is_mount_point(&kept) && is_mount_point(&gone));
    // The agent goes; the next one adopts, then releases what is not held.
    let (mut reborn, _notes, _) = runtime(&h.data, Isolation::None("test".into()), 256);
    assert_eq!(reborn.adopt_shims().running, 1);
    assert_eq!(reborn.release_orphaned_scratch(), 1);
    assert!(!is_mount_point(&gone) && !volumes.image_of("acme/gone").exists());
    assert!(
        is_mount_point(&kept) && volumes.image_of("acme/kept").exists(),
        "the adopted workload keeps its scratch"
    );
    let ticks = || std::fs::metadata(kept.join("ticks")).map_or(0, |m| m.len());
    let before = ticks();
    for _ in 0..100 {
        if ticks() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ticks() > before, "still written through the same mount");
    reborn.stop("acme/kept", Duration::ZERO, 1);
    for _ in 0..200 {
        reborn.poll_adopted();
        if reborn.workload("acme/kept").is_some_and(|w| !w.is_alive()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reborn.workload("acme/kept").is_some_and(|w| !w.is_alive()));
    assert!(!is_mount_point(&kept) && !volumes.image_of("acme/kept").exists());
}
