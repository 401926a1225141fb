//! Checking a file against its registered size and SHA-256, streaming (a
//! model is tens of GB: it is never held in memory). Blocking: callers run
//! it on tokio's blocking pool so the agent's loop keeps its heartbeats.
use sha2::{Digest, Sha256};
use std::io::{self, Read};
use std::path::Path;

/// Read size of the checksum loop.
const READ_BUF: usize = 1 << 20;

/// Why a file is not the copy it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Missing or unreadable.
    Unreadable(String),
    Size {
        expected: u64,
        found: u64,
    },
    /// The bytes hash to something else. What they hash to is never kept:
    /// echoed in an error, the SHA-256 of a prefix of a file the registrant
    /// could not read (a declared size that lies) would give that file away
    /// byte by byte.
    Sha256 {
        expected: String,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Unreadable(e) => write!(f, "unreadable: {e}"),
            Mismatch::Size { expected, found } => {
                write!(f, "size {found} bytes, registered {expected}")
            }
            Mismatch::Sha256 { expected } => {
                write!(f, "its sha256 is not the registered {expected}")
            }
        }
    }
}

/// Checks the size first (cheap: a truncated copy is caught without reading
/// it), then the SHA-256 of every byte.
pub fn check(path: &Path, size_bytes: u64, sha256: &str) -> Result<(), Mismatch> {
    let unreadable = |e: io::Error| Mismatch::Unreadable(e.to_string());
    let found = std::fs::metadata(path).map_err(unreadable)?.len();
    if found != size_bytes {
        return Err(Mismatch::Size {
            expected: size_bytes,
            found,
        });
    }
    if sha256_of(path).map_err(unreadable)? != sha256 {
        return Err(Mismatch::Sha256 {
            expected: sha256.to_string(),
        });
    }
    Ok(())
}

/// The lowercase hex SHA-256 of a file's bytes.
pub fn sha256_of(path: &Path) -> io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; READ_BUF];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// The lowercase hex SHA-256 of some bytes (tests, generated weights).
pub fn sha256_of_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_checksum_are_both_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w");
        std::fs::write(&path, b"abc").unwrap();
        // The SHA-256 of "abc" (FIPS 180-2 test vector).
        let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_of_bytes(b"abc"), sha);
        assert_eq!(check(&path, 3, sha), Ok(()));
        assert!(matches!(
            check(&path, 4, sha),
            Err(Mismatch::Size { found: 3, .. })
        ));
        std::fs::write(&path, b"abd").unwrap();
        let wrong = check(&path, 3, sha).unwrap_err();
        assert!(matches!(wrong, Mismatch::Sha256 { .. }));
        // The error names the registered checksum, never the bytes' own.
        let said = wrong.to_string();
        assert!(!said.contains(&sha256_of_bytes(b"abd")), "{said}");
        assert!(matches!(
            check(&dir.path().join("none"), 3, sha),
            Err(Mismatch::Unreadable(_))
        ));
    }
}
