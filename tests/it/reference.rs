//! The generated reference pages under `docs/reference/` are what the code
//! generates now: the binary's `caldera reference --check` compares each page
//! byte for byte and names the ones that differ. With
//! `CALDERA_UPDATE_REFERENCE=1` the test writes them instead (what
//! `scripts/reference` runs).
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn reference(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("reference")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {BIN}: {e}"))
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_reference_pages_are_what_the_code_generates() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference");
    if std::env::var_os("CALDERA_UPDATE_REFERENCE").is_some() {
        let o = reference(&[dir]);
        assert!(o.status.success(), "{}", said(&o));
        return;
    }
    let o = reference(&["--check", dir]);
    assert!(
        o.status.success(),
        "{}\nThe pages under docs/reference/ are generated: run `scripts/reference` \
         (or `CALDERA_UPDATE_REFERENCE=1 cargo test --test it reference::`) and commit the result.",
        said(&o)
    );
}

/// The check fails on a page that differs, on a missing page and on a page
/// nothing generates, and names each one; a freshly written directory passes.
#[test]
fn the_check_names_a_stale_a_missing_and_a_stray_page() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let dir = tmp
        .path()
        .to_str()
        .unwrap_or_else(|| panic!("utf-8 temp path"));
    let written = reference(&[dir]);
    assert!(written.status.success(), "{}", said(&written));
    let fresh = reference(&["--check", dir]);
    assert!(fresh.status.success(), "{}", said(&fresh));

    let errors = Path::new(dir).join("errors.md");
    let text = std::fs::read_to_string(&errors).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&errors, text.replace("not_found", "not_there"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(Path::new(dir).join("cli.md")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(Path::new(dir).join("notes.md"), "by hand\n").unwrap_or_else(|e| panic!("{e}"));

    let stale = reference(&["--check", dir]);
    let out = said(&stale);
    assert_eq!(stale.status.code(), Some(1), "{out}");
    assert!(out.contains("errors.md differs"), "{out}");
    assert!(out.contains("cli.md is missing"), "{out}");
    assert!(out.contains("notes.md is not a generated page"), "{out}");
    assert!(out.contains("scripts/reference"), "{out}");
    assert!(
        !out.contains("http-api.md"),
        "only the changed pages are named: {out}"
    );
}
