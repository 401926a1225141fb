//! The images a node holds, as `caldera nodes` shows them: a count and
//! size in the list, one line each in a node's detail.
use super::fields::{self, get, items, number, text, MISSING};
use super::table::Table;
use serde_json::Value;

/// "3, 2.1G" (images, their bytes); `-` without a report (a tenant's view,
/// a node without a container runtime).
pub fn summary(node: &Value) -> String {
    let Some(report) = get(node, "images").filter(|r| get(r, "known") == Some(&Value::Bool(true)))
    else {
        return MISSING.into();
    };
    let images = items(report, "images");
    if images.is_empty() {
        return "0".into();
    }
    let bytes = images
        .iter()
        .filter_map(|i| number(i, "size_bytes"))
        .fold(0.0, |a, b| a + b);
    format!("{}, {}", images.len(), fields::size_mb(bytes / 1_048_576.0))
}

/// The node's images, one per line: name, size, in use, last used, whether
/// the agent manages (and may evict) it; then the cap.
pub fn detail(node: &Value) -> String {
    let Some(report) = get(node, "images").filter(|r| get(r, "known") == Some(&Value::Bool(true)))
    else {
        return "\nimages: -\n".into();
    };
    let cap = match number(report, "capacity_bytes") {
        Some(c) if c > 0.0 => fields::size_mb(c / 1_048_576.0),
        _ => "no cap".into(),
    };
    let mut out = format!(
        "\nimages: {} managed of {cap}, {} evicted\n",
        fields::size_mb(number(report, "managed_bytes").unwrap_or(0.0) / 1_048_576.0),
        number(report, "evictions").map_or(0, |n| n as u64),
    );
    let mut table = Table::new(&["IMAGE", "SIZE", "IN USE", "LAST USED", "MANAGED", "DIGEST"]);
    for image in items(report, "images") {
        let names: Vec<String> = items(image, "names").iter().map(fields::show).collect();
        let name = match names.is_empty() {
            true => format!("<none> {}", short(&text(image, "id"))),
            false => names.join(", "),
        };
        table.row(vec![
            name,
            fields::size_mb(number(image, "size_bytes").unwrap_or(0.0) / 1_048_576.0),
            text(image, "in_use"),
            last_used(image),
            text(image, "managed"),
            short(&text(image, "digest")),
        ]);
    }
    out.push_str(
        &table
            .render()
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>(),
    );
    out
}

/// `sha256:21097a7112bf` of a digest or id.
fn short(s: &str) -> String {
    let hex = s.strip_prefix("sha256:").unwrap_or(s);
    match s.starts_with("sha256:") {
        true => format!("sha256:{}", &hex[..hex.len().min(12)]),
        false => hex[..hex.len().min(12)].to_string(),
    }
}

fn last_used(image: &Value) -> String {
    match number(image, "last_used_ms") {
        Some(ms) if ms > 0.0 => format!("{} ago", fields::age(fields::now_ms() - ms)),
        _ => MISSING.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Value {
        serde_json::json!({"name": "n1", "images": {
        "known": true, "capacity_bytes": 10_737_418_240u64, "managed_bytes": 2_131_062,
        "evictions": 1,
        "images": [
            {"id": "12f22dfac501", "digest": "sha256:21097a7112bfa8dd3c91",
             "names": ["registry.internal/deeplearning/pytorch:2.1-cu12.1"],
             "size_bytes": 2_131_062, "last_used_ms": 0, "in_use": 1, "managed": true},
            {"id": "2a965f17ee80b786", "names": [], "size_bytes": 1_048_576,
             "last_used_ms": 0, "in_use": 0, "managed": false}
        ]}})
    }

    #[test]
    fn the_list_counts_images_and_their_bytes() {
        assert_eq!(summary(&node()), "2, 3M");
        assert_eq!(summary(&serde_json::json!({"name": "n"})), MISSING);
        let none = serde_json::json!({"name": "n", "images": {"known": true, "images": []}});
        assert_eq!(summary(&none), "0");
        assert_eq!(
            summary(&serde_json::json!({"name": "n", "images": {"known": false}})),
            MISSING
        );
    }

    #[test]
    fn the_detail_lists_each_image() {
        let d = detail(&node());
        assert!(d.contains("images: 2M managed of 10G, 1 evicted"), "{d}");
        assert!(
            d.contains("registry.internal/deeplearning/pytorch:2.1-cu12.1"),
            "{d}"
        );
        assert!(d.contains("sha256:21097a7112bf"), "{d}");
        assert!(d.contains("<none> 2a965f17ee80"), "{d}");
    }
}
