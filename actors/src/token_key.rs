//! The server's token key file, `<data-dir>/token-key`: the key every stored
//! token digest and node-secret digest is made under (see
//! [`crate::tokens`]). Kept out of sled on purpose, mode 0600 in the 0700
//! data dir; made on the first boot. The store keeps the key's fingerprint,
//! so a data dir opened with another key (or none: the file lost) stops the
//! boot with the reason instead of refusing every tenant's token.
use crate::errors::{ActorError, Result};
use crate::tokens::TokenKey;
use caldera_storage::Store;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file's name in the data dir.
pub const FILE: &str = "token-key";
/// The meta key of the key's fingerprint in the store.
pub const META_FINGERPRINT: &str = "token_key_fingerprint";

/// The key of the data dir `dir`, made if this store has none yet; checked
/// against the fingerprint `store` keeps. Answers the key and whether the
/// fingerprint is still to be stored (a new key).
pub fn open(dir: &Path, store: &Store) -> Result<(TokenKey, bool)> {
    let path = dir.join(FILE);
    let stored = store
        .meta_get(META_FINGERPRINT)?
        .map(|b| String::from_utf8_lossy(&b).to_string());
    let key = match std::fs::read_to_string(&path) {
        Ok(text) => {
            narrow(&path)?;
            TokenKey::from_hex(&text)
                .ok_or_else(|| unusable(&path, "it does not hold a key (64 hex digits)".into()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && stored.is_none() => {
            let key = TokenKey::generate()
                .map_err(|e| ActorError::Unavailable(format!("no randomness for a key: {e}")))?;
            write_new(&path, &key).map_err(|e| unusable(&path, e.to_string()))?;
            key
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(unusable(
                &path,
                "it is missing, and the tokens in this data dir were stored under it; \
                 restore the file from where it was kept"
                    .into(),
            ))
        }
        Err(e) => return Err(unusable(&path, e.to_string())),
    };
    match stored {
        Some(f) if f != key.fingerprint() => Err(unusable(
            &path,
            format!(
                "it is not the key this data dir's tokens were stored under (fingerprint {}, \
                 expected {f}); restore the right file",
                key.fingerprint()
            ),
        )),
        Some(_) => Ok((key, false)),
        None => Ok((key, true)),
    }
}

fn unusable(path: &Path, why: String) -> ActorError {
    ActorError::Unavailable(format!("token key {}: {why}", path.display()))
}

/// Writes a new key file, mode 0600, whole or not at all.
fn write_new(path: &Path, key: &TokenKey) -> std::io::Result<()> {
    let temp: PathBuf = path.with_extension("tmp");
    let _ = std::fs::remove_file(&temp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    f.write_all(key.to_hex().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&temp, path)
}

/// A key file readable by others (copied in by hand) is narrowed to 0600.
fn narrow(path: &Path) -> Result<()> {
    let mode = std::fs::metadata(path)
        .map_err(|e| unusable(path, e.to_string()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| unusable(path, e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_storage::StoreConfig;

    fn store(dir: &Path) -> Store {
        Store::open(&dir.join("sled"), &StoreConfig::default()).unwrap()
    }

    #[test]
    fn a_key_is_made_once_and_a_lost_or_foreign_one_stops_the_boot() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let (key, new) = open(dir.path(), &s).unwrap();
        assert!(new);
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut b = s.batch();
        b.meta_put(META_FINGERPRINT, key.fingerprint().as_bytes());
        s.commit(b).unwrap();
        let (again, new) = open(dir.path(), &s).unwrap();
        assert_eq!((again.fingerprint(), new), (key.fingerprint(), false));

        std::fs::write(
            dir.path().join(FILE),
            TokenKey::generate().unwrap().to_hex(),
        )
        .unwrap();
        let err = open(dir.path(), &s).err().unwrap().to_string();
        assert!(err.contains("not the key"), "{err}");
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        let err = open(dir.path(), &s).err().unwrap().to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
