//! A tenant's image-registry credentials: set, listed and deleted by the
//! tenant itself or the operator (the tenant is a [`VisibleTenant`]). The
//! password is never answered back: a listing says which registries have
//! credentials and since when.
use super::tenants::VisibleTenant;
use crate::error::ApiError;
use crate::state::AppState;
use caldera_actors::control_plane::registry_credentials::CredentialSummary;
use caldera_spec::registry_credential::{check_registry_name, NewRegistryCredential};

/// Sets the tenant's credentials for `registry` (replacing any): their
/// summary, and whether none were set before.
pub async fn set(
    st: &AppState,
    tenant: &VisibleTenant,
    registry: &str,
    login: NewRegistryCredential,
) -> Result<(CredentialSummary, bool), ApiError> {
    check_registry_name(registry)?;
    Ok(st
        .cp
        .set_registry_credential(tenant.name(), registry, login)
        .await?)
}

/// The registries the tenant has credentials for.
pub async fn list(
    st: &AppState,
    tenant: &VisibleTenant,
) -> Result<Vec<CredentialSummary>, ApiError> {
    Ok(st.cp.registry_credentials(tenant.name()).await?)
}

/// Deletes the tenant's credentials for `registry`.
pub async fn delete(st: &AppState, tenant: &VisibleTenant, registry: &str) -> Result<(), ApiError> {
    Ok(st
        .cp
        .delete_registry_credential(tenant.name(), registry)
        .await?)
}
