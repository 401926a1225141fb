//! Where the cache keeps its files, under `<data-dir>/cache/`:
//!
//! - `weights/<sha256>`: verified copies, mode 0444. `cache/` and `weights/`
//!   are 0700, the agent's alone: a workload opens its model through a link
//!   made for the uids allowed to use it (see [`super::exposure`]), never
//!   here, so it cannot list which versions are cached, read the index or a
//!   fetch in progress, or open another tenant's private copy by its digest.
//! - `<sha256>.partial`: a fetch under way or cut (kept for a resume); never
//!   read by a workload; streamed on to a peer receiver only when it names
//!   the size it expects (it checks the whole copy's SHA-256 itself).
//! - `index.json`: size, last use and pin of every copy, and the counters;
//!   mode 0600, replaced atomically (written to `index.json.tmp`, synced,
//!   renamed).
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Mode of the cache dirs: the agent's alone.
const DIR_MODE: u32 = 0o700;
/// Mode of a verified copy: readable by every workload uid, writable by none.
pub const COPY_MODE: u32 = 0o444;

/// The cache's paths.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout under `<data_dir>/cache`.
    pub fn under(data_dir: &Path) -> Layout {
        Layout {
            root: data_dir.join("cache"),
        }
    }

    /// Creates the dirs with their modes (also fixing the modes of existing ones).
    pub fn create(&self) -> io::Result<()> {
        for dir in [&self.root, &self.weights_dir()] {
            fs::create_dir_all(dir)?;
            fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))?;
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn weights_dir(&self) -> PathBuf {
        self.root.join("weights")
    }

    /// The verified copy of `sha256` (whether or not it is there).
    pub fn copy(&self, sha256: &str) -> PathBuf {
        self.weights_dir().join(sha256)
    }

    /// The fetch in progress of `sha256`.
    pub fn partial(&self, sha256: &str) -> PathBuf {
        self.root.join(format!("{sha256}.partial"))
    }

    pub fn index(&self) -> PathBuf {
        self.root.join("index.json")
    }

    /// The shas of every `.partial` file left in the cache dir.
    pub fn partials(&self) -> Vec<String> {
        self.names(&self.root)
            .filter_map(|n| n.strip_suffix(".partial").map(String::from))
            .filter(|s| is_sha256(s))
            .collect()
    }

    /// The shas of every file in `weights/`.
    pub fn copies(&self) -> Vec<String> {
        self.names(&self.weights_dir())
            .filter(|s| is_sha256(s))
            .collect()
    }

    fn names(&self, dir: &Path) -> impl Iterator<Item = String> {
        fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
    }
}

/// True for 64 lowercase hex digits: the only names the cache (and the
/// peer server) ever turns into a path, so none can climb out of its dir.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Syncs a directory, so a rename inside it survives a power cut.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Size of a file, 0 when it is not there.
pub fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lowercase_hex_of_64_is_a_sha() {
        assert!(is_sha256(&"ab".repeat(32)));
        assert!(!is_sha256(&"AB".repeat(32)));
        assert!(!is_sha256("../../etc/passwd"));
        assert!(!is_sha256(&"a".repeat(63)));
    }

    #[test]
    fn dirs_are_the_agents_alone_and_wider_ones_are_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        fs::create_dir_all(layout.weights_dir()).unwrap();
        fs::set_permissions(layout.root(), fs::Permissions::from_mode(0o755)).unwrap();
        layout.create().unwrap();
        for d in [layout.root().to_path_buf(), layout.weights_dir()] {
            let mode = fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
    }
}
