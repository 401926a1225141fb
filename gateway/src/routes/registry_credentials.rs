//! A tenant's image-registry credentials: the tenant itself or the operator
//! sets, lists and deletes them; another tenant is answered 404, as for a
//! tenant that does not exist. The password is never answered back: a
//! listing says which registries have credentials and since when.
use crate::api::{registry_credentials as api, tenants};
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::control_plane::registry_credentials::CredentialSummary;
use caldera_spec::registry_credential::{check_registry_name, parse_new_credential};
use caldera_spec::time::rfc3339;
pub use caldera_spec::views::{
    RegistryCredentialDeleted, RegistryCredentialList, RegistryCredentialView,
};
use caldera_spec::Envelope;
use utoipa::ToSchema;

/// The body of a PUT: the user name and the password (or token).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct RegistryLogin {
    pub username: String,
    /// Never shown back.
    pub password: String,
}

fn view(s: &CredentialSummary) -> RegistryCredentialView {
    RegistryCredentialView {
        registry: s.registry.clone(),
        set_at: rfc3339(s.set_ms),
        set_at_ms: s.set_ms,
    }
}

/// PUT /v1/tenants/{name}/registry-credentials/{registry}
#[utoipa::path(put, path = "/v1/tenants/{name}/registry-credentials/{registry}", tag = "tenants",
    operation_id = "registry_credentials_set",
    description = "Sets the tenant's credentials for one image registry (replacing any). The tenant's container tasks whose image comes from that registry pull with them; the agent gets them in a file only it can read. The password is never answered back, logged or put in an event.",
    params(("name" = String, Path, description = "the tenant"), ("registry" = String, Path, description = "registry host, with :port where it has one")),
    request_body = RegistryLogin,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "replaced", body = Envelope<RegistryCredentialView>),
        (status = 201, description = "set", body = Envelope<RegistryCredentialView>),
        (status = 400, description = "a bad registry name, or a body that is not {username, password} (the field is named, its value never quoted)"),
        (status = 404, description = "no such tenant (or another tenant's)"),
    ))]
pub async fn set(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
    payload: web::Payload,
) -> Result<Reply<RegistryCredentialView>, ApiError> {
    let (tenant, registry) = path.into_inner();
    let tenant = tenants::find(&st, &user, &tenant).await?;
    // A bad registry name is named before the body is read.
    check_registry_name(&registry)?;
    let body = body::read(payload, st.body_limit).await?;
    let new = parse_new_credential(&body)?;
    let (summary, created) = api::set(&st, &tenant, &registry, new).await?;
    Ok(if created {
        Reply::created(view(&summary))
    } else {
        Reply::ok(view(&summary))
    })
}

/// GET /v1/tenants/{name}/registry-credentials
#[utoipa::path(get, path = "/v1/tenants/{name}/registry-credentials", tag = "tenants",
    operation_id = "registry_credentials_list",
    description = "The registries the tenant has credentials for, and when each was set; never a user name or password.",
    params(("name" = String, Path, description = "the tenant")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the registries", body = Envelope<RegistryCredentialList>),
        (status = 404, description = "no such tenant (or another tenant's)"),
    ))]
pub async fn list(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<RegistryCredentialList>, ApiError> {
    let tenant = tenants::find(&st, &user, &name).await?;
    let all = api::list(&st, &tenant).await?;
    Ok(Reply::ok(RegistryCredentialList {
        tenant: name.into_inner(),
        registry_credentials: all.iter().map(view).collect(),
    }))
}

/// DELETE /v1/tenants/{name}/registry-credentials/{registry}
#[utoipa::path(delete, path = "/v1/tenants/{name}/registry-credentials/{registry}", tag = "tenants",
    operation_id = "registry_credentials_delete",
    params(("name" = String, Path, description = "the tenant"), ("registry" = String, Path, description = "registry host")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "deleted: the tenant's tasks pull from that registry without credentials", body = Envelope<RegistryCredentialDeleted>),
        (status = 404, description = "no such tenant (or another tenant's), or no credentials for that registry"),
    ))]
pub async fn delete(
    user: User,
    st: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<Reply<RegistryCredentialDeleted>, ApiError> {
    let (tenant, registry) = path.into_inner();
    let tenant = tenants::find(&st, &user, &tenant).await?;
    api::delete(&st, &tenant, &registry).await?;
    Ok(Reply::ok(RegistryCredentialDeleted { registry }))
}
