//! A node speaks only for itself. What a node's session may
//! say is checked here: which allocations it holds under which epoch, whether a
//! hello's secret matches the name, whether a checkpoint path lies inside the
//! task's own checkpoint dir. Whatever is refused is counted per node and
//! reason (shown on `/metrics`) and recorded as an event naming the node, so
//! an operator sees a misbehaving or hostile agent instead of its effects.
pub use crate::refusals::{Refusal, Refusals};
use crate::shared::Shared;
use caldera_spec::{Event, EventKind};
use std::collections::{HashMap, HashSet};
use std::path::{Component, Path};

/// Counts one refusal and records it as an event naming the node; `what`
/// says what was refused (it names the allocation when there is one).
pub fn refuse(sh: &Shared, node: &str, why: Refusal, what: &str) {
    sh.refusals.bump(node, why);
    let code = why.code();
    tracing::warn!(node, reason = why.label(), code = code.code, "{what}");
    let msg = format!(
        "refused from node {node} ({}, {} {}): {what}",
        why.label(),
        code.code,
        code.name
    );
    sh.record(Event::new(sh.now_ms(), EventKind::NodeRefused, msg).node(node));
}

/// The allocations one session of a node may speak for.
#[derive(Default)]
pub struct Held {
    /// allocation id -> task id: what the ledger had on the node at the hello,
    /// and every start sent since.
    tasks: HashMap<String, String>,
    /// Reported at the hello but no longer the node's: it was told to kill
    /// them, and their last reports are dropped without counting.
    fenced: HashSet<String>,
}

/// What to do with one event or report of the node's.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Forward it to this task.
    Accept(String),
    /// Drop it quietly (a workload the node was just told to kill).
    Drop,
    Refuse(Refusal),
}

impl Held {
    /// A new session: what the ledger has on the node, and what it must kill.
    pub fn reset(&mut self, owned: impl Iterator<Item = (String, String)>, kill: &[String]) {
        self.tasks = owned.collect();
        self.fenced = kill.iter().cloned().collect();
    }

    /// A resync within the session told the node to stop these: their
    /// last reports are dropped without counting, as at a hello.
    pub fn fence(&mut self, kill: &[String]) {
        self.fenced.extend(kill.iter().cloned());
    }

    /// The task `allocation_id` is held for, if it is held.
    pub fn task_of(&self, allocation_id: &str) -> Option<String> {
        self.tasks.get(allocation_id).cloned()
    }

    pub fn insert(&mut self, allocation_id: &str, task_id: &str) {
        self.fenced.remove(allocation_id);
        self.tasks
            .insert(allocation_id.to_string(), task_id.to_string());
    }

    /// Whether `allocation_id` (named with `task_id`, `epoch`) is the node's
    /// to speak for under `current` epoch. An empty task id (a stop's answer
    /// for an allocation the agent never saw) names no task and is dropped.
    pub fn check(&self, current: u64, epoch: u64, allocation_id: &str, task_id: &str) -> Verdict {
        if self.fenced.contains(allocation_id) {
            return Verdict::Drop;
        }
        let Some(task) = self.tasks.get(allocation_id) else {
            return Verdict::Refuse(Refusal::NotHeld);
        };
        if epoch != current {
            return Verdict::Refuse(Refusal::StaleEpoch);
        }
        if task_id.is_empty() {
            return Verdict::Drop;
        }
        if task != task_id {
            return Verdict::Refuse(Refusal::WrongTask);
        }
        Verdict::Accept(task.clone())
    }
}

/// Whether a hello may open a session for `rec`'s name: not revoked, the
/// name's secret presented (a record without one, new or from before node
/// secrets, is claimed by this hello), no live session. `Ok(true)`: issue a
/// new secret with the welcome.
pub fn admit(
    rec: &caldera_spec::NodeRecord,
    live: bool,
    presented: Option<&str>,
    book: &crate::tokens::TokenBook,
) -> Result<bool, Refusal> {
    if rec.revoked {
        return Err(Refusal::Revoked);
    }
    let issue = match (&rec.secret_sha256, presented) {
        (None, _) => true,
        (Some(h), Some(p)) if book.matches(h, p) => false,
        (Some(_), _) => return Err(Refusal::BadSecret),
    };
    if live {
        return Err(Refusal::LiveSession);
    }
    Ok(issue)
}

/// Whether `path` is strictly inside the checkpoint dir the agent makes for
/// `task_id` under `data_dir`: `<data_dir>/checkpoints/<task>`, the task's own
/// tree, or the spec's relative dir inside that tree (a spec dir is confined
/// to its task's tree, so one tenant's task cannot name another's
/// checkpoints). Only absolute, lexically normal paths count: no `.` or `..`
/// to climb out with.
pub fn checkpoint_inside(
    path: &str,
    data_dir: &str,
    task_id: &str,
    spec_dir: Option<&str>,
) -> bool {
    if data_dir.is_empty() || !normal_absolute(path) || !normal_absolute(data_dir) {
        return false;
    }
    let tree = Path::new(data_dir)
        .join("checkpoints")
        .join(caldera_spec::node::safe_file_name(task_id));
    let dir = match spec_dir {
        Some(d) if Path::new(d).is_absolute() => return false,
        Some(d) => tree.join(d),
        None => tree,
    };
    let dir = dir.to_string_lossy().to_string();
    if !normal_absolute(&dir) {
        return false;
    }
    let p = Path::new(path);
    p != Path::new(&dir) && p.starts_with(&dir)
}

