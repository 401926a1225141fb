//! Weights files for the model tests and the warmup benchmark: pseudo-random
//! bytes that a seed fixes (so a test's file is the same on every run, and two
//! seeds give two versions whose bytes differ), written once and hashed as
//! they are written; and the files a node's cache holds, found on its disk.
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Bytes generated and hashed per write.
const CHUNK: usize = 1 << 20;

/// A weights file on disk and what a registration declares about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsFile {
    pub path: PathBuf,
    pub size_bytes: u64,
    /// Lowercase hex.
    pub sha256: String,
}

impl WeightsFile {
    /// `file:///abs/path`, the uri of a shared mount.
    pub fn file_uri(&self) -> String {
        format!("file://{}", self.path.display())
    }

    /// The `weights` object of a registration for `uri`.
    pub fn spec(&self, uri: &str) -> serde_json::Value {
        serde_json::json!({"uri": uri, "size_bytes": self.size_bytes, "sha256": self.sha256})
    }
}

/// splitmix64: a tiny, fast generator whose stream a seed fixes. Not for
/// secrets; weights only need to be incompressible and reproducible.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for word in buf.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            word.copy_from_slice(&bytes[..word.len()]);
        }
    }
}

/// Writes `size_bytes` pseudo-random bytes from `seed` to `path` and returns
/// the file with its SHA-256.
pub fn generate(path: &Path, size_bytes: u64, seed: u64) -> std::io::Result<WeightsFile> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut rng = SplitMix(seed);
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut left = size_bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        rng.fill(&mut buf[..n]);
        hash.update(&buf[..n]);
        out.write_all(&buf[..n])?;
        left -= n as u64;
    }
    out.flush()?;
    Ok(WeightsFile {
        path: path.to_path_buf(),
        size_bytes,
        sha256: hex(&hash.finalize()),
    })
}

/// The SHA-256 of a file's bytes, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    Ok(hex(&hash.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file under `dir` (recursively) named exactly `name`: where a node's
/// cache keeps a version, found without knowing the cache's layout inside
/// the agent's data dir (it is content-addressed: the file is named by its
/// SHA-256, a fetch under way by `<sha256>.partial`).
pub fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => found.extend(files_named(&path, name)),
            Ok(t) if t.is_file() && e.file_name() == name => found.push(path),
            _ => {}
        }
    }
    found.sort();
    found
}

/// The one verified copy of `sha256` in the cache under `data_dir`, if any.
pub fn cached_copy(data_dir: &Path, sha256: &str) -> Option<PathBuf> {
    files_named(data_dir, sha256).into_iter().next()
}

/// The partial file of a fetch of `sha256` under way (or cut) under `data_dir`.
pub fn partial_copy(data_dir: &Path, sha256: &str) -> Option<PathBuf> {
    files_named(data_dir, &format!("{sha256}.partial"))
        .into_iter()
        .next()
}

/// Flips every bit of the byte at `offset` of `path` (a corrupt copy of the
/// same size).
pub fn flip_byte(path: &Path, offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(&mut b)?;
    b[0] = !b[0];
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(&b)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_fixes_the_bytes_and_the_hash_is_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = generate(&dir.path().join("a"), 3 * CHUNK as u64 + 5, 7).unwrap();
        let again = generate(&dir.path().join("again"), 3 * CHUNK as u64 + 5, 7).unwrap();
        let other = generate(&dir.path().join("b"), 3 * CHUNK as u64 + 5, 8).unwrap();
        assert_eq!(a.sha256, again.sha256);
        assert_ne!(a.sha256, other.sha256);
        assert_eq!(sha256_file(&a.path).unwrap(), a.sha256);
        assert_eq!(std::fs::metadata(&a.path).unwrap().len(), a.size_bytes);
        // The SHA-256 of the empty string, as a check of the hex.
        let empty = generate(&dir.path().join("empty"), 0, 1).unwrap();
        assert_eq!(
            empty.sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn a_flipped_byte_changes_the_hash_and_is_found_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let w = generate(&dir.path().join("cache/blobs/x"), 4096, 1).unwrap();
        let named = dir.path().join("cache/blobs").join(&w.sha256);
        std::fs::rename(&w.path, &named).unwrap();
        assert_eq!(cached_copy(dir.path(), &w.sha256), Some(named.clone()));
        assert_eq!(partial_copy(dir.path(), &w.sha256), None);
        flip_byte(&named, 100).unwrap();
        assert_ne!(sha256_file(&named).unwrap(), w.sha256);
    }
}
