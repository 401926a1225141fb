//! Stage 4, backfill (EASY): the first task in line that finds no room becomes
//! the head, and the node and time where it would first fit are reserved for
//! it. A later task that does find room may start on the head's node only if
//! it cannot delay the head: it outranks the head, or it declared a duration
//! that ends by the head's start. Elsewhere, or with a head whose start is
//! unknown (it fits nowhere given what is known), nothing is held back.
use super::super::estimate;
use super::super::{Core, Waiting};

/// Room held for one task: the queue head, or a task whose victims are being
/// stopped (which backfill may not take at all: it is about to be freed).
#[derive(Debug, Clone)]
pub struct Reservation {
    pub task_id: String,
    pub priority: u16,
    pub node: String,
    pub start_ms: Option<u64>,
    pub preempting: bool,
}

/// A task that found room on `node`, as backfill sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub task_id: &'a str,
    pub priority: u16,
    pub duration_ms: Option<u64>,
    pub node: &'a str,
}

/// Why starting `c` now would delay the head's reserved start; `None` when it
/// may start.
pub fn blocks(head: Option<&Reservation>, c: Candidate, now_ms: u64) -> Option<String> {
    let h = head?;
    if h.task_id == c.task_id || h.node != c.node || c.priority > h.priority {
        return None;
    }
    let node = c.node;
    // Task ids are keys `tenant/id`: a waiting task learns only its own
    // tenant's ids, never another tenant's.
    let head_name = caldera_spec::as_seen_by(caldera_spec::tenant_of(c.task_id), &h.task_id);
    if h.preempting {
        return Some(format!("room on {node} is being freed for {head_name}"));
    }
    let start = h.start_ms?;
    match c.duration_ms {
        Some(d) if now_ms + d <= start => None,
        _ => Some(format!(
            "waiting behind {head_name} (earlier in the queue): starting now on {node} would delay it; backfill needs a declared duration that ends before {}",
            caldera_spec::time::rfc3339(start)
        )),
    }
}

impl Core {
    /// Why `w`, placed on `node`, may not start now (see [`blocks`]).
    pub(in crate::queue) fn backfill_blocks(
        &self,
        id: &str,
        w: &Waiting,
        node: &str,
        now_ms: u64,
    ) -> Option<String> {
        let candidate = Candidate {
            task_id: id,
            priority: w.task.spec.priority.0,
            duration_ms: w.task.spec.duration_ms(),
            node,
        };
        blocks(self.head.as_ref(), candidate, now_ms)
    }

    /// Makes `w`, which found no room, the head if there is none yet: its
    /// estimated start and node are reserved and become its estimate.
    pub(in crate::queue) fn reserve_head(&mut self, id: &str, w: &Waiting, now_ms: u64) {
        if self.head.is_some() {
            return;
        }
        let task = [((*w.demand).clone(), w.task.spec.duration_ms())];
        let first = estimate::queue_starts(self, &task, now_ms);
        let (start, node) = first
            .into_iter()
            .next()
            .flatten()
            .map_or((None, String::new()), |(t, n)| (Some(t), n));
        self.head = Some(Reservation {
            task_id: id.to_string(),
            priority: w.task.spec.priority.0,
            node,
            start_ms: start,
            preempting: false,
        });
        self.estimates.insert(id.to_string(), start);
    }

    /// Before a full pass: a preemption in flight keeps its room while a
    /// victim of it is still stopping; any other head is chosen again, since
    /// the room it was reserved against changed. A preemption whose victims
    /// have all stopped is over: its task fits now or is told why not (the
    /// room may have gone to another task), and may preempt again.
    pub(in crate::queue) fn reconsider_head(&mut self) {
        self.head = self.head.take().filter(|h| {
            h.preempting
                && self.waiting.contains_key(&h.task_id)
                && self.ledger.on_node(&h.node).any(|e| e.preempting)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEDIUM: u16 = 500;

    /// The head "head", medium priority, reserved on node "x" from t = 120 s.
    fn head(start_ms: Option<u64>, preempting: bool) -> Reservation {
        Reservation {
            task_id: "head".into(),
            priority: MEDIUM,
            node: "x".into(),
            start_ms,
            preempting,
        }
    }

    fn on(
        node: &'static str,
        task_id: &'static str,
        priority: u16,
        secs: Option<u64>,
    ) -> Candidate<'static> {
        Candidate {
            task_id,
            priority,
            duration_ms: secs.map(|s| s * 1000),
            node,
        }
    }

    #[test]
    fn backfill_may_start_only_what_ends_before_the_heads_reserved_start() {
        let now = 11_000;
        let reserved = head(Some(120_000), false);
        // (head, candidate, blocked?) — now = 11 s, the head starts at 120 s.
        let rows = [
            // 11 + 30 = 41 s <= 120 s: ends before the head starts -> allowed.
            (&reserved, on("x", "short", MEDIUM, Some(30)), false),
            // 11 + 109 = 120 s <= 120 s: ends exactly at the start -> allowed.
            (&reserved, on("x", "just", MEDIUM, Some(109)), false),
            // 11 + 110 = 121 s > 120 s: would delay the head by 1 s -> blocked.
            (&reserved, on("x", "late", MEDIUM, Some(110)), true),
            // 11 + 600 = 611 s > 120 s -> blocked.
            (&reserved, on("x", "long", MEDIUM, Some(600)), true),
            // No declared duration: assumed never to end -> blocked.
            (&reserved, on("x", "open", MEDIUM, None), true),
            // Lower priority (100 < 500), short: same rule -> allowed.
            (&reserved, on("x", "low", 100, Some(30)), false),
            // Higher priority (900 > 500): outranks the head -> allowed.
            (&reserved, on("x", "high", 900, None), false),
            // Another node ("y"): the head holds nothing there -> allowed.
            (&reserved, on("y", "elsewhere", MEDIUM, None), false),
            // The head itself found room -> allowed.
            (&reserved, on("x", "head", MEDIUM, None), false),
        ];
        for (h, c, blocked) in rows {
            let why = blocks(Some(h), c, now);
            assert_eq!(why.is_some(), blocked, "{}: {why:?}", c.task_id);
        }
        // The reason names the head, the node and the reserved start.
        assert_eq!(
            blocks(Some(&reserved), on("x", "long", MEDIUM, Some(600)), now).as_deref(),
            Some(
                "waiting behind head (earlier in the queue): starting now on x would delay it; \
                 backfill needs a declared duration that ends before 1970-01-01T00:02:00.000Z"
            )
        );
    }

    #[test]
    fn a_head_being_freed_holds_its_node_and_an_unknown_start_holds_nothing() {
        let now = 11_000;
        // (head, candidate, why not)
        let rows = [
            // No head: nothing to delay.
            (None, on("x", "open", MEDIUM, None), None),
            // Start unknown (it fits nowhere yet): nothing can delay it.
            (Some(head(None, false)), on("x", "open", MEDIUM, None), None),
            // Victims on x are stopping for the head: even 11 + 1 = 12 s
            // <= 120 s may not take their room.
            (
                Some(head(Some(120_000), true)),
                on("x", "short", MEDIUM, Some(1)),
                Some("room on x is being freed for head"),
            ),
            // ...unless it outranks the head (900 > 500).
            (
                Some(head(Some(120_000), true)),
                on("x", "high", 900, None),
                None,
            ),
        ];
        for (h, c, want) in rows {
            assert_eq!(blocks(h.as_ref(), c, now).as_deref(), want, "{}", c.task_id);
        }
    }
}
