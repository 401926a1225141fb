//! Where a container's cgroup goes: under the workload's own memory cgroup
//! (`--cgroup-parent`), so the agent's limit on it still holds, its usage
//! and OOM kills are read where the process runtime's are, and conmon (in
//! `<parent>/conmon`) counts against the workload too. Podman takes one
//! parent path for every controller, relative to each hierarchy's root; on
//! cgroup v1 hosts whose controllers place the agent differently, runc
//! creates that path in the other hierarchies as well, and nothing removes
//! it when the container goes: [`remove_tree`] does, once it is empty.
use std::fs;
use std::path::{Path, PathBuf};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// `--cgroup-parent` for a workload whose memory cgroup is `memory_dir`:
/// the dir relative to its hierarchy's root (`/sys/fs/cgroup/memory` on
/// v1, `/sys/fs/cgroup` on v2), with a leading `/`.
pub fn parent_of(memory_dir: &Path) -> Option<String> {
    let root = Path::new(CGROUP_ROOT);
    let v1 = root.join("memory");
    let rel = memory_dir
        .strip_prefix(&v1)
        .or_else(|_| memory_dir.strip_prefix(root))
        .ok()?;
    let rel = rel.to_str()?;
    (!rel.is_empty()).then(|| format!("/{rel}"))
}

/// Every place `parent` (a `--cgroup-parent`) names: one per hierarchy.
fn places(parent: &str) -> Vec<PathBuf> {
    let rel = parent.trim_start_matches('/');
    if rel.is_empty() || rel.split('/').any(|c| c == ".." || c.is_empty()) {
        return Vec::new();
    }
    let root = Path::new(CGROUP_ROOT);
    let mut out = vec![root.join(rel)];
    if let Ok(entries) = fs::read_dir(root) {
        for e in entries.flatten() {
            let p = e.path();
            // Comma-joined controllers are links to one hierarchy: seen once.
            if p.is_dir() && !e.file_type().is_ok_and(|t| t.is_symlink()) {
                out.push(p.join(rel));
            }
        }
    }
    out.retain(|p| p.is_dir());
    out
}

/// Removes the empty cgroup dirs under and at `parent` in every hierarchy,
/// deepest first (a dir that still holds a process stays); returns how many.
pub fn remove_tree(parent: &str) -> usize {
    let mut removed = 0;
    for place in places(parent) {
        let mut dirs = Vec::new();
        collect(&place, &mut dirs);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            if fs::remove_dir(&d).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect(&e.path(), out);
            }
        }
    }
}

/// The pids in every cgroup under `dir` named `libpod-*` (the container's
/// own, not conmon's): a container workload's process tree for usage.
pub fn container_pids(dir: &Path) -> Vec<u32> {
    let mut dirs = Vec::new();
    collect(dir, &mut dirs);
    let mut pids = Vec::new();
    let in_container = |d: &Path| {
        d.strip_prefix(dir).ok().is_some_and(|rel| {
            rel.components()
                .next()
                .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with("libpod-"))
        })
    };
    for d in dirs.iter().filter(|d| in_container(d)) {
        if let Ok(text) = fs::read_to_string(d.join("cgroup.procs")) {
            pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
    }
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_the_memory_dir_relative_to_its_hierarchy() {
        let v1 = Path::new("/sys/fs/cgroup/memory/process_api/x/caldera-n-1/acme+a1");
        assert_eq!(
            parent_of(v1).as_deref(),
            Some("/process_api/x/caldera-n-1/acme+a1")
        );
        let v2 = Path::new("/sys/fs/cgroup/user.slice/caldera-n-1/a1");
        assert_eq!(parent_of(v2).as_deref(), Some("/user.slice/caldera-n-1/a1"));
        assert_eq!(parent_of(Path::new("/tmp/x")), None);
        assert_eq!(parent_of(Path::new("/sys/fs/cgroup/memory")), None);
    }

    #[test]
    fn a_parent_that_climbs_names_no_place() {
        assert!(places("/../etc").is_empty());
        assert!(places("/").is_empty());
        assert!(places("//x").is_empty());
    }
}
