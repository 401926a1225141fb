//! Tenants' registry credentials (`r/`), keyed by tenant then registry, so
//! one tenant's are one prefix scan and never meet another's.
use crate::batch::WriteBatch;
use crate::errors::Result;
use crate::keys;
use crate::store::Store;
use caldera_spec::registry_credential::RegistryCredential;

/// `r/<len: u32 BE><tenant>`: every credential of `tenant`.
fn tenant_prefix(tenant: &str) -> Vec<u8> {
    keys::length_prefixed(keys::REGISTRY_CREDENTIAL, tenant)
}

/// `r/<len: u32 BE><tenant><registry>`.
fn credential_key(tenant: &str, registry: &str) -> Vec<u8> {
    let mut k = tenant_prefix(tenant);
    k.extend_from_slice(registry.as_bytes());
    k
}

impl Store {
    /// `tenant`'s credentials for `registry`, if set.
    pub fn registry_credential(
        &self,
        tenant: &str,
        registry: &str,
    ) -> Result<Option<RegistryCredential>> {
        self.get(&credential_key(tenant, registry))
    }

    /// Every credential `tenant` has set, ordered by registry.
    pub fn registry_credentials(&self, tenant: &str) -> Result<Vec<RegistryCredential>> {
        self.scan(&tenant_prefix(tenant)).collect()
    }
}

impl WriteBatch {
    /// Inserts or replaces a credential.
    pub fn put_registry_credential(&mut self, c: &RegistryCredential) {
        self.put_json(credential_key(&c.tenant, &c.registry), c);
    }

    /// Deletes `tenant`'s credential for `registry` (absent: no-op).
    pub fn remove_registry_credential(&mut self, tenant: &str, registry: &str) {
        self.remove(credential_key(tenant, registry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreConfig;

    fn cred(tenant: &str, registry: &str) -> RegistryCredential {
        RegistryCredential {
            tenant: tenant.into(),
            registry: registry.into(),
            username: "u".into(),
            password: "p".into(),
            set_ms: 7,
        }
    }

    #[test]
    fn a_tenants_credentials_survive_a_reopen_and_never_list_under_another() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let s = Store::open(tmp.path(), &StoreConfig::default()).unwrap();
            let mut b = s.batch();
            b.put_registry_credential(&cred("a", "registry.internal"));
            b.put_registry_credential(&cred("a", "127.0.0.1:5555"));
            // A tenant whose name extends another's is its own prefix.
            b.put_registry_credential(&cred("ab", "registry.internal"));
            s.commit(b).unwrap();
            s.flush().unwrap();
        }
        let s = Store::open(tmp.path(), &StoreConfig::default()).unwrap();
        let regs = |t: &str| -> Vec<String> {
            s.registry_credentials(t)
                .unwrap()
                .into_iter()
                .map(|c| c.registry)
                .collect()
        };
        assert_eq!(regs("a"), ["127.0.0.1:5555", "registry.internal"]);
        assert_eq!(regs("ab"), ["registry.internal"]);
        assert_eq!(regs("b"), Vec::<String>::new());
        assert!(s
            .registry_credential("b", "registry.internal")
            .unwrap()
            .is_none());
        let mut b = s.batch();
        b.remove_registry_credential("a", "registry.internal");
        s.commit(b).unwrap();
        assert_eq!(regs("a"), ["127.0.0.1:5555"]);
        assert!(s
            .registry_credential("ab", "registry.internal")
            .unwrap()
            .is_some());
    }
}
