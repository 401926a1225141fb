//! The scheduling core on hand-built pools: victim choice, protection of
//! restarted work, backfill, estimates. Pure: no actors, time passed in.
use super::core::{Decision, TenantLimits};
use super::fixtures::{core_with, placed, spec, submit, victims};
use caldera_spec::Quota;

#[test]
fn the_cheapest_victim_is_borrowed_then_lower_priority_then_less_gpu_work_lost() {
    let mut c = core_with(&[("a", 2), ("b", 2)]);
    // a: one low 1-GPU task started at t=0, one medium at t=0.
    // b: one low 2-GPU task started at t=0.
    submit(&mut c, "t", spec("a-low", 1, "low", None), 1, 1);
    submit(&mut c, "t", spec("a-med", 1, "medium", None), 2, 1);
    submit(&mut c, "t", spec("b-low2", 2, "low", None), 3, 1);
    assert_eq!(placed(&c.cycle(0)).len(), 3);
    // A high 1-GPU task at t=100 s: on node a, evicting a-low loses 1 GPU x 100 s;
    // on node b, evicting b-low2 loses 2 GPUs x 100 s. a-med is not cheaper
    // (higher priority than a-low). So: a-low.
    submit(&mut c, "t", spec("hi", 1, "high", None), 4, 1);
    let d = c.cycle(100_000);
    assert_eq!(victims(&d), ["a-low"]);
    assert!(d.iter().any(|d| matches!(d, Decision::Pending { task_id, estimated_start_ms: Some(_), .. } if task_id == "hi")));
}

#[test]
fn a_restarted_task_is_protected_for_its_minimum_runtime() {
    let mut c = core_with(&[("a", 1)]);
    // Attempt 2: it was preempted before.
    submit(&mut c, "t", spec("again", 1, "low", None), 1, 2);
    assert_eq!(placed(&c.cycle(0)), ["again"]);
    submit(&mut c, "t", spec("hi", 1, "high", None), 2, 1);
    assert!(
        victims(&c.cycle(10_000)).is_empty(),
        "evicted 10 s after its restart"
    );
    // Past the minimum runtime (60 s) it may be chosen again; a new pass looks
    // again when room changes or a task arrives.
    submit(&mut c, "t", spec("hi2", 1, "high", None), 3, 1);
    assert_eq!(victims(&c.cycle(61_000)), ["again"]);
}

#[test]
fn backfill_starts_short_work_but_not_work_that_would_delay_the_head() {
    let mut c = core_with(&[("a", 2)]);
    submit(&mut c, "t", spec("r1", 1, "medium", Some("00:00:10")), 1, 1);
    submit(&mut c, "t", spec("r2", 1, "medium", Some("00:02:00")), 2, 1);
    assert_eq!(placed(&c.cycle(0)).len(), 2);
    submit(
        &mut c,
        "t",
        spec("head", 2, "medium", Some("00:10:00")),
        3,
        1,
    );
    let d = c.cycle(1_000);
    // The head fits when r2 ends: t = 120 s.
    assert!(d.iter().any(|d| matches!(d, Decision::Pending { task_id, estimated_start_ms: Some(120_000), .. } if task_id == "head")), "{d:#?}");
    submit(
        &mut c,
        "t",
        spec("long", 1, "medium", Some("00:10:00")),
        4,
        1,
    );
    submit(
        &mut c,
        "t",
        spec("short", 1, "medium", Some("00:00:30")),
        5,
        1,
    );
    let r1 = c
        .ledger
        .all()
        .find(|e| e.allocation.task_id == "r1")
        .map(|e| e.allocation.allocation_id.clone())
        .unwrap();
    c.release(&r1);
    let d = c.cycle(11_000);
    assert_eq!(placed(&d), ["short"], "{d:#?}");
    assert!(d.iter().any(|d| matches!(d, Decision::Pending { task_id, reason, .. } if task_id == "long" && reason.contains("waiting behind head"))));
}

