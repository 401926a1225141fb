//! The sled database behind a [`Store`](crate::Store), and reopening it in
//! place. sled latches the first I/O error of its log writer (a full disk,
//! say) and answers every later write with it for the life of the handle,
//! even once the disk has room again; only a new handle clears it. Every
//! clone of a store shares this one slot, so a reopen reaches all of them.
//!
//! While a reopen runs the slot is empty: readers get a storage error at
//! once rather than waiting (one that holds an iterator of the old handle
//! and asks again would otherwise wait for the reopen that waits for it).
use crate::config::StoreConfig;
use crate::errors::{Result, StorageError};
use crate::keys;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// Storage format this build writes and reads: a data dir written in another
/// is refused at open rather than misread.
pub const FORMAT_VERSION: u32 = 1;

/// How long a reopen waits for the old handle's last users to let go of
/// its file lock.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Bytes written and removed to see whether the data directory's disk takes
/// writes again: more than a sled segment (512 KiB), so a disk with only a
/// sliver of room does not pass.
const ROOM_PROBE_BYTES: usize = 1 << 20;

pub(crate) struct Handle {
    db: RwLock<Option<sled::Db>>,
    dir: PathBuf,
    cfg: StoreConfig,
    /// sled's log file, opened a second time only to `fdatasync` it: sled 0.34
    /// makes its writes with `sync_file_range`, which survives a process crash
    /// but neither flushes a volatile disk cache nor commits a grown file size.
    log: Mutex<Option<std::fs::File>>,
}

fn io(e: std::io::Error) -> StorageError {
    StorageError::Sled(sled::Error::Io(e))
}

fn other(msg: String) -> StorageError {
    io(std::io::Error::other(msg))
}

/// Opens sled in `dir` and checks (or writes) the storage format.
fn open_db(dir: &Path, cfg: &StoreConfig) -> Result<sled::Db> {
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(cfg.cache_capacity_bytes)
        .flush_every_ms(cfg.flush_every_ms)
        .open()?;
    match db.get(keys::FORMAT)? {
        None => {
            db.insert(keys::FORMAT, FORMAT_VERSION.to_string().as_bytes())?;
        }
        Some(v) if v.as_ref() == FORMAT_VERSION.to_string().as_bytes() => {}
        Some(v) => {
            return Err(StorageError::UnsupportedFormat {
                found: String::from_utf8_lossy(&v).into_owned(),
                expected: FORMAT_VERSION,
            })
        }
    }
    Ok(db)
}

fn open_log(dir: &Path) -> Option<std::fs::File> {
    std::fs::File::open(dir.join("db"))
        .map_err(|e| tracing::warn!(dir = %dir.display(), error = %e, "cannot open sled's log for fdatasync; durability is sled's own"))
        .ok()
}

impl Handle {
    pub(crate) fn open(dir: &Path, cfg: &StoreConfig) -> Result<Handle> {
        let db = open_db(dir, cfg)?;
        Ok(Handle {
            db: RwLock::new(Some(db)),
            dir: dir.to_path_buf(),
            cfg: cfg.clone(),
            log: Mutex::new(open_log(dir)),
        })
    }

    /// The database now; an error while a reopen runs.
    pub(crate) fn db(&self) -> Result<sled::Db> {
        let slot = self.db.read().unwrap_or_else(|p| p.into_inner());
        slot.clone()
            .ok_or_else(|| other("the store is being reopened after an I/O failure; retry".into()))
    }