fn normal_absolute(p: &str) -> bool {
    let p = Path::new(p);
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_counts_only_strictly_inside_the_tasks_dir() {
        let ok = |p: &str, spec: Option<&str>| checkpoint_inside(p, "/d", "t-1", spec);
        assert!(ok("/d/checkpoints/t-1/step-1.pt", None));
        assert!(ok("/d/checkpoints/t-1/a/b", None));
        assert!(!ok("/d/checkpoints/t-1", None), "the dir itself");
        assert!(!ok("/etc/shadow", None));
        assert!(!ok("/d/checkpoints/t-1/../../../etc/shadow", None));
        assert!(
            !ok("/d/checkpoints/t-10/x", None),
            "a sibling with the same prefix"
        );
        assert!(!ok("/d/checkpoints/t-2/x", None), "another task's dir");
        assert!(!ok("d/checkpoints/t-1/x", None), "relative");
        assert!(ok("/d/checkpoints/t-1/ck/x", Some("ck")));
        assert!(!ok("/d/ck/x", Some("ck")), "outside the task's tree");
        assert!(
            !ok("/d/checkpoints/t-2/x", Some("checkpoints/t-2")),
            "another task's tree, named from this one's"
        );
        assert!(!ok("/mnt/ck/x", Some("/mnt/ck")));
        assert!(!ok("/etc/x", Some("../etc")));
        assert!(!checkpoint_inside("/d/checkpoints/t-1/x", "", "t-1", None));
    }

    #[test]
    fn a_hello_needs_the_names_secret_no_live_session_and_no_revocation() {
        let inv = caldera_spec::NodeInventory {
            runtimes: Vec::new(),
            hostname: "n".into(),
            gpus: vec![],
            cpu_cores: 1,
            memory_total_mb: 1,
            disks: vec![],
            disk_offered_mb: 0,
            labels: Default::default(),
            simulated_host: true,
            isolation: String::new(),
            gpu_source: String::new(),
        };
        let mut rec = caldera_spec::NodeRecord {
            name: "n".into(),
            inventory: inv,
            epoch: 1,
            state: caldera_spec::NodeState::Ready,
            joined_ms: 0,
            last_seen_ms: 0,
            secret_sha256: None,
            revoked: false,
            cordon: None,
        };
        let book = crate::tokens::TokenBook::default();
        let admit =
            |rec: &caldera_spec::NodeRecord, live, presented| admit(rec, live, presented, &book);
        // A new name (or one from before node secrets): claimed, a secret issued.
        assert_eq!(admit(&rec, false, None), Ok(true));
        assert_eq!(admit(&rec, false, Some("anything")), Ok(true));
        rec.secret_sha256 = Some(book.digest("s"));
        assert_eq!(admit(&rec, false, Some("s")), Ok(false));
        assert_eq!(admit(&rec, false, None), Err(Refusal::BadSecret));
        assert_eq!(admit(&rec, false, Some("t")), Err(Refusal::BadSecret));
        assert_eq!(
            admit(&rec, true, None),
            Err(Refusal::BadSecret),
            "no hint a session is up"
        );
        assert_eq!(admit(&rec, true, Some("s")), Err(Refusal::LiveSession));
        // A plain hash kept from before the token key still admits its secret.
        rec.secret_sha256 = Some(crate::tokens::hash("s"));
        assert_eq!(admit(&rec, false, Some("s")), Ok(false));
        assert_eq!(admit(&rec, false, Some("t")), Err(Refusal::BadSecret));
        rec.revoked = true;
        assert_eq!(admit(&rec, false, Some("s")), Err(Refusal::Revoked));
    }

    #[test]
    fn a_session_speaks_only_for_what_it_holds_under_its_epoch() {
        let mut h = Held::default();
        h.reset(
            [("a1".to_string(), "t1".to_string())].into_iter(),
            &["a9".to_string()],
        );
        h.insert("a2", "t2");
        assert_eq!(h.check(5, 5, "a1", "t1"), Verdict::Accept("t1".into()));
        assert_eq!(h.check(5, 5, "a2", "t2"), Verdict::Accept("t2".into()));
        assert_eq!(
            h.check(5, 4, "a1", "t1"),
            Verdict::Refuse(Refusal::StaleEpoch)
        );
        assert_eq!(h.check(5, 5, "a3", "t3"), Verdict::Refuse(Refusal::NotHeld));
        assert_eq!(
            h.check(5, 5, "a1", "t2"),
            Verdict::Refuse(Refusal::WrongTask)
        );
        assert_eq!(h.check(5, 2, "a9", "t9"), Verdict::Drop);
        assert_eq!(h.check(5, 5, "a1", ""), Verdict::Drop);
    }
}
