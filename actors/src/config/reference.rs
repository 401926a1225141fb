//! The configuration reference page, written from the section declarations
//! and the defaults in code, so the page cannot drift from what the server
//! reads.
use super::{ServerConfig, SECTIONS};
use serde_json::Value;
use std::fmt::Write;

/// The body of `docs/reference/config.md` (everything below the page's
/// title and generated-page banner, which the reference framework writes):
/// how keys are given, then every section and key with its default, its
/// environment variable, its former flat name and its description.
pub fn config_reference() -> String {
    let defaults = serde_json::to_value(ServerConfig::default()).unwrap_or(Value::Null);
    let mut page = String::from(
        "`caldera server` reads its configuration from a TOML file \
         (`caldera server --config FILE.toml`), then `CALDERA_*` environment variables, \
         then its flags (`--listen`, `--data-dir`), each overriding the one before; \
         `caldera up` reads the environment and its flags. Every key lives in a section \
         and is written in kebab-case:\n\
         \n\
         ```toml\n\
         [scheduling]\n\
         max-image-pulls = 2\n\
         ```\n\
         \n\
         In the environment a key is `CALDERA_<SECTION>__<KEY>`, upper-case, with \
         dashes as underscores and two underscores between section and key \
         (`CALDERA_SCHEDULING__MAX_IMAGE_PULLS=2`).\n\
         \n\
         Each key also has a former flat name (the `former key` column: \
         `max-image-pulls = 2` at the top of the file, `CALDERA_MAX_IMAGE_PULLS=2`), \
         still accepted for existing files and environments: the server logs \
         a warning at start that names the key to use instead. Setting a former name and \
         its new key together is refused, naming both. A key the server does not know \
         is refused in a file, and in the environment under a known section.\n\
         \n\
         The server checks every value at start and refuses one that cannot work, \
         naming its key (`config key nodes.timeout-ms ...: must be at least twice \
         nodes.heartbeat-interval-ms`).\n",
    );
    for section in SECTIONS {
        let _ = write!(
            page,
            "\n## [{}]\n\n{}\n\n| key | default | environment variable | former key | description |\n|---|---|---|---|---|\n",
            section.name,
            one_paragraph(section.about)
        );
        for key in section.keys {
            let default = defaults
                .get(key.section)
                .and_then(|s| s.get(key.name()))
                .map_or_else(|| "unset".to_string(), render);
            let _ = writeln!(
                page,
                "| `{}` | {} | `{}` | {} | {} |",
                key.name(),
                default,
                key.env_var(),
                key.was.map_or_else(String::new, |w| format!("`{w}`")),
                key.description().replace('|', "\\|"),
            );
        }
    }
    page
}

fn one_paragraph(doc: &str) -> String {
    doc.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A default as TOML writes it, in a code span; `unset` for no value.
fn render(v: &Value) -> String {
    match v {
        Value::Null => "unset".to_string(),
        other => format!("`{}`", toml_literal(other).replace('|', "\\|")),
    }
}

fn toml_literal(v: &Value) -> String {
    match v {
        Value::Null => "\"\"".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(toml_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{k} = {}", toml_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::keys;

    #[test]
    fn the_page_lists_every_key_with_its_default_and_variable() {
        let page = config_reference();
        for key in keys() {
            let row = page
                .lines()
                .find(|l| {
                    l.starts_with(&format!("| `{}` |", key.name())) && l.contains(&key.env_var())
                })
                .unwrap_or_else(|| panic!("no row for {}", key.path()));
            assert!(
                row.contains(&key.description().replace('|', "\\|")),
                "{row}"
            );
        }
        assert!(page.contains("| `max-image-pulls` | `2` | `CALDERA_SCHEDULING__MAX_IMAGE_PULLS` | `max-image-pulls` |"));
        assert!(page.contains("| `listen` | `\"127.0.0.1:7070\"` |"));
        assert!(page.contains("| `operator-token` | unset |"));
        assert!(page.contains("| `tenant-model-origins` | `[\"https://*\"]` |"));
        assert!(
            page.contains("| `price-gpu-hour` | `{ default = \"0.000000\" }` |"),
            "{page}"
        );
        for s in SECTIONS {
            assert!(page.contains(&format!("\n## [{}]\n", s.name)));
        }
    }
}
