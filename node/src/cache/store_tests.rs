//! The store on real files: fetches from a `file://` origin, LRU that
//! deletes files, corrupt copies caught before use, partials never used,
//! the index across a restart.
use super::{CacheEvent, CacheNote, InUse, Want, WeightCache};
use caldera_spec::weights::{WarmCommand, WarmupProgress, WeightSource};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// A generated weights file of `size` bytes (a pattern seeded by `seed`) and its sha256.
fn weights(dir: &Path, name: &str, size: usize, seed: u8) -> (PathBuf, String) {
    let bytes: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, &bytes).unwrap();
    (path, super::digest::sha256_of_bytes(&bytes))
}

fn warm_cmd(path: &Path, sha: &str, size: u64) -> WarmCommand {
    WarmCommand {
        epoch: 1,
        model: "m:v1".into(),
        sha256: sha.into(),
        size_bytes: size,
        source: WeightSource::Origin {
            uri: format!("file://{}", path.display()),
        },
        pinned: false,
        origin: caldera_spec::weights::OriginAccess {
            rules: caldera_spec::origin::OriginRules::anything(),
            confined: None,
        },
        owner: None,
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    data: PathBuf,
    origin: PathBuf,
    notes: UnboundedReceiver<CacheNote>,
    cache: WeightCache,
}

impl Fixture {
    fn new(capacity: u64) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let (data, origin) = (dir.path().join("node"), dir.path().join("origin"));
        std::fs::create_dir_all(&origin).unwrap();
        let (tx, notes) = unbounded_channel();
        let cache = WeightCache::open(
            &data,
            capacity,
            tx,
            crate::cache::fetch::Tls::new(None).unwrap(),
        )
        .unwrap();
        Fixture {
            _dir: dir,
            data,
            origin,
            notes,
            cache,
        }
    }

    /// Applies notes until an event for `sha` matches `until`; returns all events.
    async fn settle(&mut self, sha: &str, until: impl Fn(&CacheEvent) -> bool) -> Vec<CacheEvent> {
        let mut seen = Vec::new();
        loop {
            let note = tokio::time::timeout(Duration::from_secs(10), self.notes.recv())
                .await
                .expect("the cache said nothing for 10 s")
                .expect("notes closed");
            let events = self.cache.on_note(note);
            let done = events.iter().any(|e| event_sha(e) == sha && until(e));
            seen.extend(events);
            if done {
                return seen;
            }
        }
    }

    /// Warms `sha` from the origin file and waits for the end (verified or failed).
    async fn warm(&mut self, path: &Path, sha: &str, size: u64, in_use: &InUse) -> WarmupProgress {
        let mut events = self.cache.warm(&warm_cmd(path, sha, size), in_use);
        if !events.iter().any(|e| is_end(e, sha)) {
            events.extend(self.settle(sha, |e| is_end(e, sha)).await);
        }
        end_of(&events, sha)
    }

    /// A start's check of `sha`: Ready, or evicted with the reason the
    /// report carries.
    async fn check(&mut self, sha: &str, size: u64) -> Checked {
        assert_eq!(self.cache.want(sha, size, None), Want::Checking);
        let events = self
            .settle(sha, |e| {
                matches!(e, CacheEvent::Ready { .. })
                    || matches!(
                        e,
                        CacheEvent::Report {
                            progress: WarmupProgress::Evicted { .. },
                            ..
                        }
                    )
            })
            .await;
        match events.last() {
            Some(CacheEvent::Report {
                progress: WarmupProgress::Evicted { reason },
                ..
            }) => Checked::Evicted(reason.clone()),
            _ => Checked::Ready,
        }
    }
}

/// What a start's check of a cached version ended in.
#[derive(Debug, PartialEq, Eq)]
enum Checked {
    Ready,
    /// Evicted, with the report's reason (the words the control plane shows).
    Evicted(String),
}

