//! A tenant's image-registry credentials as the API shows them
//! (`/v1/tenants/{name}/registry-credentials`): never the secret.
use serde::{Deserialize, Serialize};

/// One registry's credentials, as they are shown: never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistryCredentialView {
    /// Registry host, with `:port` where it has one.
    pub registry: String,
    /// When they were set, RFC 3339.
    pub set_at: String,
    pub set_at_ms: u64,
}

/// A tenant's registries with credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistryCredentialList {
    pub tenant: String,
    pub registry_credentials: Vec<RegistryCredentialView>,
}

/// What a delete answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegistryCredentialDeleted {
    pub registry: String,
}

/// The nodes a pre-pull went to (`POST /v1/images/prepull`): pulling now,
/// or waiting for a pull slot (`max-image-pulls` nodes pull one image at
/// once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Prepulled {
    pub nodes: Vec<String>,
    pub pulling: Vec<String>,
    pub waiting: Vec<String>,
}
