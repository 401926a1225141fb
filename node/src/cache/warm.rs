//! Getting a verified copy in place: warm commands start (or switch) a
//! fetch, a start that finds its copy checks it again before use, and the
//! results of both come back as notes.
use super::fetch::{self, FetchNote, Job, Tally};
use super::layout::{file_len, is_sha256};
use super::store::{InUse, Running, WeightCache};
use super::{digest, CacheEvent, CacheNote};
use caldera_spec::codes;
use caldera_spec::weights::{WarmCommand, WarmupProgress, WeightSource};
use std::rc::Rc;
use std::time::Instant;

/// Where a start's copy stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// A copy is here and being checked; [`CacheEvent::Ready`] follows (or
    /// an eviction, if it was corrupt).
    Checking,
    /// No verified copy: it waits for a warm command to bring one. `source`
    /// is the fetch reading now (empty: none) and `bytes_done` its bytes.
    Waiting { source: String, bytes_done: u64 },
}

impl WeightCache {
    /// Handles a warm command (see [`WarmCommand`]): a verified copy is
    /// reported verified at once; a fetch of the same version from the same
    /// source goes on; one from another source is switched to this one
    /// (resuming at the partial's length); otherwise room is made and a
    /// fetch starts.
    pub fn warm(&mut self, cmd: &WarmCommand, in_use: &InUse) -> Vec<CacheEvent> {
        let label = cmd.source.label();
        let sha = cmd.sha256.as_str();
        let failed = |bytes_done: u64, reason: String| CacheEvent::Report {
            owner: cmd.owner.clone(),
            sha256: cmd.sha256.clone(),
            progress: WarmupProgress::Failed {
                source: label.clone(),
                bytes_done,
                reason,
            },
        };
        if !self.enabled() {
            return vec![failed(
                0,
                "this node has no weight cache (--cache-gb 0)".into(),
            )];
        }
        if !is_sha256(sha) {
            return vec![failed(
                0,
                format!("sha256 {sha:?} is not 64 lowercase hex digits"),
            )];
        }
        let owner = cmd.owner.as_deref();
        if let Some(e) = self.index.entries.get_mut(sha) {
            // The control plane says "shared" only for the operator's own
            // versions: such a warm claims a copy of unknown audience.
            if owner.is_none() && !e.access.is_known() {
                e.access.admit(None);
            }
        }
        if self.serves(sha, owner) {
            self.index.counters.hits += 1;
            if cmd.pinned {
                self.pin(sha, true);
            }
            self.save();
            // No Ready: a start waiting for a copy that is here is being
            // checked, and its check says when it may go.
            return vec![CacheEvent::Report {
                owner: cmd.owner.clone(),
                sha256: cmd.sha256.clone(),
                progress: WarmupProgress::Verified {
                    source: label,
                    bytes_fetched: 0,
                    seconds: 0.0,
                },
            }];
        }
        if self
            .running
            .get(sha)
            .is_some_and(|r| r.owner.as_deref() != owner)
        {
            // One partial per digest: another audience's fetch must end
            // before this one may write its own bytes there.
            return vec![failed(
                0,
                "another fetch of this digest is under way on this node; ask again once it ends"
                    .into(),
            )];
        }
        if let Some(r) = self.running.get_mut(sha).filter(|r| r.source == cmd.source) {
            // The same warm again (a redelivery): the fetch goes on.
            r.pin |= cmd.pinned;
            return vec![CacheEvent::Report {
                owner: cmd.owner.clone(),
                sha256: cmd.sha256.clone(),
                progress: WarmupProgress::Fetching {
                    source: label,
                    bytes_done: r.tally.bytes_done.get(),
                    size_bytes: r.size_bytes,
                    rate_bytes_per_s: 0,
                },
            }];
        }
        let mut pin = cmd.pinned;
        match self.running.remove(sha) {
            Some(old) => {
                tracing::info!(
                    "weight cache: {sha}: switching from {} to {label}",
                    old.label
                );
                old.handle.abort();
                self.count_bytes(old.from_peer, old.tally.written.get());
                pin |= old.pin;
            }
            None => self.index.counters.misses += 1,
        }
        // A partial is resumed only by its own audience: another's bytes
        // never finish this one's copy. One of unknown audience (left by an
        // agent that kept none) is claimed by a shared version's warm, as
        // a copy is.
        let audience = super::access::Access::of(owner);
        let recorded = self.index.partials.get(sha);
        let own = recorded == Some(&audience) || (recorded.is_none() && owner.is_none());
        if !own {
            let _ = std::fs::remove_file(self.layout.partial(sha));
        }
        self.index.partials.insert(sha.to_string(), audience);
        let have = file_len(&self.layout.partial(sha)).min(cmd.size_bytes);
        let mut events = match self.make_room(cmd.size_bytes - have, in_use) {
            Ok(evicted) => evicted,
            Err(full) => {
                tracing::warn!(
                    code = codes::WARMING_FAILED.code,
                    "weight cache: {sha}: {full}"
                );
                self.save();
                return vec![failed(have, full.to_string())];
            }
        };
        self.start_fetch(cmd, pin);
        events.push(CacheEvent::Report {
            owner: cmd.owner.clone(),
            sha256: cmd.sha256.clone(),
            progress: WarmupProgress::Fetching {
                source: label,
                bytes_done: have,
                size_bytes: cmd.size_bytes,
                rate_bytes_per_s: 0,
            },
        });
        self.save();
        events
    }

