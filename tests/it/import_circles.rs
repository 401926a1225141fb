//! No import circles between files inside a crate.
//!
//! A file that names another file's items (`use crate::a::b`, `super::x`, or a
//! path written out in full) depends on it. When two files depend on each other,
//! directly or around a ring, neither can be read, tested or moved without the
//! other, and the ring tends to grow: this test walks every crate's `src/`, builds
//! the file-level graph from those paths, and fails naming each ring it finds.
//!
//! A module and its own submodules are one unit here (a parent declares its
//! children and they reach back with `super::`; that is how Rust splits one type
//! over several files), so an edge between a file and its ancestor or descendant
//! does not count. Test modules (`#[cfg(test)] mod tests { ... }`) are skipped:
//! a test may use anything.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source roots, relative to the workspace root.
const CRATES: &[&str] = &[
    "src",
    "spec/src",
    "storage/src",
    "scheduling/src",
    "sim/src",
    "actors/src",
    "gateway/src",
    "node/src",
    "chaos-tests/src",
    "tls/src",
];

/// A module path inside one crate: `["queue", "stages"]`; the crate root is empty.
type Module = Vec<String>;

/// The module a source file defines, from its path under the crate's `src/`.
fn module_of(src: &Path, file: &Path) -> Option<Module> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Module = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// Every `.rs` file under `dir`, except binaries' own roots under `src/bin`
/// (each is a crate of its own).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "bin") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments, string literals and `#[cfg(test)]` modules, so
/// a path in a doc comment or a test does not count as a dependency.
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let bytes: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < bytes.len() && bytes[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < bytes.len() && !(bytes[i] == '*' && bytes[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r'
            && matches!(next, Some('#') | Some('"'))
            && !(i > 0 && (bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_'))
        {
            // A raw string: r"..." or r#"..."#, whose quotes inside do not end it.
            let mut hashes = 0;
            let mut k = i + 1;
            while bytes.get(k) == Some(&'#') {
                hashes += 1;
                k += 1;
            }
            if bytes.get(k) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            k += 1;
            loop {
                if k >= bytes.len() {
                    break;
                }
                if bytes[k] == '"' && (1..=hashes).all(|h| bytes.get(k + h) == Some(&'#')) {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            i = k;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                if bytes[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && bytes.get(i + 2) == Some(&'\'') {
            // A char literal such as '{' must not open a brace.
            i += 3;
        } else if c == '\'' && next == Some('\\') {
            // An escaped char literal: '\'', '\n', '\u{..}'.
            i += 3;
            while i < bytes.len() && bytes[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    drop_test_modules(&out)
}

/// The code with every `#[cfg(test)]`-gated item's braces removed.
fn drop_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The gated item ends at its `;` or at the brace closing its body.
        let semi = after.find(';');
        let open = after.find('{');
        match (open, semi) {
            (Some(o), s) if s.is_none_or(|s| o < s) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, ch) in after[o..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = o + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            (_, Some(s)) => rest = &after[s + 1..],
            _ => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// The paths a `use` tree names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let Some(close) = tree.rfind('}') else {
        return vec![tree];
    };
    let inner = &tree[open + 1..close];
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for ch in inner.chars() {
        match ch {
            '{' => {
                depth += 1;
                current.push(ch);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                current.push(ch);
            }
            ',' if depth == 0 => items.push(std::mem::take(&mut current)),
            _ => current.push(ch),
        }
    }
    if !current.is_empty() {
        items.push(current);
    }
    items
        .iter()
        .flat_map(|item| expand_use(&format!("{prefix}{item}")))
        .collect()
}

/// Every crate-internal path in a file's code: its `use` trees and the
/// `crate::`/`super::` paths written inline.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let boundary = at == 0
            || !rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &rest[at + 4..];
        if !boundary {
            rest = after;
            continue;
        }
        let end = after.find(';').unwrap_or(after.len());
        paths.extend(expand_use(&after[..end]));
        rest = &after[end..];
    }
    for start in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(at) = rest.find(start) {
            let boundary = at == 0
                || !rest[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            if boundary {
                paths.push(tail[..len].to_string());
            }
            rest = &tail[len..];
        }
    }
    paths
}

/// The file a path lands in: its longest prefix that is a module with a file.
fn target(
    from: &Module,
    is_mod_root: bool,
    path: &str,
    modules: &BTreeSet<Module>,
) -> Option<Module> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, rest): (Module, &[&str]) = match segments.first() {
        Some(&"crate") => (Vec::new(), &segments[1..]),
        Some(&"self") => (from.clone(), &segments[1..]),
        Some(&"super") => {
            // `super` in `a/b.rs` (module a::b) is `a`; in `a/b/mod.rs` it is also `a`.
            let _ = is_mod_root;
            let mut base = from.clone();
            let mut k = 0;
            while segments.get(k) == Some(&"super") {
                base.pop();
                k += 1;
            }
            (base, &segments[k..])
        }
        _ => return None,
    };
    let mut best = modules.contains(&base).then(|| base.clone());
    for segment in rest {
        base.push(segment.to_string());
        if modules.contains(&base) {
            best = Some(base.clone());
        }
    }
    best
}

/// One crate's file-level dependency graph.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut by_module = BTreeMap::new();
    for file in &files {
        if let Some(module) = module_of(src, file) {
            by_module.insert(module, file.clone());
        }
    }
    let modules: BTreeSet<Module> = by_module.keys().cloned().collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in &by_module {
        let Ok(source) = std::fs::read_to_string(file) else {
            continue;
        };
        let is_mod_root = file.file_name().is_some_and(|n| n == "mod.rs");
        let out = edges.entry(module.clone()).or_default();
        for path in named_paths(&code_only(&source)) {
            let Some(to) = target(module, is_mod_root, &path, &modules) else {
                continue;
            };
            let related = to.starts_with(module) || module.starts_with(&to);
            if !related {
                out.insert(to);
            }
        }
    }
    edges
}

/// The rings: strongly connected components of more than one file (Tarjan).
fn rings(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        next: usize,
        found: Vec<Vec<Module>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: &Module) {
            self.index.insert(v.clone(), self.next);
            self.low.insert(v.clone(), self.next);
            self.next += 1;
            self.stack.push(v.clone());
            self.on_stack.insert(v.clone());
            let targets: Vec<Module> = self.edges.get(v).into_iter().flatten().cloned().collect();
            for w in targets {
                if !self.index.contains_key(&w) {
                    self.visit(&w);
                    let lw = self.low[&w];
                    let lv = self.low[v];
                    self.low.insert(v.clone(), lv.min(lw));
                } else if self.on_stack.contains(&w) {
                    let iw = self.index[&w];
                    let lv = self.low[v];
                    self.low.insert(v.clone(), lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut ring = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = &w == v;
                    ring.push(w);
                    if done {
                        break;
                    }
                }
                if ring.len() > 1 {
                    ring.sort();
                    self.found.push(ring);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn show(module: &Module) -> String {
    if module.is_empty() {
        "lib".into()
    } else {
        module.join("/")
    }
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = Vec::new();
    for src in CRATES {
        let dir = root.join(src);
        assert!(dir.is_dir(), "crate source {} is missing", dir.display());
        let edges = graph(&dir);
        for ring in rings(&edges) {
            let names: Vec<String> = ring.iter().map(show).collect();
            report.push(format!("{src}: {}", names.join(" ↔ ")));
            for from in &ring {
                for to in edges.get(from).into_iter().flatten() {
                    if ring.contains(to) {
                        report.push(format!("    {} names {}", show(from), show(to)));
                    }
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "import circles between files (each ring's files name each other's items; move the shared piece into one of them or a new file both use):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_walk_finds_a_ring_and_ignores_a_module_and_its_children() {
    let m = |s: &str| -> Module {
        s.split('/')
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect()
    };
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    edges.entry(m("a")).or_default().insert(m("b"));
    edges.entry(m("b")).or_default().insert(m("c"));
    edges.entry(m("c")).or_default().insert(m("a"));
    edges.entry(m("d")).or_default().insert(m("a"));
    assert_eq!(rings(&edges), vec![vec![m("a"), m("b"), m("c")]]);

    let modules: BTreeSet<Module> = [m(""), m("a"), m("a/x"), m("b")].into_iter().collect();
    assert_eq!(
        target(&m("b"), false, "crate::a::x::Thing", &modules),
        Some(m("a/x"))
    );
    assert_eq!(
        target(&m("a/x"), false, "super::Thing", &modules),
        Some(m("a"))
    );
    assert_eq!(
        target(&m("a/x"), false, "super::super::b::f", &modules),
        Some(m("b"))
    );
    assert_eq!(target(&m("b"), false, "std::fmt", &modules), None);
}

#[test]
fn paths_come_from_use_trees_and_inline_paths_but_not_comments_or_tests() {
    let source = r#"
        use crate::a::{b, c::{D, E}};
        // use crate::commented::Out;
        /// crate::doc::Link
        fn f() { let _ = crate::inline::g(); let _ = "crate::in_a_string"; }
        #[cfg(test)]
        mod tests { use crate::only_in_tests::X; }
    "#;
    let paths = named_paths(&code_only(source));
    assert!(paths.contains(&"crate::a::b".to_string()), "{paths:?}");
    assert!(paths.contains(&"crate::a::c::D".to_string()), "{paths:?}");
    assert!(paths.contains(&"crate::inline::g".to_string()), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.contains("commented")
            || p.contains("doc::")
            || p.contains("in_a_string")
            || p.contains("only_in_tests")),
        "{paths:?}"
    );
}
