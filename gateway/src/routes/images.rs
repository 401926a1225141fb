//! Images on the nodes: the operator's pre-pull ahead of a rollout.
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::Operator;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::web;
use caldera_actors::control_plane::images::PrepullTarget;
use caldera_spec::validate::parse_json;
pub use caldera_spec::views::Prepulled;
use caldera_spec::{Envelope, SpecError};
use serde::Deserialize;
use utoipa::ToSchema;

/// The image, and `nodes` or `count`, exactly one.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepullBody {
    /// As a task names it, e.g. `registry.internal/deeplearning/pytorch:2.1-cu12.1`.
    image: String,
    #[serde(default)]
    nodes: Option<Vec<String>>,
    #[serde(default)]
    count: Option<u32>,
}

/// What a pre-pull body asks for: `nodes` or `count`, exactly one (the
/// same rule as a prewarm's).
fn prepull_target(b: &PrepullBody) -> Result<PrepullTarget, SpecError> {
    use caldera_actors::protocol::model::PrewarmTarget;
    Ok(
        match crate::api::models::nodes_or_count(b.nodes.clone(), b.count)? {
            PrewarmTarget::Nodes(n) => PrepullTarget::Nodes(n),
            PrewarmTarget::Count(c) => PrepullTarget::Count(c),
        },
    )
}

/// POST /v1/images/prepull {"image": ..., "nodes": [..]} | {"image": ..., "count": N}
#[utoipa::path(post, path = "/v1/images/prepull", tag = "nodes",
    description = "Pulls an image onto nodes ahead of a rollout (the operator). `nodes` names them; `count` picks that many connected nodes with a container runtime up that do not hold the image yet. Each node's pull takes a pull slot like a start's (`max-image-pulls`): the answer says which nodes pull now and which wait. The image shows in the nodes' reports (`GET /v1/nodes`) once pulled; how each pull ended is an `image_pull` event.",
    request_body = PrepullBody,
    security(("operator" = [])),
    responses(
        (status = 202, description = "the nodes it was sent to", body = Envelope<Prepulled>),
        (status = 400, description = "no image, a bad image reference, neither or both of nodes and count, or an unknown node (the field is named)"),
        (status = 409, description = "no connected node with a container runtime up lacks the image, or a node's session closed"),
        (status = 422, description = "a node named is not connected or has no container runtime up"),
    ))]
pub async fn prepull(
    op: Operator,
    st: web::Data<AppState>,
    payload: web::Payload,
) -> Result<Reply<Prepulled>, ApiError> {
    let body = body::read(payload, st.body_limit).await?;
    let b = parse_json::<PrepullBody>(&body)?;
    let target = prepull_target(&b)?;
    let out = crate::api::images::prepull(&st, &op, &b.image, target).await?;
    let mut nodes: Vec<String> = out.pulling.iter().chain(&out.waiting).cloned().collect();
    nodes.sort();
    Ok(Reply::with_status(
        StatusCode::ACCEPTED,
        Prepulled {
            nodes,
            pulling: out.pulling,
            waiting: out.waiting,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> PrepullBody {
        parse_json::<PrepullBody>(json.as_bytes()).unwrap()
    }

    #[test]
    fn nodes_or_count_exactly_one_each_named_when_wrong() {
        let t = prepull_target(&body(r#"{"image":"r.io/a:1","nodes":["n1"]}"#)).unwrap();
        assert_eq!(t, PrepullTarget::Nodes(vec!["n1".into()]));
        let t = prepull_target(&body(r#"{"image":"r.io/a:1","count":3}"#)).unwrap();
        assert_eq!(t, PrepullTarget::Count(3));
        let field = |json: &str| prepull_target(&body(json)).unwrap_err().field;
        assert_eq!(field(r#"{"image":"r.io/a:1"}"#), "nodes");
        assert_eq!(field(r#"{"image":"r.io/a:1","nodes":[]}"#), "nodes");
        assert_eq!(field(r#"{"image":"r.io/a:1","count":0}"#), "count");
        assert_eq!(
            field(r#"{"image":"r.io/a:1","nodes":["a"],"count":1}"#),
            "nodes"
        );
        assert!(
            parse_json::<PrepullBody>(br#"{"image":"r.io/a:1","count":1,"pin":true}"#).is_err()
        );
        assert!(parse_json::<PrepullBody>(br#"{"count":1}"#).is_err());
    }
}
