//! `POST /v1/models/{name}/versions/{version}/retire`: the operator's
//! control message that takes a version out of service.
use crate::api::models as api;
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::Operator;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::model::view::VersionView;
use caldera_spec::validate::parse_json;
use caldera_spec::Envelope;
use serde::Deserialize;
use utoipa::ToSchema;

/// What replaces the version, if anything. An empty body is `{}`.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RetireBody {
    /// `name:version` the services still on this version are moved to.
    #[serde(default)]
    replace_with: Option<String>,
}

/// POST /v1/models/{name}/versions/{version}/retire {"replace_with"?: "name:v"}
#[utoipa::path(post, path = "/v1/models/{name}/versions/{version}/retire", tag = "models",
    description = "Records `retiring` (with who asked, when and `replace_with`) before anything else: from then the version takes no new tasks (422 `model_not_accepting`, field `model`). While a task still uses it, it stays `retiring` and `GET .../versions/{version}` lists them in `used_by`, by tenant. Once none does, it becomes `retired` (an event names who asked) and every node holding a copy evicts it (a node offline then, when it says hello again). Asked again with the same body it answers the version as it is.",
    params(("name" = String, Path, description = "the model"), ("version" = String, Path, description = "the version")),
    request_body = RetireBody,
    security(("operator" = [])),
    responses(
        (status = 200, description = "the version, retiring (or retired)", body = Envelope<VersionView>),
        (status = 404, description = "no such version"),
        (status = 409, description = "retiring already with another replace_with (`retire_in_progress`)"),
        (status = 422, description = "replace_with names no registered version, this version, or one that takes no new tasks (`replacement_invalid`)"),
    ))]
pub async fn retire(
    op: Operator,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<Reply<VersionView>, ApiError> {
    let (name, version) = path.into_inner();
    let body = body::read(payload, st.body_limit).await?;
    let b = if body.iter().all(u8::is_ascii_whitespace) {
        RetireBody::default()
    } else {
        parse_json::<RetireBody>(&body)?
    };
    let v = api::retire(&st, &op, &name, &version, b.replace_with).await?;
    Ok(Reply::ok(v))
}