    /// Drops this handle's database and opens it again from its files:
    /// what was flushed is there, what was applied but never flushed (the
    /// writes the failure cut off) is not. Waits up to [`LOCK_WAIT`] for
    /// readers of the old handle to let go of its file lock. On an error the
    /// slot stays empty (every read fails) until a later reopen succeeds.
    pub(crate) fn reopen(&self) -> Result<sled::Db> {
        let old = self.db.write().unwrap_or_else(|p| p.into_inner()).take();
        drop(old);
        let began = Instant::now();
        let db = loop {
            match open_db(&self.dir, &self.cfg) {
                Ok(db) => break db,
                Err(e) if began.elapsed() < LOCK_WAIT && is_lock_held(&e) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e),
            }
        };
        *self.log.lock().unwrap_or_else(|p| p.into_inner()) = open_log(&self.dir);
        *self.db.write().unwrap_or_else(|p| p.into_inner()) = Some(db.clone());
        Ok(db)
    }

    /// `fdatasync` of sled's log (blocking).
    pub(crate) fn sync_log(&self) -> Result<()> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = log.as_ref() {
            f.sync_data().map_err(io)?;
        }
        Ok(())
    }

    /// Whether the data directory's disk takes a write of
    /// [`ROOM_PROBE_BYTES`] again (written, synced, removed).
    pub(crate) fn room_to_write(&self) -> Result<()> {
        use std::io::Write;
        let path = self.dir.join("room-probe");
        let wrote = std::fs::File::create(&path).and_then(|mut f| {
            f.write_all(&vec![0u8; ROOM_PROBE_BYTES])?;
            f.sync_all()
        });
        let _ = std::fs::remove_file(&path);
        wrote.map_err(io)
    }
}

/// sled's answer when another handle holds the directory's lock.
fn is_lock_held(e: &StorageError) -> bool {
    matches!(e, StorageError::Sled(sled::Error::Io(io)) if io.to_string().contains("could not acquire lock"))
}

/// The entries of `walk`, each a storage result; without a database (a
/// reopen under way) the one error saying so.
pub(crate) fn entries(
    walk: Result<sled::Iter>,
) -> impl DoubleEndedIterator<Item = Result<(sled::IVec, sled::IVec)>> {
    let (walk, failed) = match walk {
        Ok(w) => (Some(w), None),
        Err(e) => (None, Some(Err(e))),
    };
    failed.into_iter().chain(
        walk.into_iter()
            .flatten()
            .map(|kv| kv.map_err(StorageError::from)),
    )
}

#[cfg(test)]
mod tests {
    use crate::{Store, StoreConfig};
    use std::io::Write;
    use std::path::Path;
    use std::process::Command;

    fn put(store: &Store, key: &str) -> crate::Result<()> {
        let mut b = store.batch();
        b.meta_put(key, &[7u8; 4096]);
        store.commit(b)?;
        store.flush()?;
        Ok(())
    }

    /// Every clone sees the reopened database; what was flushed is there.
    #[test]
    fn a_reopen_keeps_what_was_flushed_and_every_clone_uses_the_new_handle() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
        let clone = store.clone();
        put(&store, "before").unwrap();
        store.reopen().unwrap();
        assert!(clone.meta_get("before").unwrap().is_some());
        put(&clone, "after").unwrap();
        store.probe().unwrap();
        assert!(store.meta_get("after").unwrap().is_some());
        store.room_to_write().unwrap();
    }

    /// Fills `dir`'s disk with a file until it is full; returns the file.
    fn fill(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![1u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        path
    }

    /// A real full disk: a 8 MiB tmpfs. sled latches the write error, so
    /// the handle refuses writes even once the disk has room again; a
    /// reopen clears it. Needs root (mount):
    /// `cargo test -p caldera-storage --lib handle -- --ignored`.
    #[test]
    #[ignore = "needs root: mounts an 8 MiB tmpfs"]
    fn a_disk_that_filled_up_and_was_freed_takes_writes_again_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(mounted.success(), "mount a tmpfs (root?)");
        let outcome = std::panic::catch_unwind(|| {
            let store = Store::open(&mnt.join("sled"), &StoreConfig::default()).unwrap();
            put(&store, "before").unwrap();
            let filler = fill(&mnt);
            let failed = (0..10_000).any(|i| put(&store, &format!("k{i}")).is_err());
            assert!(failed, "writes kept succeeding on a full disk");
            std::fs::remove_file(&filler).unwrap();
            store.room_to_write().unwrap();
            // The disk has room again; the handle does not take writes.
            assert!(store.probe().is_err(), "sled did not latch the failure");
            store.reopen().unwrap();
            store.probe().unwrap();
            put(&store, "after").unwrap();
            assert!(store.meta_get("before").unwrap().is_some());
        });
        let _ = Command::new("umount").arg(&mnt).status();
        if let Err(p) = outcome {
            std::panic::resume_unwind(p);
        }
    }
}
