//! Every key `caldera server` accepts appears in the README's configuration
//! table, and the table names no key the server would refuse: the docs cannot
//! drift from the config struct (issue 13, item 7 asks this of every key).
use std::collections::BTreeSet;

/// The keys in the first column of the table under `## Configuration`
/// (a cell may list several: `` `operator-token`, `join-token` ``).
fn readme_keys() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let text = std::fs::read_to_string(path).expect("the workspace README is readable");
    let section = text
        .split("## Configuration")
        .nth(1)
        .expect("the README has a `## Configuration` section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| key"))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .flat_map(|l| {
            let first = l
                .trim_matches('|')
                .split('|')
                .next()
                .unwrap_or("")
                .to_string();
            first
                .split(',')
                .map(|k| k.trim().trim_matches('`').to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The keys' flat names, which the README's table still lists, taken from
/// the config's key table.
fn config_keys() -> BTreeSet<String> {
    caldera_actors::config::keys()
        .filter_map(|k| k.was.map(str::to_string))
        .collect()
}

#[test]
fn the_readme_configuration_table_lists_exactly_the_server_keys() {
    assert_eq!(readme_keys(), config_keys());
}
