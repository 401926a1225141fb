//! The task a portal page's address names (`/tasks/{id}`, with `?tenant=`
//! for the operator), if the viewer may see it: the task page and its
//! actions (release, scale, a service's hot swap) all start from it.
use super::auth::Viewer;
use super::error::PortalError;
use crate::api;
use crate::api::tasks::VisibleTask;
use crate::routes::Query;
use crate::state::AppState;

/// The tenant the page's address names, if any (blank: none).
fn tenant_q(q: &Query) -> Option<&str> {
    q.get("tenant")
        .map(String::as_str)
        .filter(|t| !t.is_empty())
}

/// The task the page's address names, if the viewer may see it.
pub async fn find(
    viewer: &Viewer,
    st: &AppState,
    id: &str,
    q: &Query,
) -> Result<VisibleTask, PortalError> {
    Ok(api::tasks::find(st, &viewer.user(), tenant_q(q), id).await?)
}
