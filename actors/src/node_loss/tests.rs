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
fn loss_notice_gives_the_silence_and_the_fenced_epoch() {
    assert_eq!(
        loss_notice("n1", Duration::from_millis(12_345), 8),
        "node n1 silent for 12.3s: lost; epoch fenced to 8; its tasks are requeued"
    );
}
