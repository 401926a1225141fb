//! The README's error table is the registry, exactly: every code in both,
//! with the same name and HTTP status. A code added to one and not the other
//! fails here, so the documentation cannot drift from what clients receive.
use caldera_spec::codes::ALL;
use std::collections::BTreeMap;

/// `code -> (name, http status)` from the rows under `### Error codes`.
fn readme_table() -> BTreeMap<u32, (String, u16)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let text = std::fs::read_to_string(path).expect("the workspace README is readable");
    let section = text
        .split("### Error codes")
        .nth(1)
        .expect("the README has an `### Error codes` section");
    let mut rows = BTreeMap::new();
    for line in section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
    {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let code: u32 = cells[0].parse().expect("the first column is a code");
        let name = cells[1].trim_matches('`').to_string();
        let status = if cells[2] == "—" {
            0
        } else {
            cells[2]
                .parse()
                .expect("the third column is an HTTP status or —")
        };
        assert!(rows.insert(code, (name, status)).is_none(), "{code} twice");
    }
    rows
}

#[test]
fn the_readme_error_table_lists_exactly_the_registry() {
    let readme = readme_table();
    let registry: BTreeMap<u32, (String, u16)> = ALL
        .iter()
        .map(|e| (e.code, (e.name.to_string(), e.http_status)))
        .collect();
    assert_eq!(readme, registry);
}
