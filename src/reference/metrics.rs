//! `metrics.md`: every metric family `/metrics` exposes — name, type, unit,
//! labels and help — read from the exposition the gateway's registries
//! encode for an example pool in which every family has a series
//! (`caldera_gateway::metrics::example`), so no family is listed by hand.
use super::markdown::{banner, cell, code, table};
use std::collections::BTreeSet;

/// Why the metric families could not be read from the example exposition.
#[derive(Debug, thiserror::Error)]
pub enum MetricsPageError {
    /// The registries failed to encode the example pool.
    #[error("{0}")]
    Encode(#[from] std::fmt::Error),
    /// A sample line came before any `# HELP`/`# TYPE` line.
    #[error("a sample before any family: {line}")]
    SampleBeforeFamily { line: String },
    /// A sample's label set has no closing brace.
    #[error("unclosed labels: {line}")]
    UnclosedLabels { line: String },
}

pub fn page() -> Result<String, MetricsPageError> {
    let text = caldera_gateway::metrics::example::exposition()?;
    let families = families(&text)?;
    let mut out = banner(
        "Metrics",
        "the registries `/metrics` encodes (`actors/src/metrics.rs`, `gateway/src/metrics/`)",
    );
    out.push_str(
        "`GET /metrics` answers in the OpenMetrics text format. A counter's samples end in \
`_total`; a histogram's in `_bucket`, `_sum` and `_count` (a `le` label on buckets). \
State families (the pool, nodes, tenants, the queue) are read afresh at each scrape, so a \
node or tenant that is gone leaves no series behind.\n\n",
    );
    let rows: Vec<Vec<String>> = families
        .iter()
        .map(|f| {
            vec![
                code(&f.name),
                f.kind.clone(),
                if f.unit.is_empty() {
                    "—".into()
                } else {
                    f.unit.clone()
                },
                if f.labels.is_empty() {
                    "—".into()
                } else {
                    f.labels
                        .iter()
                        .map(|l| code(l))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                cell(&f.help),
            ]
        })
        .collect();
    out.push_str(&table(
        &["family", "type", "unit", "labels", "meaning"],
        &rows,
    ));
    Ok(out)
}

/// One family as its metadata lines and samples describe it.
#[derive(Debug, Default, PartialEq)]
struct Family {
    name: String,
    kind: String,
    unit: String,
    help: String,
    labels: BTreeSet<String>,
}

/// The families of an OpenMetrics text, in exposition order, each with the
/// label names its samples carry (a histogram's `le` left out).
fn families(text: &str) -> Result<Vec<Family>, MetricsPageError> {
    let mut out: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (Some(what), Some(name)) = (parts.next(), parts.next()) else {
                continue;
            };
            let rest = parts.next().unwrap_or("").to_string();
            if out.last().is_none_or(|f| f.name != name) {
                out.push(Family {
                    name: name.to_string(),
                    ..Family::default()
                });
            }
            let Some(f) = out.last_mut() else { continue };
            match what {
                "TYPE" => f.kind = rest,
                "HELP" => f.help = unescape(&rest),
                "UNIT" => f.unit = rest,
                _ => {}
            }
        } else if !line.is_empty() {
            let f = out
                .last_mut()
                .ok_or_else(|| MetricsPageError::SampleBeforeFamily {
                    line: line.to_string(),
                })?;
            if let Some((_, labels)) = line.split_once('{') {
                let end = labels
                    .rfind('}')
                    .ok_or_else(|| MetricsPageError::UnclosedLabels {
                        line: line.to_string(),
                    })?;
                f.labels
                    .extend(label_names(&labels[..end]).filter(|l| l != "le"));
            }
        }
    }
    Ok(out)
}

/// The names of `a="x",b="y"`, quotes inside values respected.
fn label_names(set: &str) -> impl Iterator<Item = String> + '_ {
    let mut names = Vec::new();
    let mut in_value = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in set.char_indices() {
        match (in_value, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_value = false,
            (false, _, '=') => names.push(set[start..i].trim_start_matches(',').trim().to_string()),
            (false, _, '"') => in_value = true,
            (false, _, ',') => start = i,
            _ => {}
        }
    }
    names.into_iter()
}

/// A HELP text with the exposition's escapes (`\\`, `\n`) read back.
fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\\\", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_takes_its_labels_from_its_samples() {
        let text = "# HELP caldera_x_seconds Time of x.\n# TYPE caldera_x_seconds histogram\n# UNIT caldera_x_seconds seconds\n\
caldera_x_seconds_bucket{site=\"a,b\",le=\"0.1\"} 1\ncaldera_x_seconds_sum{site=\"a,b\"} 1\n\
# HELP caldera_up Up.\n# TYPE caldera_up gauge\ncaldera_up 1\n# EOF\n";
        let f = families(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].name, "caldera_x_seconds");
        assert_eq!(f[0].kind, "histogram");
        assert_eq!(f[0].unit, "seconds");
        assert_eq!(f[0].labels, BTreeSet::from(["site".to_string()]));
        assert_eq!(f[1].help, "Up.");
        assert!(f[1].labels.is_empty());
    }

    /// A malformed exposition is refused naming the line, not listed wrong.
    #[test]
    fn a_malformed_exposition_names_the_line_it_cannot_read() {
        match families("caldera_up 1\n") {
            Err(e @ MetricsPageError::SampleBeforeFamily { .. }) => {
                assert_eq!(e.to_string(), "a sample before any family: caldera_up 1")
            }
            other => panic!("{other:?}"),
        }
        match families("# TYPE caldera_x gauge\ncaldera_x{a=\"1\" 1\n") {
            Err(e @ MetricsPageError::UnclosedLabels { .. }) => {
                assert_eq!(e.to_string(), "unclosed labels: caldera_x{a=\"1\" 1")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_page_lists_the_control_planes_families_with_their_labels() {
        let page = page().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            page.contains("| `caldera_node_health` | gauge | — | `node`, `state` |"),
            "{page}"
        );
        assert!(
            page.contains("| `caldera_storage_commit_seconds` | histogram | seconds | `site` |"),
            "{page}"
        );
    }
}