impl Checked {
    /// The eviction's reason; a panic naming `what` if the version stayed.
    fn evicted(self, what: &str) -> String {
        match self {
            Checked::Evicted(reason) => reason,
            Checked::Ready => panic!("{what}: the check passed"),
        }
    }
}

fn event_sha(e: &CacheEvent) -> &str {
    match e {
        CacheEvent::Ready { sha256 } | CacheEvent::Report { sha256, .. } => sha256,
    }
}

fn is_end(e: &CacheEvent, sha: &str) -> bool {
    event_sha(e) == sha
        && matches!(
            e,
            CacheEvent::Report {
                progress: WarmupProgress::Verified { .. } | WarmupProgress::Failed { .. },
                ..
            }
        )
}

fn end_of(events: &[CacheEvent], sha: &str) -> WarmupProgress {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            CacheEvent::Report {
                sha256, progress, ..
            } if sha256 == sha && is_end(e, sha) => Some(progress.clone()),
            _ => None,
        })
        .expect("an end")
}

fn fetched(p: &WarmupProgress) -> u64 {
    match p {
        WarmupProgress::Verified { bytes_fetched, .. } => *bytes_fetched,
        other => panic!("not verified: {other:?}"),
    }
}

/// Makes a 0444 copy writable again (a test corrupting it on purpose).
fn writable(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[actix_rt::test]
async fn lru_deletes_the_least_recently_used_unused_copy_never_one_in_use_or_pinned() {
    let mut f = Fixture::new(3500);
    let mut shas = Vec::new();
    for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        shas.push(weights(&f.origin, name, 1000, i as u8));
    }
    let none = InUse::new();
    for (path, sha) in &shas[..3] {
        assert_eq!(fetched(&f.warm(path, sha, 1000, &none).await), 1000);
    }
    let [a, b, c] = [&shas[0].1, &shas[1].1, &shas[2].1];
    // a is the oldest, then b, then c; a is pinned, b in use.
    for (sha, at) in [(a, 1), (b, 2), (c, 3)] {
        f.cache
            .index
            .entries
            .get_mut(sha.as_str())
            .unwrap()
            .last_used_ms = at;
    }
    f.cache.pin(a, true);
    let mut in_use = InUse::new();
    in_use.insert(b.clone(), 1);
    // 3000 used + 1000 > 3500: one must go, and only c may.
    let (d_path, d) = &shas[3];
    assert_eq!(fetched(&f.warm(d_path, d, 1000, &in_use).await), 1000);
    assert!(!f.cache.copy_path(c).exists(), "c's file is deleted");
    for sha in [a, b, d] {
        assert!(f.cache.copy_path(sha).exists());
    }
    assert_eq!(f.cache.index.counters.evictions, 1);
    // a pinned, b and d in use: no room for e, and the failure says why.
    in_use.insert(d.clone(), 1);
    let (e_path, e) = &shas[4];
    match f.warm(e_path, e, 1000, &in_use).await {
        WarmupProgress::Failed { reason, .. } => {
            let full = super::lru::CacheFull {
                held_bytes: 3000,
                capacity_bytes: 3500,
            };
            assert_eq!(reason, full.to_string());
            assert!(reason.starts_with("cache full: "), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let report = f.cache.report(&in_use);
    assert_eq!(report.used_bytes, 3000);
    assert_eq!(report.entries.len(), 3);
}

#[actix_rt::test]
async fn a_truncated_or_flipped_copy_is_caught_before_use_and_fetched_again() {
    let mut f = Fixture::new(1_000_000);
    let (path, sha) = weights(&f.origin, "w", 100_000, 7);
    let none = InUse::new();
    f.warm(&path, &sha, 100_000, &none).await;
    assert_eq!(f.check(&sha, 100_000).await, Checked::Ready);
    let copy = f.cache.copy_path(&sha);
    assert_eq!(
        std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777,
        0o444
    );

    // Truncated: caught by its size, deleted, and then a start waits (a miss).
    writable(&copy);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_len(99_999)
        .unwrap();
    let why = f.check(&sha, 100_000).await.evicted("truncated");
    assert!(why.contains("size 99999 bytes"), "{why}");
    assert!(!copy.exists());
    assert!(matches!(
        f.cache.want(&sha, 100_000, None),
        Want::Waiting { .. }
    ));
    assert_eq!(fetched(&f.warm(&path, &sha, 100_000, &none).await), 100_000);

    // One flipped byte: caught by the checksum.
    writable(&copy);
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes[50_000] ^= 1;
    std::fs::write(&copy, &bytes).unwrap();
    let why = f.check(&sha, 100_000).await.evicted("flipped");
    assert!(why.contains("sha256"), "{why}");
    assert_eq!(fetched(&f.warm(&path, &sha, 100_000, &none).await), 100_000);
    assert_eq!(f.check(&sha, 100_000).await, Checked::Ready);
    let c = &f.cache.index.counters;
    assert_eq!((c.corrupt_found, c.bytes_from_origin), (2, 300_000));
}

#[actix_rt::test]
async fn a_partial_file_is_never_used_and_a_resume_fetches_only_the_rest() {
    let mut f = Fixture::new(1_000_000);
    let (path, sha) = weights(&f.origin, "w", 80_000, 3);
    let good = std::fs::read(&path).unwrap();
    let partial = f.data.join("cache").join(format!("{sha}.partial"));
    let none = InUse::new();

    // A full-length partial of wrong bytes is not a copy: a start waits,
    // and the warm that seals it finds the mismatch and deletes it.
    std::fs::write(&partial, vec![0u8; 80_000]).unwrap();
    assert!(!f.cache.holds(&sha));
    assert!(matches!(
        f.cache.want(&sha, 80_000, None),
        Want::Waiting {
            bytes_done: 80_000,
            ..
        }
    ));
    assert_eq!(f.cache.report(&none).fetching[0].bytes_done, 80_000);
    match f.warm(&path, &sha, 80_000, &none).await {
        WarmupProgress::Failed {
            reason, bytes_done, ..
        } => {
            assert!(reason.contains("does not match"), "{reason}");
            assert_eq!(bytes_done, 0);
        }
        other => panic!("{other:?}"),
    }
    assert!(!partial.exists() && !f.cache.holds(&sha));

    // A cut fetch's first 30000 bytes: the next warm reads only the rest.
    std::fs::write(&partial, &good[..30_000]).unwrap();
    assert_eq!(fetched(&f.warm(&path, &sha, 80_000, &none).await), 50_000);
    assert_eq!(std::fs::read(f.cache.copy_path(&sha)).unwrap(), good);
    assert!(!partial.exists());
}

#[actix_rt::test]
async fn the_index_survives_a_restart() {
    let mut f = Fixture::new(1_000_000);
    let (path, sha) = weights(&f.origin, "w", 10_000, 1);
    let mut cmd = warm_cmd(&path, &sha, 10_000);
    cmd.pinned = true;
    f.cache.warm(&cmd, &InUse::new());
    f.settle(&sha, |e| is_end(e, &sha)).await;
    let before = f.cache.report(&InUse::new());
    drop(f.cache);
    let (tx, _notes) = unbounded_channel();
    let mut again = WeightCache::open(
        &f.data,
        1_000_000,
        tx,
        crate::cache::fetch::Tls::new(None).unwrap(),
    )
    .unwrap();
    let after = again.report(&InUse::new());
    assert_eq!(after.entries, before.entries);
    assert!(after.entries[0].pinned);
    assert_eq!(after.counters.misses, 1);
    assert_eq!(after.counters.bytes_from_origin, 10_000);
    // A warm of a copy already here: verified at once, nothing fetched, a hit.
    let events = again.warm(&warm_cmd(&path, &sha, 10_000), &InUse::new());
    assert_eq!(fetched(&end_of(&events, &sha)), 0);
    assert_eq!(again.report(&InUse::new()).counters.hits, 1);
}

#[actix_rt::test]
async fn the_same_warm_twice_lets_the_fetch_go_on() {
    let mut f = Fixture::new(1_000_000);
    let (path, sha) = weights(&f.origin, "w", 200_000, 2);
    let cmd = warm_cmd(&path, &sha, 200_000);
    f.cache.warm(&cmd, &InUse::new());
    let again = f.cache.warm(&cmd, &InUse::new());
    assert!(
        matches!(
            again.as_slice(),
            [CacheEvent::Report {
                progress: WarmupProgress::Fetching { .. },
                ..
            }]
        ),
        "{again:?}"
    );
    let events = f.settle(&sha, |e| is_end(e, &sha)).await;
    assert_eq!(fetched(&end_of(&events, &sha)), 200_000);
    let c = &f.cache.index.counters;
    assert_eq!((c.misses, c.bytes_from_origin), (1, 200_000));
}

/// A start whose copy is untouched since its last full check in this run
/// skips the hash (it cost ~1 s per GB on every start); the first start
/// after the agent opens its cache again hashes in full.
#[actix_rt::test]
async fn an_untouched_copy_is_not_hashed_again_until_the_agent_restarts() {
    let mut f = Fixture::new(1_000_000);
    let (path, sha) = weights(&f.origin, "w", 100_000, 9);
    f.warm(&path, &sha, 100_000, &InUse::new()).await;
    let after_fetch = f.cache.index.counters.load_seconds;
    assert_eq!(f.check(&sha, 100_000).await, Checked::Ready);
    assert_eq!(f.check(&sha, 100_000).await, Checked::Ready);
    assert_eq!(
        f.cache.index.counters.load_seconds, after_fetch,
        "no hash for an untouched copy"
    );
    // The agent again: no stamps, a full hash (its time is counted).
    let (tx, notes) = unbounded_channel();
    f.cache = WeightCache::open(
        &f.data,
        1_000_000,
        tx,
        crate::cache::fetch::Tls::new(None).unwrap(),
    )
    .unwrap();
    f.notes = notes;
    let before = f.cache.index.counters.load_seconds;
    assert_eq!(f.check(&sha, 100_000).await, Checked::Ready);
    assert!(
        f.cache.index.counters.load_seconds > before,
        "hashed in full after a restart"
    );
}

/// Warms `sha` for `owner`'s version from `path`, to its end.
async fn warm_for(f: &mut Fixture, path: &Path, sha: &str, owner: Option<&str>) -> WarmupProgress {
    let size = std::fs::metadata(path).unwrap().len();
    let cmd = WarmCommand {
        owner: owner.map(String::from),
        ..warm_cmd(path, sha, size)
    };
    let mut events = f.cache.warm(&cmd, &InUse::new());
    if !events.iter().any(|e| is_end(e, sha)) {
        events.extend(f.settle(sha, |e| is_end(e, sha)).await);
    }
    end_of(&events, sha)
}

#[actix_rt::test]
async fn a_digest_alone_never_serves_another_tenants_copy() {
    let mut f = Fixture::new(1 << 20);
    let (b_file, sha) = weights(&f.origin, "b-private", 40_000, 7);
    let (a_file, _) = weights(&f.origin, "a-decoy", 40_000, 9);
    // B's private version brings its copy.
    let got = warm_for(&mut f, &b_file, &sha, Some("b")).await;
    assert!(
        matches!(
            got,
            WarmupProgress::Verified {
                bytes_fetched: 40_000,
                ..
            }
        ),
        "{got:?}"
    );
    assert!(f.cache.serves(&sha, Some("b")));
    // A declares B's digest: no hit, and no start of A's is let through.
    assert!(!f.cache.serves(&sha, Some("a")));
    assert!(
        !f.cache.serves(&sha, None),
        "nor does an operator's version"
    );
    assert!(matches!(
        f.cache.want(&sha, 40_000, Some("a")),
        Want::Waiting { .. }
    ));
    // A's warm reads A's own origin, whose bytes do not match.
    let got = warm_for(&mut f, &a_file, &sha, Some("a")).await;
    match got {
        WarmupProgress::Failed {
            reason, bytes_done, ..
        } => {
            assert!(reason.contains("does not match"), "{reason}");
            assert_eq!(bytes_done, 0, "the partial is deleted");
        }
        other => panic!("A got {other:?}"),
    }
    assert!(!f.cache.serves(&sha, Some("a")));
    // B's copy is untouched, and its report names B alone.
    assert_eq!(
        std::fs::read(f.cache.copy_path(&sha)).unwrap(),
        std::fs::read(&b_file).unwrap()
    );
    let report = f.cache.report(&InUse::new());
    let entry = report.entries.iter().find(|e| e.sha256 == sha).unwrap();
    assert_eq!(
        (entry.shared, entry.tenants.clone()),
        (false, vec!["b".to_string()])
    );
    // A tenant that does have the bytes proves it by fetching them: then
    // the copy serves it too.
    let c_file = f.origin.join("c-has-them");
    std::fs::copy(&b_file, &c_file).unwrap();
    let got = warm_for(&mut f, &c_file, &sha, Some("c")).await;
    assert!(
        matches!(
            got,
            WarmupProgress::Verified {
                bytes_fetched: 40_000,
                ..
            }
        ),
        "{got:?}"
    );
    assert!(f.cache.serves(&sha, Some("c")) && f.cache.serves(&sha, Some("b")));
    assert!(!f.cache.serves(&sha, Some("a")));
    // The audiences survive a restart.
    drop(f.cache);
    let (tx, _rx) = unbounded_channel();
    let back = WeightCache::open(
        &f.data,
        1 << 20,
        tx,
        crate::cache::fetch::Tls::new(None).unwrap(),
    )
    .unwrap();
    assert!(back.serves(&sha, Some("b")) && back.serves(&sha, Some("c")));
    assert!(!back.serves(&sha, Some("a")));
}

#[actix_rt::test]
async fn a_partial_is_resumed_only_by_its_own_audience() {
    let mut f = Fixture::new(1 << 20);
    let (b_file, sha) = weights(&f.origin, "b-private", 30_000, 3);
    // B's fetch was cut after 10,000 bytes (its audience recorded).
    let b_prefix = std::fs::read(&b_file).unwrap()[..10_000].to_vec();
    let cut = f.origin.join("cut");
    std::fs::write(&cut, &b_prefix).unwrap();
    let cmd = WarmCommand {
        owner: Some("b".into()),
        ..warm_cmd(&cut, &sha, 30_000)
    };
    let mut events = f.cache.warm(&cmd, &InUse::new());
    if !events.iter().any(|e| is_end(e, &sha)) {
        events.extend(f.settle(&sha, |e| is_end(e, &sha)).await);
    }
    match end_of(&events, &sha) {
        WarmupProgress::Failed { bytes_done, .. } => assert_eq!(bytes_done, 10_000),
        other => panic!("the cut fetch ended {other:?}"),
    }
    // A's warm with a source of the right tail must not finish B's prefix.
    let tail = f.origin.join("tail-only");
    let mut fake = vec![0u8; 10_000];
    fake.extend_from_slice(&std::fs::read(&b_file).unwrap()[10_000..]);
    std::fs::write(&tail, &fake).unwrap();
    let got = warm_for(&mut f, &tail, &sha, Some("a")).await;
    assert!(
        matches!(got, WarmupProgress::Failed { .. }),
        "A finished B's partial: {got:?}"
    );
    assert!(!f.cache.serves(&sha, Some("a")));
}
