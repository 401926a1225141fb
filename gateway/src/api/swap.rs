//! A service's hot swap of its model version: in place, replica by replica,
//! in the name of whoever asked (the service is a [`VisibleTask`], so the
//! tenant checks have passed).
use super::tasks::VisibleTask;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use caldera_actors::control_plane::swap::SwapRequest;
use caldera_spec::SwapAnswer;

/// Who asked for a swap, as its record and events say: the tenant whose
/// token it was (a tenant only reaches its own services), or the operator.
fn requested_by(caller: &User) -> String {
    match caller.tenant() {
        Some(tenant) => format!("tenant {tenant}"),
        None => "the operator".to_string(),
    }
}

/// Swaps the service's model version in place, replica by replica, in the
/// caller's name.
pub async fn swap(
    st: &AppState,
    caller: &User,
    task: &VisibleTask,
    req: SwapRequest,
) -> Result<SwapAnswer, ApiError> {
    Ok(st
        .cp
        .swap_model(&task.key, req, requested_by(caller))
        .await?)
}
