//! `/v1/test/failpoints` (operator; compiled only with the `failpoints`
//! feature, which only test builds turn on): arm, read and clear the fail
//! points on the control plane's commit paths, so a test against the real
//! server can make one path's next commit fail and then assert recovery.
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::Operator;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::commit_faults::FaultRule;
use caldera_actors::commit_site::CommitSite;
use caldera_spec::codes;
use serde_json::{json, Value};

/// GET /v1/test/failpoints: commits made and refused per site, and the rules armed.
pub async fn get(_: Operator, st: web::Data<AppState>) -> Reply<Value> {
    let f = st.cp.commit_faults();
    let counts: serde_json::Map<String, Value> = f
        .counts()
        .into_iter()
        .map(|(site, c)| (site.as_str().to_string(), json!(c)))
        .collect();
    let rules: serde_json::Map<String, Value> = f
        .rules()
        .into_iter()
        .map(|(site, r)| (site.map_or("any", CommitSite::as_str).to_string(), json!(r)))
        .collect();
    let sites: Vec<&str> = CommitSite::ALL.iter().map(|s| s.as_str()).collect();
    Reply::ok(json!({ "counts": counts, "rules": rules, "sites": sites }))
}

/// PUT /v1/test/failpoints/{site} `{"skip": S, "fail": N}`: let S commits
/// at `site` (`any`: every site) through, then refuse N.
pub async fn arm(
    _: Operator,
    st: web::Data<AppState>,
    site: web::Path<String>,
    body: web::Bytes,
) -> Result<Reply<Value>, ApiError> {
    let target = match site.as_str() {
        "any" => None,
        name => Some(CommitSite::parse(name).ok_or_else(|| {
            ApiError::new(
                &codes::NOT_FOUND,
                format!("no commit site {name:?}; GET /v1/test/failpoints lists them"),
            )
        })?),
    };
    let rule: FaultRule = caldera_spec::validate::parse_json(&body)?;
    st.cp.commit_faults().arm(target, rule);
    Ok(Reply::ok(json!({ "site": site.as_str(), "rule": rule })))
}

/// DELETE /v1/test/failpoints: every rule removed; commits go through.
pub async fn clear(_: Operator, st: web::Data<AppState>) -> Reply<Value> {
    st.cp.commit_faults().clear();
    Reply::ok(json!({ "cleared": true }))
}
