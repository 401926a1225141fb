//! Bearer tokens and node secrets: generated from the OS's randomness and
//! stored only as a keyed digest, HMAC-SHA256 under the server's token key
//! (a file of its own beside the store, mode 0600, never in sled). A copy of
//! the store alone — a backup, a file read by someone it was not meant for —
//! then gives no way to check a guessed token, and the digests in it match
//! no other cluster's. Tokens are 256 random bits, so no guess can succeed
//! anyway; a slow hash would buy nothing and cost every request.
//!
//! The HMAC is taken over the token's plain SHA-256 (what stores kept before
//! they had a key): a stored plain hash is upgraded in place at boot, with
//! no token in hand.
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::RwLock;

/// What a keyed digest starts with, telling it from a plain SHA-256.
const KEYED: &str = "hmac-sha256:";

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

/// SHA-256 of a token, hex: the key of what only lives in memory (portal
/// sessions), and what a keyed digest is taken over.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The server's token key: 32 random bytes.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl TokenKey {
    /// A new random key.
    pub fn generate() -> Result<TokenKey, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(TokenKey(bytes))
    }

    /// The key as its file holds it (64 hex digits).
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// Reads 64 hex digits; None for anything else.
    pub fn from_hex(text: &str) -> Option<TokenKey> {
        let text = text.trim();
        if text.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(TokenKey(bytes))
    }

    /// A short fingerprint, kept in the store, so a store opened with
    /// another key file is noticed instead of every token failing.
    pub fn fingerprint(&self) -> String {
        hex(&Sha256::digest(self.0))[..16].to_string()
    }
}

/// Token-digest -> principal, shared by the gateway (reads) and the cluster
/// (writes), with the key the digests are made under.
pub struct TokenBook {
    key: TokenKey,
    by_hash: RwLock<HashMap<String, Principal>>,
}

impl Default for TokenBook {
    /// A book under a fresh random key (stand-ins and tests; the server
    /// opens its book with the key from its file).
    fn default() -> TokenBook {
        let key = TokenKey::generate().unwrap_or(TokenKey([0x5a; 32]));
        TokenBook::new(key)
    }
}

impl TokenBook {
    pub fn new(key: TokenKey) -> TokenBook {
        TokenBook {
            key,
            by_hash: RwLock::new(HashMap::new()),
        }
    }

    /// The digest stored for `token`.
    pub fn digest(&self, token: &str) -> String {
        self.keyed(&hash(token))
    }

    /// A stored digest in its current form: a plain SHA-256 (from a store
    /// made before the key) becomes its keyed digest; a keyed one is kept.
    pub fn upgrade(&self, stored: &str) -> String {
        if is_keyed(stored) {
            stored.to_string()
        } else {
            self.keyed(stored)
        }
    }

    fn keyed(&self, sha256_hex: &str) -> String {
        // HMAC takes a key of any length: `new_from_slice` cannot fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key.0) else {
            return String::new();
        };
        mac.update(sha256_hex.as_bytes());
        format!("{KEYED}{}", hex(&mac.finalize().into_bytes()))
    }

    /// Whether `presented` is the secret whose digest is `stored` (either
    /// form), compared in constant time.
    pub fn matches(&self, stored: &str, presented: &str) -> bool {
        let want = self.upgrade(stored);
        let got = self.digest(presented);
        want.len() == got.len()
            && want
                .bytes()
                .zip(got.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// Registers a stored digest (either form) for `p`.
    pub fn insert_hash(&self, stored: String, p: Principal) {
        let digest = self.upgrade(&stored);
        if let Ok(mut m) = self.by_hash.write() {
            m.insert(digest, p);
        }
    }

    /// Who holds `token`, if anyone.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        let h = self.digest(token);
        self.by_hash.read().ok()?.get(&h).cloned()
    }
}

/// Whether a stored digest is keyed (else a plain SHA-256 from before).
pub fn is_keyed(stored: &str) -> bool {
    stored.starts_with(KEYED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_by_keyed_digest_only() {
        let book = TokenBook::default();
        let t = generate().unwrap();
        assert_eq!(t.len(), 64);
        book.insert_hash(book.digest(&t), Principal::Tenant("a".into()));
        assert_eq!(book.authenticate(&t), Some(Principal::Tenant("a".into())));
        assert_eq!(book.authenticate("not-a-token"), None);
        assert!(is_keyed(&book.digest(&t)));
        assert!(!book.digest(&t).contains(&hash(&t)));
    }

    #[test]
    fn the_same_token_has_another_digest_under_another_key() {
        let a = TokenBook::new(TokenKey::generate().unwrap());
        let b = TokenBook::new(TokenKey::generate().unwrap());
        assert_ne!(a.digest("t"), b.digest("t"));
    }

    #[test]
    fn a_plain_hash_from_an_older_store_is_upgraded_and_still_accepted() {
        let book = TokenBook::default();
        let legacy = hash("old-token");
        let upgraded = book.upgrade(&legacy);
        assert_eq!(upgraded, book.digest("old-token"));
        assert_eq!(
            book.upgrade(&upgraded),
            upgraded,
            "upgrading twice changes nothing"
        );
        book.insert_hash(legacy.clone(), Principal::Operator);
        assert_eq!(book.authenticate("old-token"), Some(Principal::Operator));
        assert!(book.matches(&legacy, "old-token"));
        assert!(book.matches(&upgraded, "old-token"));
        assert!(!book.matches(&upgraded, "old-tokem"));
    }

    #[test]
    fn a_key_survives_its_file_and_nothing_else_reads_as_one() {
        let k = TokenKey::generate().unwrap();
        let back = TokenKey::from_hex(&format!("{}\n", k.to_hex())).unwrap();
        assert_eq!(back.0, k.0);
        assert_eq!(back.fingerprint(), k.fingerprint());
        for bad in ["", "zz", &"g".repeat(64), &"a".repeat(63)] {
            assert!(TokenKey::from_hex(bad).is_none(), "{bad}");
        }
    }
}