    fn start_fetch(&mut self, cmd: &WarmCommand, pin: bool) {
        let generation = self.next_generation;
        self.next_generation += 1;
        let tally = Rc::new(Tally::default());
        let job = Job {
            sha256: cmd.sha256.clone(),
            size_bytes: cmd.size_bytes,
            source: cmd.source.clone(),
            partial: self.layout.partial(&cmd.sha256),
            copy: self.layout.copy(&cmd.sha256),
            generation,
            tls: self.tls.clone(),
            origin: cmd.origin.clone(),
        };
        let handle = fetch::spawn(job, tally.clone(), self.notes.clone());
        self.running.insert(
            cmd.sha256.clone(),
            Running {
                source: cmd.source.clone(),
                label: cmd.source.label(),
                size_bytes: cmd.size_bytes,
                from_peer: matches!(cmd.source, WeightSource::Peer { .. }),
                pin,
                owner: cmd.owner.clone(),
                generation,
                tally,
                handle,
            },
        );
    }

    /// A start of a version owned by `owner` (None: shared) needs `sha256`:
    /// a copy here that serves that audience is checked again (size and
    /// SHA-256) before use, unless its file is untouched since its last full
    /// check in this run ([`super::stamp`]); without one the start waits
    /// for a warm (a copy obtained for another audience counts as none).
    pub fn want(&mut self, sha256: &str, size_bytes: u64, owner: Option<&str>) -> Want {
        if self.serves(sha256, owner) {
            let path = self.layout.copy(sha256);
            let untouched = self
                .stamps
                .get(sha256)
                .is_some_and(|s| super::stamp::of(&path) == Some(*s));
            if untouched && !self.checking.contains_key(sha256) {
                self.checking.insert(sha256.to_string(), size_bytes);
                let _ = self.notes.send(CacheNote::Checked {
                    sha256: sha256.to_string(),
                    seconds: 0.0,
                    outcome: Ok(()),
                });
                return Want::Checking;
            }
            if !self.checking.contains_key(sha256) {
                self.checking.insert(sha256.to_string(), size_bytes);
                let path = self.layout.copy(sha256);
                let (sha, notes) = (sha256.to_string(), self.notes.clone());
                tokio::task::spawn_blocking(move || {
                    let started = Instant::now();
                    let outcome = digest::check(&path, size_bytes, &sha);
                    let seconds = started.elapsed().as_secs_f64();
                    let _ = notes.send(CacheNote::Checked {
                        sha256: sha,
                        seconds,
                        outcome,
                    });
                });
            }
            return Want::Checking;
        }
        self.index.counters.misses += 1;
        self.save();
        let running = self.running.get(sha256);
        Want::Waiting {
            source: running.map(|r| r.label.clone()).unwrap_or_default(),
            bytes_done: file_len(&self.layout.partial(sha256)),
        }
    }

    /// The fetch reading `sha256` now: its source, bytes done, size.
    pub fn fetching(&self, sha256: &str) -> Option<(String, u64, u64)> {
        let r = self.running.get(sha256)?;
        Some((r.label.clone(), r.tally.bytes_done.get(), r.size_bytes))
    }

