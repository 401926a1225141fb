//! What a tenant sees of a node's weight cache. A copy's digest names the
//! model version it holds, so a tenant is shown only the copies of versions
//! it may use (the operator's, and its own): another tenant's private
//! version stays indistinguishable from absent. The node's totals would
//! betray it too (used bytes growing by a model's size, a miss, bytes from
//! origin), so a tenant reads `used_bytes` as the bytes of the copies and
//! fetches it is shown, and the counters as zeros; the operator reads the
//! node's. The capacity is the node's setting and stays.
use super::{blocking, ControlPlane};
use crate::errors::Result;
use crate::model::view::visible_to;
use crate::views::NodeView;
use caldera_spec::model_record::ModelVersionRecord;
use caldera_spec::weights::CacheReport;
use std::collections::HashSet;

impl ControlPlane {
    /// `GET /v1/nodes/{name}` as `tenant` sees it (`None`: the operator,
    /// who sees every copy). None when there is no such node.
    pub async fn node_seen_by(&self, name: &str, tenant: Option<&str>) -> Result<Option<NodeView>> {
        let Some(mut view) = self.node(name).await? else {
            return Ok(None);
        };
        if tenant.is_some() {
            view.images = None;
        }
        let (Some(tenant), Some(report)) = (tenant, view.cache.as_mut()) else {
            return Ok(Some(view));
        };
        let store = self.sh.gate.store().clone();
        let versions = blocking(move || store.model_versions()).await?;
        only_visible(report, &versions, tenant);
        hide_totals(report);
        Ok(Some(view))
    }
}

/// Keeps in `report` only what `tenant` could use: a shared copy (or
/// fetch) of a digest some operator's version has, and a copy its own
/// versions brought of a digest one of them has. A copy another tenant's
/// version brought stays invisible even to a tenant that declared the same
/// digest (a digest is not proof of anything), and the other tenants a
/// copy serves are never named.
fn only_visible(report: &mut CacheReport, versions: &[ModelVersionRecord], tenant: &str) {
    let digests = |own: bool| -> HashSet<&str> {
        versions
            .iter()
            .filter(|v| visible_to(v, Some(tenant)))
            .filter(|v| v.owner.is_some() == own)
            .map(|v| v.spec.weights.sha256.as_str())
            .collect()
    };
    let (shared, own) = (digests(false), digests(true));
    let mine = |sha: &str, shared_copy: bool, owners: &[String]| {
        (shared_copy && shared.contains(sha))
            || (owners.iter().any(|t| t == tenant) && own.contains(sha))
    };
    report
        .entries
        .retain(|e| mine(&e.sha256, e.shared, &e.tenants));
    for e in &mut report.entries {
        e.tenants.retain(|t| t == tenant);
    }
    report.fetching.retain(|f| {
        let owners: Vec<String> = f.owner.iter().cloned().collect();
        mine(&f.sha256, f.owner.is_none(), &owners)
    });
}

/// Replaces the node's totals in a tenant's `report` with what its shown
/// copies and fetches account for: the used bytes of those alone, and no
/// counters (the node's count other tenants' starts and fetches).
fn hide_totals(report: &mut CacheReport) {
    let copies: u64 = report.entries.iter().map(|e| e.size_bytes).sum();
    let partial: u64 = report.fetching.iter().map(|f| f.bytes_done).sum();
    report.used_bytes = copies.saturating_add(partial);
    report.counters = Default::default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::weights::{CacheEntry, CacheFetch};

    fn version(name: &str, sha: &str, owner: Option<&str>) -> ModelVersionRecord {
        let mut rec = serde_json::json!({"spec": {"name": name, "version": "v1",
            "weights": {"uri": "https://models.example/w", "sha256": sha, "size_bytes": 1}},
            "state": caldera_spec::ModelState::Active, "registered_at_ms": 0});
        if let Some(o) = owner {
            rec["owner"] = o.into();
        }
        serde_json::from_value(rec).unwrap()
    }

    #[test]
    fn a_tenant_sees_the_operators_copies_and_its_own_only() {
        let (public, mine, theirs, orphan) = (
            "aa".repeat(32),
            "bb".repeat(32),
            "cc".repeat(32),
            "dd".repeat(32),
        );
        let versions = [
            version("shared", &public, None),
            version("mine", &mine, Some("a")),
            version("theirs", &theirs, Some("b")),
        ];
        let entry = |sha: &str| CacheEntry {
            sha256: sha.into(),
            size_bytes: 1,
            last_used_ms: 0,
            pinned: false,
            in_use: 0,
            shared: sha == public,
            tenants: match sha {
                s if s == mine => vec!["a".into()],
                _ => vec!["b".into()],
            },
        };
        let mut report = CacheReport {
            entries: [&public, &mine, &theirs, &orphan]
                .map(|s| entry(s))
                .to_vec(),
            fetching: vec![CacheFetch {
                sha256: theirs.clone(),
                bytes_done: 0,
                size_bytes: 1,
                source: String::new(),
                owner: Some("b".into()),
            }],
            ..Default::default()
        };
        report.used_bytes = 4;
        report.counters.hits = 7;
        only_visible(&mut report, &versions, "a");
        hide_totals(&mut report);
        let seen: Vec<&str> = report.entries.iter().map(|e| e.sha256.as_str()).collect();
        assert_eq!(seen, [public.as_str(), mine.as_str()]);
        assert!(report.fetching.is_empty());
        // The two copies shown, 1 byte each; the node's hits are not a's.
        assert_eq!((report.used_bytes, report.counters.hits), (2, 0));
    }

    #[test]
    fn a_digest_declared_by_a_tenant_does_not_show_another_tenants_copy() {
        // B's private copy of `secret`; A registered its own version
        // declaring the same digest.
        let secret = "ee".repeat(32);
        let versions = [
            version("bs", &secret, Some("b")),
            version("copycat", &secret, Some("a")),
        ];
        let mut report = CacheReport {
            entries: vec![CacheEntry {
                sha256: secret.clone(),
                size_bytes: 1,
                last_used_ms: 0,
                pinned: false,
                in_use: 0,
                shared: false,
                tenants: vec!["b".into(), "c".into()],
            }],
            fetching: vec![CacheFetch {
                sha256: secret.clone(),
                bytes_done: 0,
                size_bytes: 1,
                source: "origin".into(),
                owner: Some("b".into()),
            }],
            ..Default::default()
        };
        report.capacity_bytes = 10_000;
        report.used_bytes = 4_000;
        report.counters.misses = 1;
        report.counters.bytes_from_origin = 3_000;
        let mut seen_by_b = report.clone();
        only_visible(&mut report, &versions, "a");
        hide_totals(&mut report);
        assert!(report.entries.is_empty() && report.fetching.is_empty());
        // Neither the bytes nor the fetch of b's copy shows in a's totals.
        assert_eq!(
            (report.capacity_bytes, report.used_bytes, &report.counters),
            (10_000, 0, &Default::default())
        );
        only_visible(&mut seen_by_b, &versions, "b");
        assert_eq!(seen_by_b.entries[0].tenants, ["b"], "c is not named to b");
        assert_eq!(seen_by_b.fetching.len(), 1);
    }
}
