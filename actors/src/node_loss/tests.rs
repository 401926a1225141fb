//! The node-loss fan-out, row by row.
use super::*;
use crate::fixtures::allocation;

fn on(node: &str, id: &str, task: &str) -> Allocation {
    allocation(id, task, node)
}

#[test]
fn who_hears_of_a_lost_node() {
    let rows: Vec<(&str, Vec<Allocation>, Vec<&str>)> = vec![
        (
            "nothing allocated on the node: no one to tell",
            vec![],
            vec![],
        ),
        (
            "each task with an allocation there hears once, in ledger order",
            vec![on("n1", "a1", "t1"), on("n1", "a2", "t2")],
            vec!["t1", "t2"],
        ),
        (
            "a task with two allocations there (a stale one not yet freed) hears once",
            vec![on("n1", "a1", "t1"), on("n1", "a0", "t1")],
            vec!["t1"],
        ),
        (
            "an allocation on another node is not this loss's business",
            vec![on("n2", "a3", "t3"), on("n1", "a1", "t1")],
            vec!["t1"],
        ),
    ];
    for (why, allocs, want) in rows {
        assert_eq!(tasks_to_tell("n1", &allocs), want, "{why}");
    }
}

#[test]
fn loss_notice_gives_the_silence_the_fenced_epoch_and_the_fence() {
    assert_eq!(
        loss_notice("n1", Duration::from_millis(12_345), 8, Duration::from_millis(32_000)),
        "node n1 silent for 12.3s: lost; epoch fenced to 8; its tasks are requeued (`fence` ones in 32.0s, once its lease has run out)"
    );
}

#[test]
fn a_fence_waits_out_the_rest_of_the_lease_the_grace_and_the_margin() {
    let ms = Duration::from_millis;
    let rows: Vec<(&str, u64, u64, u64, u64)> = vec![
        // (why, ms since the last renewal, lease, grace, expected wait)
        // 30000 + 10000 + 500 - 4000 = 36500
        (
            "lost 4 s after the last renewal, default lease and grace",
            4_000,
            30_000,
            10_000,
            36_500,
        ),
        // 2000 + 2000 + 500 - 1750 = 2750
        ("the tests' short lease", 1_750, 2_000, 2_000, 2_750),
        // 2000 + 2000 + 500 = 4500 <= 4500: nothing left
        ("exactly over", 4_500, 2_000, 2_000, 0),
        (
            "long over (a node lost long after its last renewal)",
            60_000,
            2_000,
            2_000,
            0,
        ),
    ];
    for (why, since, lease, grace, want) in rows {
        assert_eq!(
            fence_wait(ms(since), ms(lease), ms(grace)),
            ms(want),
            "{why}"
        );
    }
}
