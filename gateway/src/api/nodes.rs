//! Nodes: the inventory every user sees (a tenant without the images a
//! node holds), and the operator's changes: cordon, drain, uncordon,
//! revoke, a new secret; the allocation ledger.
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use caldera_actors::control_plane::CordonChange;
use caldera_actors::views::NodeView;
use caldera_spec::views::{Allocations, NodeList};
use caldera_spec::Allocation;

/// Every node. A tenant is not shown the images a node holds: an image's
/// name can tell one tenant's work to another.
pub async fn list(st: &AppState, caller: &User) -> Result<NodeList, ApiError> {
    let mut nodes = st.cp.nodes().await?;
    if caller.tenant().is_some() {
        nodes.iter_mut().for_each(|n| n.images = None);
    }
    Ok(NodeList { nodes })
}

/// Node `name`. A tenant is shown only the cached copies of versions it
/// may use, and none of the node's cache totals, which would count the rest.
pub async fn get(st: &AppState, caller: &User, name: &str) -> Result<NodeView, ApiError> {
    match st.cp.node_seen_by(name, caller.tenant()).await? {
        Some(v) => Ok(v),
        None => Err(ApiError::not_found("node", name)),
    }
}

/// The Scheduler's ledger and sled's copy of it, ids as every view shows
/// them (the tenant's own, beside the `tenant` field).
pub async fn allocations(st: &AppState, _: &Operator) -> Result<Allocations, ApiError> {
    let (ledger, stored) = st.cp.allocations().await?;
    let view = |v: Vec<caldera_spec::Allocation>| -> Vec<caldera_spec::Allocation> {
        v.iter()
            .map(caldera_actors::views::allocation_view)
            .collect()
    };
    Ok(Allocations {
        ledger: view(ledger),
        stored: view(stored),
    })
}

/// The node's view once `how` is recorded; 404 naming an unknown node.
pub async fn change_cordon(
    st: &AppState,
    _: &Operator,
    name: &str,
    how: CordonChange,
) -> Result<NodeView, ApiError> {
    match st.cp.change_cordon(name, how).await? {
        Some(v) => Ok(v),
        None => Err(ApiError::not_found("node", name)),
    }
}

/// Revokes the node's secret and closes its session.
pub async fn revoke(st: &AppState, _: &Operator, name: &str) -> Result<NodeView, ApiError> {
    match st.cp.revoke_node(name).await? {
        Some(v) => Ok(v),
        None => Err(ApiError::not_found("node", name)),
    }
}

/// A new secret for the node, handed over its live session.
pub async fn rotate_secret(st: &AppState, _: &Operator, name: &str) -> Result<NodeView, ApiError> {
    match st.cp.rotate_node_secret(name).await? {
        Some(v) => Ok(v),
        None => Err(ApiError::not_found("node", name)),
    }
}

/// Node `name` as the caller may see it (a tenant: only the cached copies
/// of versions it may use); `None` when no such node is registered.
pub async fn find(st: &AppState, caller: &User, name: &str) -> Result<Option<NodeView>, ApiError> {
    Ok(st.cp.node_seen_by(name, caller.tenant()).await?)
}

/// The live allocations as the caller may see them: where each sits and
/// what it holds (the room a GPU's memory bar shows), and for a tenant
/// nothing of whose another tenant's allocation is (no task, id, tenant or
/// image), so nothing drawn from it can name another tenant's work.
pub async fn ledger(st: &AppState, caller: &User) -> Result<Vec<Allocation>, ApiError> {
    let (mut ledger, _) = st.cp.allocations().await?;
    if let Some(t) = caller.tenant() {
        ledger
            .iter_mut()
            .filter(|a| a.tenant != t)
            .for_each(anonymize);
    }
    Ok(ledger)
}

/// An allocation with nothing left that says whose it is.
fn anonymize(a: &mut Allocation) {
    a.allocation_id.clear();
    a.task_id.clear();
    a.tenant.clear();
    a.image_digest = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anonymized_allocation_keeps_its_room_and_loses_its_owner() {
        let mut a = Allocation {
            allocation_id: "b/job.1".into(),
            task_id: "b/job".into(),
            tenant: "b".into(),
            node: "n1".into(),
            gpus: Vec::new(),
            cpu_milli: 2000,
            memory_mb: 1024,
            disk_mb: 0,
            exclusive: false,
            epoch: 1,
            created_ms: 0,
            borrowed: false,
            priority: 50,
            image_digest: Some("sha256:ab".into()),
        };
        anonymize(&mut a);
        assert_eq!((a.node.as_str(), a.cpu_milli), ("n1", 2000));
        assert!(a.task_id.is_empty() && a.tenant.is_empty() && a.allocation_id.is_empty());
        assert_eq!(a.image_digest, None);
    }
}
