//! Tenants: the operator creates them (the token is shown once), changes
//! their quotas and lists them; a tenant sees itself. Another tenant is
//! "not found", as a tenant that does not exist.
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use caldera_spec::views::{TenantList, TenantView};
use caldera_spec::{Quota, TenantRecord};

/// A tenant as the API shows it (never its token).
fn view(t: &TenantRecord) -> TenantView {
    TenantView {
        name: t.name.clone(),
        quota: t.quota.clone(),
        guaranteed: t.quota.clone(),
        borrowing_limit: t.borrowing_limit.clone(),
        created_at: caldera_spec::time::rfc3339(t.created_ms),
        token: None,
    }
}

/// Creates tenant `name`; its token is in this answer only.
pub async fn create(
    st: &AppState,
    _: &Operator,
    name: String,
    quota: Quota,
    borrowing_limit: Quota,
) -> Result<TenantView, ApiError> {
    let (rec, token) = st.cp.create_tenant(name, quota, borrowing_limit).await?;
    let mut v = view(&rec);
    v.token = Some(token);
    Ok(v)
}

/// Changes the tenant's guarantee and/or borrowing limit, each checked.
pub async fn set_quota(
    st: &AppState,
    _: &Operator,
    name: &str,
    guaranteed: Option<Quota>,
    borrowing_limit: Option<Quota>,
) -> Result<TenantView, ApiError> {
    for q in [&guaranteed, &borrowing_limit].into_iter().flatten() {
        q.validate()?;
    }
    let rec = st
        .cp
        .change_quota(name, guaranteed, borrowing_limit)
        .await?;
    Ok(view(&rec))
}

/// Every tenant.
pub async fn list(st: &AppState, _: &Operator) -> Result<TenantList, ApiError> {
    let tenants = st.cp.tenants().await?.iter().map(view).collect();
    Ok(TenantList { tenants })
}

/// A tenant the caller may see: made only by [`find`], so holding one
/// means the check passed.
pub struct VisibleTenant {
    pub record: TenantRecord,
}

impl VisibleTenant {
    pub fn name(&self) -> &str {
        &self.record.name
    }
}

/// Tenant `name` if the caller may see it (the operator, or the tenant
/// itself); otherwise a 404 that does not say whether it exists.
pub async fn find(st: &AppState, caller: &User, name: &str) -> Result<VisibleTenant, ApiError> {
    match st.cp.tenant(name).await? {
        Some(record) if caller.may_see(name) => Ok(VisibleTenant { record }),
        _ => Err(ApiError::not_found("tenant", name)),
    }
}

/// Tenant `name` as the API shows it, if the caller may see it.
pub async fn get(st: &AppState, caller: &User, name: &str) -> Result<TenantView, ApiError> {
    Ok(view(&find(st, caller, name).await?.record))
}
