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
use caldera_actors::commit_faults::SiteCounts;
use caldera_actors::commit_site::CommitSite;
use caldera_spec::{codes, Envelope};
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Commits made and refused per site, the rules armed, the sites there are.
#[derive(Serialize, ToSchema)]
pub struct Failpoints {
    pub counts: BTreeMap<String, SiteCounts>,
    /// By site (`any`: every site).
    pub rules: BTreeMap<String, FaultRule>,
    pub sites: Vec<&'static str>,
}

/// The rule armed at a site.
#[derive(Serialize, ToSchema)]
pub struct Armed {
    pub site: String,
    pub rule: FaultRule,
}

/// The rules are gone.
#[derive(Serialize, ToSchema)]
pub struct Cleared {
    pub cleared: bool,
}

/// GET /v1/test/failpoints: commits made and refused per site, and the rules armed.
#[utoipa::path(get, path = "/v1/test/failpoints", tag = "test",
    description = "Test builds only (the failpoints feature).",
    security(("operator" = [])),
    responses((status = 200, description = "counters and rules", body = Envelope<Failpoints>)))]
pub async fn get(_: Operator, st: web::Data<AppState>) -> Reply<Failpoints> {
    let f = st.cp.commit_faults();
    let counts = f
        .counts()
        .into_iter()
        .map(|(site, c)| (site.as_str().to_string(), c))
        .collect();
    let rules = f
        .rules()
        .into_iter()
        .map(|(site, r)| (site.map_or("any", CommitSite::as_str).to_string(), r))
        .collect();
    let sites = CommitSite::ALL.iter().map(|s| s.as_str()).collect();
    Reply::ok(Failpoints {
        counts,
        rules,
        sites,
    })
}

/// The pseudo-site of the disk fail point: `{"fail": 1}` fills the disk
/// (files may not grow past the store's size now), `{"fail": 0}` or the
/// DELETE frees it.
const DISK: &str = "disk";

/// PUT /v1/test/failpoints/{site} `{"skip": S, "fail": N}`: let S commits
/// at `site` (`any`: every site) through, then refuse N. Site `disk`: a
/// full disk while `fail` > 0 (sled's own writes fail), freed with 0.
#[utoipa::path(put, path = "/v1/test/failpoints/{site}", tag = "test",
    description = "Test builds only (the failpoints feature).",
    params(("site" = String, Path, description = "a commit site, `any`, or `disk` (a full disk while fail > 0)")),
    request_body = FaultRule,
    security(("operator" = [])),
    responses(
        (status = 200, description = "the rule armed", body = Envelope<Armed>),
        (status = 400, description = "the body is not a rule"),
        (status = 404, description = "no such commit site"),
    ))]
pub async fn arm(
    _: Operator,
    st: web::Data<AppState>,
    site: web::Path<String>,
    payload: web::Payload,
) -> Result<Reply<Armed>, ApiError> {
    let body = crate::body::read(payload, st.body_limit).await?;
    let rule: FaultRule = caldera_spec::validate::parse_json(&body)?;
    if site.as_str() == DISK {
        // Not a commit site: the disk itself (`fail` > 0 fills it).
        st.cp
            .fill_disk(rule.fail > 0)
            .map_err(|e| ApiError::new(&codes::INTERNAL, format!("the disk fail point: {e}")))?;
        return Ok(Reply::ok(Armed {
            site: site.into_inner(),
            rule,
        }));
    }
    let target = match site.as_str() {
        "any" => None,
        name => Some(CommitSite::parse(name).ok_or_else(|| {
            ApiError::new(
                &codes::NOT_FOUND,
                format!("no commit site {name:?}; GET /v1/test/failpoints lists them"),
            )
        })?),
    };
    st.cp.commit_faults().arm(target, rule);
    Ok(Reply::ok(Armed {
        site: site.into_inner(),
        rule,
    }))
}

/// DELETE /v1/test/failpoints: every rule removed; commits go through.
#[utoipa::path(delete, path = "/v1/test/failpoints", tag = "test",
    description = "Test builds only (the failpoints feature).",
    security(("operator" = [])),
    responses((status = 200, description = "every rule removed", body = Envelope<Cleared>)))]
pub async fn clear(_: Operator, st: web::Data<AppState>) -> Result<Reply<Cleared>, ApiError> {
    st.cp.commit_faults().clear();
    st.cp
        .fill_disk(false)
        .map_err(|e| ApiError::new(&codes::INTERNAL, format!("the disk fail point: {e}")))?;
    Ok(Reply::ok(Cleared { cleared: true }))
}
