//! Containers this agent made whose allocation it no longer holds: left by
//! a shim that died with its container still up, or by a node fenced while
//! it was cut off. Found by the agent's label (`caldera.node`), never by
//! name pattern, so another agent's or another tool's containers on the
//! same host are never touched; removed at agent start (after adoption)
//! and whenever a welcome fences allocations.
use super::podman;
use super::run_args::{LABEL_ALLOCATION, LABEL_NODE};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Longest a `podman ps` or `podman rm` may take here.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One container of this agent's, as `podman ps` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    pub name: String,
    pub allocation_id: String,
}

/// Every container (running or not) labelled for `node`.
pub fn list(podman: &Path, node: &str) -> Result<Vec<Labelled>, podman::PodmanError> {
    let filter = format!("label={LABEL_NODE}={node}");
    let out = podman::run(
        podman,
        &["ps", "--all", "--filter", &filter, "--format", "json"],
        TIMEOUT,
    )?;
    if !out.success {
        return Err(podman::PodmanError::Failed {
            verb: "ps",
            why: out.why(),
        });
    }
    parse(&out.stdout, node)
}

/// Reads `podman ps --format json`; only entries whose label really is
/// `node` count (the filter is podman's; this is ours).
fn parse(json: &str, node: &str) -> Result<Vec<Labelled>, podman::PodmanError> {
    let text = json.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| podman::PodmanError::Unreadable {
            verb: "ps",
            why: e.to_string(),
        })?;
    let entries = v.as_array().cloned().unwrap_or_default();
    Ok(entries
        .iter()
        .filter_map(|c| {
            let labels = c.get("Labels")?;
            (labels.get(LABEL_NODE)?.as_str()? == node).then_some(())?;
            let allocation_id = labels.get(LABEL_ALLOCATION)?.as_str()?.to_string();
            let name = c.get("Names")?.as_array()?.first()?.as_str()?.to_string();
            Some(Labelled {
                name,
                allocation_id,
            })
        })
        .collect())
}

/// Removes this agent's containers whose allocation is not in `held`;
/// returns the names removed (a failure is logged; the next sweep retries).
pub fn remove(podman: &Path, node: &str, held: &BTreeSet<String>) -> Vec<String> {
    let found = match list(podman, node) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("cannot look for orphaned containers: {e}");
            return Vec::new();
        }
    };
    let orphans: Vec<Labelled> = found
        .into_iter()
        .filter(|c| !held.contains(&c.allocation_id))
        .collect();
    remove_listed(podman, &orphans)
}

/// Removes the containers `orphans` names; returns the names removed.
pub fn remove_listed(podman: &Path, orphans: &[Labelled]) -> Vec<String> {
    let mut removed = Vec::new();
    for c in orphans {
        match podman::remove(podman, &c.name) {
            Ok(()) => {
                tracing::warn!(
                    "removed container {} of allocation {}, which this node no longer holds",
                    c.name,
                    c.allocation_id
                );
                removed.push(c.name.clone());
            }
            Err(e) => tracing::error!("cannot remove orphaned container {}: {e}", c.name),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_agents_labelled_containers_are_listed() {
        let json = r#"[
          {"Id":"1","Names":["caldera-a1-x"],"Labels":{"caldera.node":"n1-aa","caldera.allocation":"acme/a1"}},
          {"Id":"2","Names":["caldera-a2-y"],"Labels":{"caldera.node":"n1-bb","caldera.allocation":"acme/a2"}},
          {"Id":"3","Names":["other"],"Labels":null}
        ]"#;
        let found = parse(json, "n1-aa").unwrap();
        assert_eq!(
            found,
            vec![Labelled {
                name: "caldera-a1-x".into(),
                allocation_id: "acme/a1".into()
            }]
        );
        assert!(parse("", "n1-aa").unwrap().is_empty());
        assert!(matches!(
            parse("[", "n1-aa"),
            Err(podman::PodmanError::Unreadable { verb: "ps", .. })
        ));
    }
}
