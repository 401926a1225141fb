//! The cache's index: per verified copy its size, last use and pin, and the
//! node's counters. It is only a record: the files in `weights/` are the
//! truth (a copy there was verified before its rename), so a lost or stale
//! index is rebuilt from them at start ([`Index::reconcile`]).
use super::access::Access;
use super::layout::{file_len, sync_dir, Layout};
use caldera_spec::weights::CacheCounters;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;

/// One verified copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub size_bytes: u64,
    /// Unix ms of the last start that used it (or of its verification).
    pub last_used_ms: u64,
    #[serde(default)]
    pub pinned: bool,
    /// Whom the copy serves (see [`super::access`]); absent in an index
    /// written before audiences were kept: unknown, it serves nobody until
    /// a shared version's warm claims it.
    #[serde(default)]
    pub access: Access,
}

/// What `index.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Index {
    pub entries: BTreeMap<String, IndexEntry>,
    /// The audience each partial fetch was written for: a later fetch
    /// resumes it only for the same audience (otherwise it starts at 0), so
    /// no audience's bytes finish another's copy.
    pub partials: BTreeMap<String, Access>,
    pub counters: CacheCounters,
}

impl Index {
    /// Reads the index; a missing one is empty, an unreadable one is logged
    /// and rebuilt from the files (the counters then start again at 0).
    pub fn load(layout: &Layout) -> Index {
        let path = layout.index();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(
                    "weight cache index {} does not parse ({e}); rebuilding it from the files",
                    path.display()
                );
                Index::default()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Index::default(),
            Err(e) => {
                tracing::warn!(
                    "weight cache index {} is unreadable ({e}); rebuilding it from the files",
                    path.display()
                );
                Index::default()
            }
        }
    }

    /// Makes the index agree with `weights/`: entries without a file go, a
    /// file without an entry (renamed in, then the agent died before the
    /// index was saved) is added as used `now_ms`.
    pub fn reconcile(&mut self, layout: &Layout, now_ms: u64) {
        let files = layout.copies();
        self.entries.retain(|sha, _| files.contains(sha));
        for sha in files {
            let size_bytes = file_len(&layout.copy(&sha));
            // Its audience was never recorded: unknown (serves nobody yet).
            self.entries.entry(sha).or_insert(IndexEntry {
                size_bytes,
                last_used_ms: now_ms,
                pinned: false,
                access: Access::default(),
            });
        }
        let partials = layout.partials();
        self.partials.retain(|sha, _| partials.contains(sha));
    }

    /// Writes the index atomically: a temp file, synced, renamed over the old.
    pub fn save(&self, layout: &Layout) -> io::Result<()> {
        let path = layout.index();
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        // Readable by the agent alone (the cache dir is closed too; an
        // index left by an older agent with a wider mode is replaced here).
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        sync_dir(layout.root())
    }

    /// Bytes of the verified copies.
    pub fn used_bytes(&self) -> u64 {
        self.entries.values().map(|e| e.size_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_survives_a_restart_and_follows_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        layout.create().unwrap();
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        std::fs::write(layout.copy(&a), b"12345").unwrap();
        let mut index = Index::default();
        index.entries.insert(
            a.clone(),
            IndexEntry {
                size_bytes: 5,
                last_used_ms: 7,
                pinned: true,
                access: Access::of(Some("b")),
            },
        );
        index.counters.hits = 3;
        index.save(&layout).unwrap();
        // b was renamed in but the index not saved before a crash.
        std::fs::write(layout.copy(&b), b"xy").unwrap();
        let mut back = Index::load(&layout);
        assert_eq!(back.entries[&a].last_used_ms, 7);
        assert!(back.entries[&a].pinned);
        assert_eq!(back.entries[&a].access, Access::of(Some("b")));
        assert_eq!(back.counters.hits, 3);
        back.reconcile(&layout, 99);
        assert_eq!(back.entries[&b].size_bytes, 2);
        assert_eq!(back.entries[&b].last_used_ms, 99);
        assert!(
            !back.entries[&b].access.is_known(),
            "a file of no record serves nobody"
        );
        // a's file is gone: so is its entry.
        std::fs::remove_file(layout.copy(&a)).unwrap();
        back.reconcile(&layout, 100);
        assert!(!back.entries.contains_key(&a));
        assert_eq!(back.used_bytes(), 2);
    }

    #[test]
    fn an_index_written_before_audiences_loads_every_copy_as_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        layout.create().unwrap();
        let a = "a".repeat(64);
        std::fs::write(layout.copy(&a), b"12345").unwrap();
        let old = format!(
            r#"{{"entries":{{"{a}":{{"size_bytes":5,"last_used_ms":7,"pinned":true}}}},"counters":{{"hits":2}}}}"#
        );
        std::fs::write(layout.index(), old).unwrap();
        let mut back = Index::load(&layout);
        back.reconcile(&layout, 9);
        assert_eq!(back.counters.hits, 2);
        assert!(back.entries[&a].pinned);
        assert!(!back.entries[&a].access.is_known());
        assert!(!back.entries[&a].access.serves(Some("b")));
    }

    #[test]
    fn the_index_is_readable_by_the_agent_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        layout.create().unwrap();
        std::fs::write(layout.index(), b"{}").unwrap();
        std::fs::set_permissions(layout.index(), std::fs::Permissions::from_mode(0o644)).unwrap();
        Index::default().save(&layout).unwrap();
        let mode = std::fs::metadata(layout.index())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_garbled_index_is_rebuilt_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        layout.create().unwrap();
        std::fs::write(layout.index(), b"{not json").unwrap();
        assert_eq!(Index::load(&layout), Index::default());
    }
}
