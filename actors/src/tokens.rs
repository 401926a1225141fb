//! Bearer tokens: generated from the OS's randomness, stored only as SHA-256.
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::RwLock;

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Manages quotas, nodes, models; sees every tenant.
    Operator,
    /// Sees and touches only its own tenant's tasks.
    Tenant(String),
    /// May only open a node session.
    NodeJoin,
}

/// A fresh token: 32 random bytes as hex.
pub fn generate() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

/// SHA-256 of a token, hex.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Token-hash -> principal, shared by the gateway (reads) and the cluster (writes).
#[derive(Default)]
pub struct TokenBook {
    by_hash: RwLock<HashMap<String, Principal>>,
}

impl TokenBook {
    pub fn insert_hash(&self, hash: String, p: Principal) {
        if let Ok(mut m) = self.by_hash.write() {
            m.insert(hash, p);
        }
    }

    /// Who holds `token`, if anyone.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        let h = hash(token);
        self.by_hash.read().ok()?.get(&h).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_by_hash_only() {
        let book = TokenBook::default();
        let t = generate().unwrap();
        assert_eq!(t.len(), 64);
        book.insert_hash(hash(&t), Principal::Tenant("a".into()));
        assert_eq!(book.authenticate(&t), Some(Principal::Tenant("a".into())));
        assert_eq!(book.authenticate("not-a-token"), None);
        assert_ne!(hash(&t), t);
    }
}
