//! The resync's comparison, row by row: what the books say the node owns,
//! what the node holds, and what each side must hear.
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

fn news(id: &str, kind: WorkloadEventKind) -> TaskNews {
    TaskNews {
        task_id: format!("task-{id}"),
        allocation_id: id.into(),
        kind,
    }
}

fn exit_of(id: &str, code: i32) -> TaskNews {
    news(id, WorkloadEventKind::Exited(status(code)))
}

/// A running workload's start, as `running(id)` reports it.
fn started(id: &str) -> TaskNews {
    news(
        id,
        WorkloadEventKind::Started {
            pid: Some(100),
            port: None,
            image_digest: None,
        },
    )
}

struct Row {
    why: &'static str,
    owned: Vec<Allocation>,
    reported: Vec<WorkloadReport>,
    want: Plan,
}

#[test]
fn hello_plan() {
    let rows = vec![
        Row {
            why: "owned {a,b}, reported {b,c}: keep b, kill c (fenced), a's workload is missing",
            owned: vec![owned("a"), owned("b")],
            reported: vec![running("b"), running("c")],
            want: Plan {
                keep: ids(&["b"]),
                kill: ids(&["c"]),
                missing: missing(&["a"]),
                news: vec![started("b")],
            },
        },
        Row {
            why: "a kept workload that exited while the node was away: its exit is forwarded",
            owned: vec![owned("a")],
            reported: vec![exited("a", 0)],
            want: Plan {
                keep: ids(&["a"]),
                news: vec![exit_of("a", 0)],
                ..Default::default()
            },
        },
        Row {
            why: "a fenced workload's exit is not forwarded: the allocation is no longer the node's",
            owned: vec![],
            reported: vec![exited("c", 1)],
            want: Plan {
                kill: ids(&["c"]),
                ..Default::default()
            },
        },
        Row {
            why: "nothing owned, nothing reported: a fresh node",
            owned: vec![],
            reported: vec![],
            want: Plan::default(),
        },
        Row {
            why: "owned but the node reports nothing (it restarted without its shims): all missing",
            owned: vec![owned("a"), owned("b")],
            reported: vec![],
            want: Plan {
                missing: missing(&["a", "b"]),
                ..Default::default()
            },
        },
        Row {
            why: "a workload reported twice: kept once, its first exit forwarded once",
            owned: vec![owned("a")],
            reported: vec![running("a"), exited("a", 3), exited("a", 4)],
            want: Plan {
                keep: ids(&["a"]),
                news: vec![exit_of("a", 3)],
                ..Default::default()
            },
        },
        Row {
            why: "a stale workload reported twice: killed once",
            owned: vec![],
            reported: vec![running("c"), running("c")],
            want: Plan {
                kill: ids(&["c"]),
                ..Default::default()
            },
        },
        Row {
            why: "keep and kill follow the node's report order, so the fencing event reads the same every time",
            owned: vec![owned("b"), owned("a")],
            reported: vec![running("d"), running("a"), running("c"), running("b")],
            want: Plan {
                keep: ids(&["a", "b"]),
                kill: ids(&["d", "c"]),
                news: vec![started("a"), started("b")],
                ..Default::default()
            },
        },
        Row {
            why: "a kept workload that runs: its task hears the start with its port, then its last readiness",
            owned: vec![owned("a")],
            reported: vec![WorkloadReport {
                port: Some(20001),
                ready: Some(true),
                generation: 2,
                ..running("a")
            }],
            want: Plan {
                keep: ids(&["a"]),
                news: vec![
                    news(
                        "a",
                        WorkloadEventKind::Started {
                            pid: Some(100),
                            port: Some(20001),
                            image_digest: None,
                        },
                    ),
                    news(
                        "a",
                        WorkloadEventKind::Readiness {
                            ready: true,
                            generation: 2,
                            detail: "as the node holds it (resync)".into(),
                        },
                    ),
                ],
                ..Default::default()
            },
        },
        Row {
            why: "a kept workload still warming has started nothing: kept, its task hears nothing",
            owned: vec![owned("a")],
            reported: vec![WorkloadReport {
                warming: true,
                pid: None,
                ..running("a")
            }],
            want: Plan {
                keep: ids(&["a"]),
                ..Default::default()
            },
        },
    ];
    let n = rows.len();
    for (i, r) in rows.into_iter().enumerate() {
        let got = plan(&r.owned, &r.reported, Occasion::Hello);
        assert_eq!(got, r.want, "row {} of {n}: {}", i + 1, r.why);
    }
}

#[test]
fn kill_notice_names_what_is_killed() {
    let r = plan(&[], &[running("c"), running("d")], Occasion::Hello);
    assert_eq!(
        r.kill_notice("n1").as_deref(),
        Some("node n1 told to kill workloads it no longer owns: c, d")
    );
    assert_eq!(
        plan(&[owned("a")], &[running("a")], Occasion::Hello).kill_notice("n1"),
        None
    );
}

/// Within a session a start may still be on its way to the node: what the
/// node does not report is not missing; the rest is as on a hello.
#[test]
fn a_digest_plan_takes_nothing_for_missing() {
    let owned_ = vec![owned("a"), owned("b")];
    let reported = vec![running("b"), exited("c", 0)];
    let hello = plan(&owned_, &reported, Occasion::Hello);
    let digest = plan(&owned_, &reported, Occasion::Digest);
    assert_eq!(hello.missing, missing(&["a"]));
    assert_eq!(
        digest,
        Plan {
            missing: vec![],
            ..hello
        }
    );
    assert_eq!(digest.keep, ids(&["b"]));
    assert_eq!(digest.kill, ids(&["c"]));
    assert_eq!(digest.news, vec![started("b")]);
}