#[test]
fn a_pending_reason_is_told_again_when_the_head_it_named_is_replaced() {
    // "a": 2 GPUs; x (medium, 1 GPU, an hour) runs on one.
    let mut c = core_with(&[("a", 2)]);
    submit(&mut c, "t", spec("x", 1, "medium", Some("01:00:00")), 1, 1);
    assert_eq!(placed(&c.cycle(0)), ["x"]);
    // "head" (medium, 2 GPUs) waits for x (it outranks nothing); "later" (medium, 1 GPU, no
    // duration) finds the free GPU but would delay the head.
    submit(&mut c, "t", spec("head", 2, "medium", None), 2, 1);
    submit(&mut c, "t", spec("later", 1, "medium", None), 3, 1);
    let d = c.cycle(1_000);
    let told = |d: &[Decision], id: &str| {
        d.iter().find_map(|d| match d {
            Decision::Pending {
                task_id, reason, ..
            } if task_id == id => Some(reason.clone()),
            _ => None,
        })
    };
    assert!(
        told(&d, "later").is_some_and(|r| r.contains("waiting behind head")),
        "{d:#?}"
    );
    // "urgent" (high, 2 GPUs) arrives and preempts x: the room on "a" is
    // now being freed for it, not reserved for "head".
    submit(&mut c, "t", spec("urgent", 2, "high", None), 4, 1);
    let d = c.cycle(2_000);
    assert_eq!(victims(&d), ["x"]);
    // The next pass (nothing released yet) tells "later" what holds now,
    // and "urgent" keeps its own reason.
    let d = c.cycle(3_000);
    assert!(
        told(&d, "later").is_some_and(|r| r.contains("being freed for urgent")),
        "{d:#?}"
    );
    assert_eq!(told(&d, "urgent"), None, "{d:#?}");
    assert!(placed(&d).is_empty(), "{d:#?}");
}

#[test]
fn a_preemption_whose_room_was_taken_is_over_and_its_task_told_the_truth() {
    use super::fixtures::{running, waiting};
    // "a": 1 GPU held by x (low); "urgent" (high) preempts it.
    let mut c = core_with(&[("a", 1)]);
    running(
        &mut c,
        "a",
        waiting("t", spec("x", 1, "low", None), 1, 1),
        &[0],
        false,
        0,
    );
    submit(&mut c, "t", spec("urgent", 1, "high", None), 2, 1);
    let d = c.cycle(1_000);
    assert_eq!(victims(&d), ["x"]);
    // x stops, but its GPU goes to other work (a grant the queue did not
    // make: restored), low priority as well.
    c.release("x.1");
    running(
        &mut c,
        "a",
        waiting("t", spec("y", 1, "low", None), 3, 1),
        &[0],
        false,
        0,
    );
    // The preemption is over: "urgent" does not sit on "preempting ..."
    // for good, it preempts what holds the room now.
    let d = c.cycle(20_000);
    assert_eq!(victims(&d), ["y"], "{d:#?}");
}

/// A tenant guaranteed one GPU, with nothing to borrow.
fn one_gpu_no_borrowing() -> TenantLimits {
    let gpus = |n: f64| Quota {
        gpus: Some(n),
        ..Quota::default()
    };
    TenantLimits {
        guaranteed: gpus(1.0),
        borrowing_limit: gpus(0.0),
    }
}

#[test]
fn an_over_quota_estimate_is_when_the_tenants_own_work_ends_and_never_in_the_past() {
    let mut c = core_with(&[("a", 4)]);
    c.set_limits("t", one_gpu_no_borrowing());
    submit(
        &mut c,
        "t",
        spec("first", 1, "medium", Some("00:10:00")),
        1,
        1,
    );
    assert_eq!(placed(&c.cycle(5_000)), ["first"]);
    submit(&mut c, "t", spec("second", 1, "medium", None), 2, 1);
    let d = c.cycle(6_000);
    assert!(
        d.iter().any(|d| matches!(d, Decision::Pending { task_id, reason, estimated_start_ms: Some(605_000) } if task_id == "second" && reason.contains("over quota"))),
        "{d:#?}"
    );
    // Past the declared end (the task overran): no estimate rather than a past one.
    // Setting the limits again forces a full pass over the queue.
    c.set_limits("t", one_gpu_no_borrowing());
    let d = c.cycle(700_000);
    for x in &d {
        if let Decision::Pending {
            estimated_start_ms: Some(t),
            ..
        } = x
        {
            assert!(*t >= 700_000, "estimate in the past: {x:?}");
        }
    }
}

#[test]
fn a_request_no_node_could_ever_hold_waits_marked_unschedulable() {
    // Nodes of 2 and 4 GPUs (a lost node counts: it may come back).
    let mut c = core_with(&[("a", 2), ("b", 4)]);
    c.node_down("b");
    submit(&mut c, "t", spec("nine", 9, "medium", None), 1, 1);
    submit(&mut c, "t", spec("four", 4, "medium", None), 2, 1);
    let d = c.cycle(0);
    let reason = |id: &str| {
        d.iter().find_map(|d| match d {
            Decision::Pending {
                task_id, reason, ..
            } if task_id == id => Some(reason.clone()),
            _ => None,
        })
    };
    assert_eq!(
        reason("nine").as_deref(),
        Some("unschedulable: no node has 9 GPUs; the largest has 4")
    );
    assert!(
        reason("four").is_some_and(|r| !r.starts_with("unschedulable")),
        "{d:#?}"
    );
}

