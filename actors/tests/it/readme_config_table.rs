//! Every key `caldera server` accepts appears in the README's configuration
//! table, and the table names no key the server would refuse: the docs cannot
//! drift from the config struct (issue 13, item 7 asks this of every key).
use caldera_actors::config::ServerConfig;
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

/// The struct's keys, as serde names them (kebab-case), `Option`s included.
fn config_keys() -> BTreeSet<String> {
    let c = ServerConfig {
        operator_token: Some("x".repeat(16)),
        join_token: Some("x".repeat(16)),
        idle_webhook_url: Some("http://example.invalid/".into()),
        ..ServerConfig::default()
    };
    match serde_json::to_value(&c) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        other => panic!("ServerConfig serialises to an object, not {other:?}"),
    }
}

#[test]
fn the_readme_configuration_table_lists_exactly_the_server_keys() {
    assert_eq!(readme_keys(), config_keys());
}
