//! The metric names a PromQL expression reads, for checking a dashboard
//! against a live `/metrics`: what is left of the expression once string
//! literals, label matchers (`{...}`), ranges (`[5m]`), grouping clauses
//! (`by (le)`), function and aggregation names, keywords, numbers and
//! Grafana variables (`$__rate_interval`) are taken out.
use std::collections::BTreeSet;

/// Words that are PromQL syntax, not metric names (besides [`GROUPING`]).
const KEYWORDS: [&str; 7] = ["bool", "and", "or", "unless", "offset", "inf", "nan"];
/// Aggregation operators: `sum by (le) (...)` names no metric `sum`.
const AGGREGATIONS: [&str; 12] = [
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
];
/// Keywords whose parenthesised list is of label names.
const GROUPING: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The distinct metric (sample) names `expr` reads, as written
/// (`x_bucket`, `x_total`).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = BTreeSet::new();
    let mut i = 0;
    let mut labels_next = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_quoted(&chars, i),
            '{' => i = skip_until(&chars, i, '}'),
            '[' => i = skip_until(&chars, i, ']'),
            '(' if labels_next => {
                labels_next = false;
                i = skip_until(&chars, i, ')');
            }
            '$' => {
                // A Grafana variable: `$name`, `${name}`, `$__rate_interval`.
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_until(&chars, i, '}');
                } else {
                    while i < chars.len() && is_word(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && (is_word(chars[i]) || chars[i] == ':') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut j = i;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                let called = chars.get(j) == Some(&'(');
                let lower = word.to_ascii_lowercase();
                if GROUPING.contains(&lower.as_str()) {
                    labels_next = true;
                } else if !called
                    && !KEYWORDS.contains(&lower.as_str())
                    && !AGGREGATIONS.contains(&lower.as_str())
                {
                    out.insert(word);
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number or a duration (5m, 1.5e3): digits and letters.
                while i < chars.len() && (is_word(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The index after the quoted string starting at `i` (escapes honoured).
fn skip_quoted(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() && chars[j] != quote {
        j += if chars[j] == '\\' { 2 } else { 1 };
    }
    j + 1
}

/// The index after the `close` that ends the group opened at `i`, strings
/// inside skipped.
fn skip_until(chars: &[char], i: usize, close: char) -> usize {
    let mut j = i + 1;
    while j < chars.len() && chars[j] != close {
        j = if matches!(chars[j], '"' | '\'' | '`') {
            skip_quoted(chars, j)
        } else {
            j + 1
        };
    }
    j + 1
}

#[cfg(test)]
mod tests {
    use super::metric_names;

    fn names(expr: &str) -> Vec<String> {
        metric_names(expr).into_iter().collect()
    }

    #[test]
    fn only_metric_names_are_left() {
        let rows: [(&str, &[&str]); 6] = [
            ("caldera_pool_capacity", &["caldera_pool_capacity"]),
            (
                "histogram_quantile(0.99, sum by (le) (rate(caldera_storage_commit_seconds_bucket{site=~\"grant|free\"}[$__rate_interval])))",
                &["caldera_storage_commit_seconds_bucket"],
            ),
            (
                "sum without(gpu) (caldera_gpu_memory_used_bytes{node=\"${node}\"}) / on(node) group_left caldera_node_allocations",
                &["caldera_gpu_memory_used_bytes", "caldera_node_allocations"],
            ),
            ("rate(x_total[5m]) * 60 > bool 1e3 or vector(0)", &["x_total"]),
            ("caldera_node_health{state=\"lost\"} == 1 and ignoring(state) up", &["caldera_node_health", "up"]),
            ("sum(increase(a_total{reason!~\"by|on\"}[1h])) offset 5m", &["a_total"]),
        ];
        for (expr, want) in rows {
            assert_eq!(names(expr), want.to_vec(), "{expr}");
        }
    }
}