    /// Applies a fetch's or a check's result.
    pub fn on_note(&mut self, note: CacheNote) -> Vec<CacheEvent> {
        match note {
            CacheNote::Fetch(FetchNote::Progress {
                sha256,
                generation,
                rate_bytes_per_s,
            }) => match self.running.get(&sha256) {
                Some(r) if r.generation == generation => vec![CacheEvent::Report {
                    owner: r.owner.clone(),
                    progress: WarmupProgress::Fetching {
                        source: r.label.clone(),
                        bytes_done: r.tally.bytes_done.get(),
                        size_bytes: r.size_bytes,
                        rate_bytes_per_s,
                    },
                    sha256,
                }],
                _ => Vec::new(),
            },
            CacheNote::Fetch(FetchNote::Done {
                sha256,
                generation,
                seconds,
                outcome,
            }) => self.fetch_done(sha256, generation, seconds, outcome),
            CacheNote::Checked {
                sha256,
                seconds,
                outcome,
            } => self.checked(sha256, seconds, outcome),
        }
    }

    fn fetch_done(
        &mut self,
        sha256: String,
        generation: u64,
        seconds: f64,
        outcome: Result<(), fetch::Failure>,
    ) -> Vec<CacheEvent> {
        if self.running.get(&sha256).map(|r| r.generation) != Some(generation) {
            return Vec::new();
        }
        let Some(r) = self.running.remove(&sha256) else {
            return Vec::new();
        };
        let fetched = r.tally.written.get();
        self.count_bytes(r.from_peer, fetched);
        self.index.counters.load_seconds += seconds;
        let events = match outcome {
            Ok(()) => {
                if let Some(st) = super::stamp::of(&self.layout.copy(&sha256)) {
                    self.stamps.insert(sha256.clone(), st);
                }
                self.index.partials.remove(&sha256);
                // A copy already here for another audience is the same
                // bytes (both verified): this audience is added to it.
                let entry =
                    self.index
                        .entries
                        .entry(sha256.clone())
                        .or_insert(super::index::IndexEntry {
                            size_bytes: r.size_bytes,
                            last_used_ms: 0,
                            pinned: false,
                            access: Default::default(),
                        });
                entry.size_bytes = r.size_bytes;
                entry.last_used_ms = crate::runtime::now_ms();
                entry.pinned |= r.pin;
                entry.access.admit(r.owner.as_deref());
                tracing::info!(
                    "weight cache: {sha256} verified from {} ({fetched} bytes fetched, {seconds:.2}s)",
                    r.label
                );
                vec![
                    CacheEvent::Report {
                        owner: r.owner.clone(),
                        sha256: sha256.clone(),
                        progress: WarmupProgress::Verified {
                            source: r.label,
                            bytes_fetched: fetched,
                            seconds,
                        },
                    },
                    CacheEvent::Ready { sha256 },
                ]
            }
            Err(f) => {
                if !self.layout.partial(&sha256).exists() {
                    self.index.partials.remove(&sha256);
                }
                let code = match f.corrupt {
                    true => &codes::WEIGHTS_CORRUPT,
                    false => &codes::WARMING_FAILED,
                };
                tracing::warn!(
                    code = code.code,
                    "weight cache: {sha256} from {}: {}",
                    r.label,
                    f.reason
                );
                vec![CacheEvent::Report {
                    owner: r.owner.clone(),
                    progress: WarmupProgress::Failed {
                        source: r.label,
                        bytes_done: file_len(&self.layout.partial(&sha256)),
                        reason: f.reason,
                    },
                    sha256,
                }]
            }
        };
        self.save();
        events
    }

    fn checked(
        &mut self,
        sha256: String,
        seconds: f64,
        outcome: Result<(), digest::Mismatch>,
    ) -> Vec<CacheEvent> {
        self.checking.remove(&sha256);
        self.index.counters.load_seconds += seconds;
        let events = match outcome {
            Ok(()) => {
                self.index.counters.hits += 1;
                if let Some(st) = super::stamp::of(&self.layout.copy(&sha256)) {
                    self.stamps.insert(sha256.clone(), st);
                }
                if let Some(e) = self.index.entries.get_mut(&sha256) {
                    e.last_used_ms = crate::runtime::now_ms();
                }
                vec![CacheEvent::Ready { sha256 }]
            }
            Err(m) => {
                let reason = format!(
                    "{}: corrupt before use: {m}; deleted, to be fetched again",
                    codes::WEIGHTS_CORRUPT.name
                );
                tracing::warn!(
                    code = codes::WEIGHTS_CORRUPT.code,
                    "weight cache: {sha256}: {reason}"
                );
                self.index.counters.corrupt_found += 1;
                self.stamps.remove(&sha256);
                self.index.counters.misses += 1;
                self.index.entries.remove(&sha256);
                let _ = std::fs::remove_file(self.layout.copy(&sha256));
                vec![CacheEvent::Report {
                    owner: None,
                    sha256,
                    progress: WarmupProgress::Evicted { reason },
                }]
            }
        };
        self.save();
        events
    }
}