#[test]
fn a_cordoned_node_takes_no_new_work_says_so_and_gives_no_victims() {
    let mut c = core_with(&[("a", 1), ("b", 1)]);
    c.set_cordoned("a", true);
    submit(&mut c, "t", spec("low", 1, "low", None), 1, 1);
    assert_eq!(placed(&c.cycle(0)), ["low"]);
    assert!(c.ledger.all().all(|e| e.allocation.node == "b"));
    // b is full and a cordoned: the next waits, and the reason names the cordon.
    submit(&mut c, "t", spec("next", 1, "low", None), 2, 1);
    let d = c.cycle(1_000);
    assert!(placed(&d).is_empty(), "{d:#?}");
    assert!(
        d.iter()
            .any(|d| matches!(d, Decision::Pending { task_id, reason, .. }
        if task_id == "next" && reason.contains("1 cordoned (no new placements)"))),
        "{d:#?}"
    );
    // Cordoning b too: what runs there stays, and no preemption evicts it
    // to make room on a node that takes no new work.
    c.set_cordoned("b", true);
    submit(&mut c, "t", spec("hi", 1, "high", None), 3, 1);
    assert!(victims(&c.cycle(100_000)).is_empty());
    assert_eq!(c.ledger.all().count(), 1);
    // Uncordoned, a takes work again.
    c.set_cordoned("a", false);
    assert_eq!(placed(&c.cycle(101_000)), ["hi"]);
}

/// What the control plane feeds placement about weights: a task naming a
/// registered version carries its weights in its demand, and each node's
/// view carries its cache (another stage filters and scores on them).
#[test]
fn demands_and_node_views_carry_the_weights_the_control_plane_fed() {
    use crate::placement::{NodeWeights, WeightsNeed};
    let mut c = core_with(&[("a", 1)]);
    let need = WeightsNeed {
        model: "llama:v1".into(),
        sha256: "ab".repeat(32),
        size_bytes: 10,
    };
    c.set_model_weights(need.clone());
    let mut s = spec("svc", 1, "medium", None);
    assert_eq!(c.demand_for(&s).weights, None, "no model named");
    s.model = Some("llama:v1".into());
    assert_eq!(c.demand_for(&s).weights, Some(need));
    s.model = Some("llama:v9".into());
    assert_eq!(c.demand_for(&s).weights, None, "not registered");
    let w = NodeWeights {
        capacity_bytes: 100,
        evictable_room_bytes: 90,
        cached: ["ab".repeat(32)].into(),
        warming: Default::default(),
    };
    c.set_node_weights("a", w.clone());
    let view = c.pool.nodes().map(|(_, v)| v.weights.clone()).next();
    assert_eq!(view, Some(w));
}

#[test]
fn a_pass_counts_what_it_decided_and_the_queue_ages_by_priority() {
    use super::fixtures::waiting;
    use crate::placement::rejections::WHOLE_GPUS;
    let mut c = core_with(&[("a", 2)]);
    let queued = |id, gpus, priority, seq, at| {
        let mut w = waiting("t", spec(id, gpus, priority, None), seq, 1);
        w.queued_ms = at;
        w
    };
    // 2 GPUs: `fits` (2) is placed; `low` (1) and `med` (1) then find none idle.
    c.enqueue(queued("fits", 2, "high", 1, 1_000));
    c.enqueue(queued("med", 1, "medium", 2, 3_000));
    c.enqueue(queued("low", 1, "low", 3, 2_000));
    c.enqueue(queued("low2", 1, "low", 4, 5_000));
    assert_eq!(placed(&c.cycle(10_000)), ["fits"]);
    let o = c.take_outcomes();
    assert_eq!((o.placed, o.preempting, o.rejected_total()), (1, 0, 3));
    assert_eq!(o.rejections().collect::<Vec<_>>(), vec![(WHOLE_GPUS, 3)]);
    assert_eq!(c.take_outcomes().rejected_total(), 0, "taken once");
    // Highest priority first; each with its count and its oldest arrival.
    let depths: Vec<_> = c
        .queue_depths()
        .into_iter()
        .map(|d| (d.priority.label(), d.tasks, d.oldest_queued_ms))
        .collect();
    assert_eq!(
        depths,
        vec![("medium".into(), 1, 3_000), ("low".into(), 2, 2_000)]
    );
}

