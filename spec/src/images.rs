//! The images a node holds, as its agent reports them beside its weight
//! cache, and the operator's pre-pull. The control plane uses the report
//! three ways: placement prefers a node that already holds a task's image
//! (bytes already there over bytes needed, like the weights), pulls of one
//! image are staggered across nodes (a node that holds it needs no pull
//! slot), and `caldera nodes` and the node page show it.
//!
//! Flow: the agent reads `podman images` (throttled) and sends an
//! [`ImageReport`] in its hello and heartbeats. A pre-pull is a
//! [`PrepullCommand`]; the agent answers with a [`PrepullReport`] once the
//! pull ended, and the image shows in its next report.
use serde::{Deserialize, Serialize};

/// One image in a node's store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ImageEntry {
    /// The store's image id (sha256 of its config).
    pub id: String,
    /// The manifest digest it was pulled by (`sha256:...`), when known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// Names it is tagged with (`registry/repo:tag`), canonical as
    /// [`canonical`] writes them.
    pub names: Vec<String>,
    pub size_bytes: u64,
    /// Unix ms the node last saw it used by a workload (or pre-pulled it);
    /// 0: never, since the agent's data dir was made.
    pub last_used_ms: u64,
    /// Containers made from it (running or not); > 0 is never evicted.
    pub in_use: u32,
    /// Brought by the agent (a workload's pull or a pre-pull): only these
    /// count against the image cap and are ever evicted.
    pub managed: bool,
}

/// The images a node holds, in its hello and heartbeats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct ImageReport {
    /// Whether the agent could read its image store (false: no container
    /// runtime, or `podman images` failed; `images` is then empty).
    pub known: bool,
    /// `--image-cache-gb` in bytes; 0: no cap (nothing is evicted).
    pub capacity_bytes: u64,
    /// Bytes of the managed images (what the cap bounds).
    pub managed_bytes: u64,
    pub images: Vec<ImageEntry>,
    /// Images evicted since the agent's data dir was made.
    pub evictions: u64,
}

impl ImageReport {
    /// The entry that `reference` (as a task names it) resolves to here.
    pub fn holds(&self, reference: &str) -> Option<&ImageEntry> {
        let want = canonical(reference);
        let digest = want.split_once('@').map(|(_, d)| d);
        self.images.iter().find(|e| {
            e.names.contains(&want) || digest.is_some_and(|d| !e.digest.is_empty() && e.digest == d)
        })
    }

    /// Total bytes of every image reported.
    pub fn total_bytes(&self) -> u64 {
        self.images.iter().map(|e| e.size_bytes).sum()
    }
}

/// An image reference as podman names it: `alpine` is
/// `docker.io/library/alpine:latest`, a reference without a tag or digest
/// gets `:latest`. Names already complete are returned as they are.
pub fn canonical(reference: &str) -> String {
    let reference = reference.trim();
    let (path, pin) = match reference.split_once('@') {
        Some((p, d)) => (p, Some(d)),
        None => (reference, None),
    };
    let last = path.rsplit('/').next().unwrap_or(path);
    let tagged = last.contains(':');
    let first = path.split('/').next().unwrap_or(path);
    let has_registry =
        path.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut out = String::with_capacity(reference.len() + 24);
    if !has_registry {
        out.push_str("docker.io/");
        if !path.contains('/') {
            out.push_str("library/");
        }
    }
    out.push_str(path);
    match pin {
        Some(d) => {
            out.push('@');
            out.push_str(d);
        }
        None if !tagged => out.push_str(":latest"),
        None => {}
    }
    out
}

/// Pull `image` onto the node ahead of use (the operator's pre-pull).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepullCommand {
    pub epoch: u64,
    pub image: String,
    /// How long the pull may take, ms.
    pub timeout_ms: u64,
}

/// How a pre-pull ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepullReport {
    pub epoch: u64,
    pub image: String,
    pub ok: bool,
    /// The digest pulled, when it worked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// Why not, when it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_read_as_podman_writes_them() {
        let rows = [
            ("alpine", "docker.io/library/alpine:latest"),
            ("alpine:3.19", "docker.io/library/alpine:3.19"),
            ("user/app:1", "docker.io/user/app:1"),
            (
                "registry.internal/deeplearning/pytorch:2.1-cu12.1",
                "registry.internal/deeplearning/pytorch:2.1-cu12.1",
            ),
            ("127.0.0.1:5555/x/y", "127.0.0.1:5555/x/y:latest"),
            ("localhost/x", "localhost/x:latest"),
            ("r.io/x@sha256:ab", "r.io/x@sha256:ab"),
        ];
        for (given, want) in rows {
            assert_eq!(canonical(given), want, "{given}");
        }
    }

    #[test]
    fn an_image_is_found_by_name_or_by_digest() {
        let report = ImageReport {
            known: true,
            images: vec![ImageEntry {
                id: "12f2".into(),
                digest: "sha256:2109".into(),
                names: vec!["registry.internal/deeplearning/pytorch:2.1-cu12.1".into()],
                size_bytes: 2_131_062,
                ..ImageEntry::default()
            }],
            ..ImageReport::default()
        };
        assert!(report
            .holds("registry.internal/deeplearning/pytorch:2.1-cu12.1")
            .is_some());
        assert!(report
            .holds("registry.internal/deeplearning/pytorch@sha256:2109")
            .is_some());
        assert!(report
            .holds("registry.internal/deeplearning/pytorch:2.2")
            .is_none());
        assert!(report.holds("pytorch").is_none());
        assert_eq!(report.total_bytes(), 2_131_062);
    }
}
