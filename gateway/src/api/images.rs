//! Images on the nodes: the operator's pre-pull ahead of a rollout.
use crate::error::ApiError;
use crate::principal::Operator;
use crate::state::AppState;
use caldera_actors::control_plane::images::PrepullTarget;

/// Where a pre-pull went: the nodes pulling now, and those waiting for a
/// pull slot (`max-image-pulls` nodes pull one image at once).
pub struct PrepullSent {
    pub pulling: Vec<String>,
    pub waiting: Vec<String>,
}

/// Pulls `image` onto `target`'s nodes.
pub async fn prepull(
    st: &AppState,
    _: &Operator,
    image: &str,
    target: PrepullTarget,
) -> Result<PrepullSent, ApiError> {
    let out = st.cp.prepull_image(image, target).await?;
    Ok(PrepullSent {
        pulling: out.sent,
        waiting: out.waiting,
    })
}