/// Replica `i` of the inference service `svc` asking 10 GB of one GPU.
fn replica(i: u32, max_per_node: Option<u32>) -> caldera_spec::TaskSpec {
    let limit = max_per_node
        .map(|m| format!(r#","max_replicas_per_node":{m}"#))
        .unwrap_or_default();
    let body = format!(
        r#"{{"task_id":"svc","task_type":"inference","resources":{{"gpu":{{"count":1,"memory_gb":10}},"cpu":{{"cores":1}}}}{limit}}}"#
    );
    let mut spec = caldera_spec::parse_task_spec(body.as_bytes()).expect("a valid service spec");
    // A replica's id is reserved to the control plane: set, not parsed.
    spec.task_id = format!("svc.r{i}");
    spec
}

#[test]
fn a_services_replicas_spread_over_nodes_then_gpus_and_a_set_limit_holds() {
    // Two nodes of 2 A100s: 10 GB replicas would all fit on one GPU.
    for (limit, third) in [(None, "placed"), (Some(1), "pending")] {
        let mut c = core_with(&[("a", 2), ("b", 2)]);
        for i in 0..3 {
            submit(&mut c, "t", replica(i, limit), i as u64 + 1, 1);
        }
        let d = c.cycle(0);
        let mut gpus = std::collections::BTreeSet::new();
        let mut nodes = std::collections::BTreeMap::<String, u32>::new();
        for d in &d {
            if let Decision::Place { allocation, note } = d {
                gpus.insert((allocation.node.clone(), allocation.gpus[0].index));
                *nodes.entry(allocation.node.clone()).or_default() += 1;
                if allocation.task_id == "svc.r2" {
                    assert_eq!(*note, Some("placed without spread"));
                }
            }
        }
        // r0 and r1 on a and b; r2 (default) on a third GPU of either.
        assert_eq!(nodes.len(), 2, "{limit:?}: {d:?}");
        let placed_ids = placed(&d);
        assert_eq!(gpus.len(), placed_ids.len(), "no GPU shared: {d:?}");
        let r2 = d.iter().find_map(|d| match d {
            Decision::Pending {
                task_id, reason, ..
            } if task_id == "svc.r2" => Some(reason),
            _ => None,
        });
        match third {
            "placed" => assert_eq!(placed_ids.len(), 3),
            _ => assert_eq!(
                r2.map(String::as_str),
                Some("2 nodes: 2 at max_replicas_per_node=1 for this service")
            ),
        }
    }
}

#[test]
fn a_replicas_dry_run_keeps_the_spread_a_pass_would() {
    // One node of 1 A100, r0 on it: a 10 GB surge replica of the same
    // service would find room on the GPU, but not beside its sibling.
    let mut c = core_with(&[("a", 1)]);
    submit(&mut c, "t", replica(0, None), 1, 1);
    assert_eq!(placed(&c.cycle(0)).len(), 1);
    let d = c.dry_run("svc.r1000", "t", &replica(1000, None), 0);
    assert!(!d.placeable, "{d:?}");
    assert!(
        d.reason
            .as_deref()
            .is_some_and(|r| r.contains("serving this service")),
        "{d:?}"
    );
    // Another service's replica fits there.
    let mut other = replica(0, None);
    other.task_id = "other.r0".into();
    assert!(c.dry_run("other.r0", "t", &other, 0).placeable);
}

#[test]
fn a_pages_queue_positions_are_its_tasks_places_in_the_whole_line() {
    // One 1-GPU node holding tenant a's task: a's dominant share is above
    // b's (0), so among equal priorities b's tasks come first.
    let mut c = core_with(&[("n", 1)]);
    c.set_limits("a", one_gpu_no_borrowing());
    submit(&mut c, "a", spec("a-held", 1, "medium", None), 1, 1);
    assert_eq!(placed(&c.cycle(0)), ["a-held"]);
    let waiting = [
        ("a", "a-med-1", "medium", 2),
        ("b", "b-med-9", "medium", 9),
        ("a", "a-low", "low", 3),
        ("b", "b-high", "high", 8),
        ("a", "a-med-4", "medium", 4),
        ("b", "b-med-5", "medium", 5),
    ];
    for (tenant, id, prio, seq) in waiting {
        submit(&mut c, tenant, spec(id, 1, prio, None), seq, 1);
    }
    let whole = c.queue_positions();
    assert_eq!(whole.len(), 6);
    // high first; then b's mediums (share 0) by arrival; then a's; then low.
    let line = [
        "b-high", "b-med-5", "b-med-9", "a-med-1", "a-med-4", "a-low",
    ];
    for (i, id) in line.iter().enumerate() {
        assert_eq!(whole[*id], i as u32 + 1, "{id}");
    }
    // Any page: the same places, for its waiting tasks only.
    for page in [
        &["a-low", "b-high"][..],
        &["a-med-4", "a-held", "nope", "b-med-9"],
        &line,
    ] {
        let ids: Vec<String> = page.iter().map(|s| s.to_string()).collect();
        let some = c.queue_positions_of(&ids);
        let want: std::collections::HashMap<String, u32> = ids
            .iter()
            .filter_map(|id| Some((id.clone(), *whole.get(id)?)))
            .collect();
        assert_eq!(some, want, "page {page:?}");
    }
}
