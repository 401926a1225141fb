//! The hello reconciliation, row by row: what the ledger says the node owns,
//! what the node reported, and what each side must hear.
use super::*;
use crate::fixtures::allocation;

fn owned(id: &str) -> Allocation {
    allocation(id, &format!("task-{id}"), "n1")
}

fn running(id: &str) -> WorkloadReport {
    WorkloadReport {
        allocation_id: id.into(),
        task_id: format!("task-{id}"),
        epoch: 1,
        pid: Some(100),
        exit: None,
        usage: Default::default(),
        warming: false,
        ready: None,
        generation: 0,
        port: None,
    }
}

fn exited(id: &str, code: i32) -> WorkloadReport {
    WorkloadReport {
        exit: Some(status(code)),
        pid: None,
        ..running(id)
    }
}

fn status(code: i32) -> ExitStatus {
    ExitStatus {
        code: Some(code),
        signal: None,
        stopped: false,
        oom_killed: false,
    }
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn missing(v: &[&str]) -> Vec<MissingWorkload> {
    v.iter()
        .map(|id| MissingWorkload {
            task_id: format!("task-{id}"),
            allocation_id: id.to_string(),
        })
        .collect()
}

fn exit_of(id: &str, code: i32) -> ReportedExit {
    ReportedExit {
        task_id: format!("task-{id}"),
        allocation_id: id.into(),
        status: status(code),
    }
}

struct Row {
    why: &'static str,
    owned: Vec<Allocation>,
    reported: Vec<WorkloadReport>,
    want: Reconciliation,
}

#[test]
fn hello_reconciliation() {
    let rows = vec![
        Row {
            why: "owned {a,b}, reported {b,c}: keep b, kill c (fenced), a's workload is missing",
            owned: vec![owned("a"), owned("b")],
            reported: vec![running("b"), running("c")],
            want: Reconciliation {
                keep: ids(&["b"]),
                kill: ids(&["c"]),
                missing: missing(&["a"]),
                exits: vec![],
            },
        },
        Row {
            why: "a kept workload that exited while the node was away: its exit is forwarded",
            owned: vec![owned("a")],
            reported: vec![exited("a", 0)],
            want: Reconciliation {
                keep: ids(&["a"]),
                exits: vec![exit_of("a", 0)],
                ..Default::default()
            },
        },
        Row {
            why: "a fenced workload's exit is not forwarded: the allocation is no longer the node's",
            owned: vec![],
            reported: vec![exited("c", 1)],
            want: Reconciliation {
                kill: ids(&["c"]),
                ..Default::default()
            },
        },
        Row {
            why: "nothing owned, nothing reported: a fresh node",
            owned: vec![],
            reported: vec![],
            want: Reconciliation::default(),
        },
        Row {
            why: "owned but the node reports nothing (it restarted without its shims): all missing",
            owned: vec![owned("a"), owned("b")],
            reported: vec![],
            want: Reconciliation {
                missing: missing(&["a", "b"]),
                ..Default::default()
            },
        },
        Row {
            why: "a workload reported twice: kept once, its first exit forwarded once",
            owned: vec![owned("a")],
            reported: vec![running("a"), exited("a", 3), exited("a", 4)],
            want: Reconciliation {
                keep: ids(&["a"]),
                exits: vec![exit_of("a", 3)],
                ..Default::default()
            },
        },
        Row {
            why: "a stale workload reported twice: killed once",
            owned: vec![],
            reported: vec![running("c"), running("c")],
            want: Reconciliation {
                kill: ids(&["c"]),
                ..Default::default()
            },
        },
        Row {
            why: "keep and kill follow the node's report order, so the fencing event reads the same every time",
            owned: vec![owned("b"), owned("a")],
            reported: vec![running("d"), running("a"), running("c"), running("b")],
            want: Reconciliation {
                keep: ids(&["a", "b"]),
                kill: ids(&["d", "c"]),
                ..Default::default()
            },
        },
    ];
    let n = rows.len();
    for (i, r) in rows.into_iter().enumerate() {
        let got = reconcile(&r.owned, &r.reported);
        assert_eq!(got, r.want, "row {} of {n}: {}", i + 1, r.why);
    }
}

#[test]
fn kill_notice_names_what_is_killed() {
    let r = reconcile(&[], &[running("c"), running("d")]);
    assert_eq!(
        r.kill_notice("n1").as_deref(),
        Some("node n1 told to kill workloads it no longer owns: c, d")
    );
    assert_eq!(
        reconcile(&[owned("a")], &[running("a")]).kill_notice("n1"),
        None
    );
}

#[test]
fn join_notice_says_whether_the_node_returned() {
    let inv = NodeInventory {
        runtimes: Vec::new(),
        hostname: "h".into(),
        gpus: vec![],
        cpu_cores: 8,
        memory_total_mb: 4096,
        disks: vec![],
        disk_offered_mb: 0,
        labels: Default::default(),
        simulated_host: true,
        isolation: "none".into(),
        gpu_source: "none".into(),
    };
    assert_eq!(
        join_notice("n1", 4, true, &inv),
        "node n1 joined with epoch 4 (returned after loss): 0 GPUs (simulated), 8 cores, 4096 MiB memory, isolation none"
    );
    let real = NodeInventory {
        simulated_host: false,
        ..inv
    };
    assert!(join_notice("n1", 1, false, &real).contains("(session): 0 GPUs, 8 cores"));
}
