//! The facade's registry credentials: a tenant's user name and password for
//! an image registry, set, listed (registries and when, never the secret)
//! and deleted. Who may touch which tenant's is the gateway's call; here
//! each change is made durable before it is answered. No event is recorded
//! and nothing is logged of them: an event log is read by many.
use super::{blocking, ControlPlane};
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use caldera_spec::registry_credential::{NewRegistryCredential, RegistryCredential};

/// What a listing shows of one credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSummary {
    pub registry: String,
    pub set_ms: u64,
}

impl ControlPlane {
    /// Sets (or replaces) `tenant`'s credentials for `registry`; `true`
    /// when none were set before.
    pub async fn set_registry_credential(
        &self,
        tenant: &str,
        registry: &str,
        new: NewRegistryCredential,
    ) -> Result<(CredentialSummary, bool)> {
        if self.tenant(tenant).await?.is_none() {
            return Err(ActorError::not_found("tenant", tenant));
        }
        let rec = RegistryCredential {
            tenant: tenant.to_string(),
            registry: registry.to_string(),
            username: new.username,
            password: new.password,
            set_ms: self.sh.now_ms(),
        };
        let (store, t, r) = (self.store(), tenant.to_string(), registry.to_string());
        let existed = blocking(move || store.registry_credential(&t, &r)).await?;
        let mut b = self.store().batch();
        b.put_registry_credential(&rec);
        self.sh
            .gate
            .commit_durable(CommitSite::RegistryCredential, b)
            .await
            .map_err(|e| ActorError::not_recorded("the registry credentials", e))?;
        Ok((summary(&rec), existed.is_none()))
    }

    /// `tenant`'s credentials, registries and when they were set.
    pub async fn registry_credentials(&self, tenant: &str) -> Result<Vec<CredentialSummary>> {
        let (store, t) = (self.store(), tenant.to_string());
        let all = blocking(move || store.registry_credentials(&t)).await?;
        Ok(all.iter().map(summary).collect())
    }

    /// Deletes `tenant`'s credentials for `registry`; a 404 when none are set.
    pub async fn delete_registry_credential(&self, tenant: &str, registry: &str) -> Result<()> {
        let (store, t, r) = (self.store(), tenant.to_string(), registry.to_string());
        if blocking(move || store.registry_credential(&t, &r))
            .await?
            .is_none()
        {
            return Err(ActorError::not_found("registry credentials for", registry));
        }
        let mut b = self.store().batch();
        b.remove_registry_credential(tenant, registry);
        self.sh
            .gate
            .commit_durable(CommitSite::RegistryCredential, b)
            .await
            .map_err(|e| ActorError::not_recorded("the deletion of the registry credentials", e))
    }
}

fn summary(c: &RegistryCredential) -> CredentialSummary {
    CredentialSummary {
        registry: c.registry.clone(),
        set_ms: c.set_ms,
    }
}
