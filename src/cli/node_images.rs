//! The images a node holds, as `caldera nodes` shows them: a count and
//! size in the list, one line each in a node's detail.
use super::display::{self, MISSING};
use super::table::Table;
use caldera_spec::images::{ImageEntry, ImageReport};

/// The report when the agent could read its image store.
fn known(report: Option<&ImageReport>) -> Option<&ImageReport> {
    report.filter(|r| r.known)
}

/// Bytes as people read them: "2.1G".
fn bytes(n: u64) -> String {
    display::size_mb(n as f64 / 1_048_576.0)
}

/// "3, 2.1G" (images, their bytes); `-` without a report (a tenant's view,
/// a node without a container runtime).
pub fn summary(report: Option<&ImageReport>) -> String {
    let Some(report) = known(report) else {
        return MISSING.into();
    };
    if report.images.is_empty() {
        return "0".into();
    }
    format!("{}, {}", report.images.len(), bytes(report.total_bytes()))
}

/// The node's images, one per line: name, size, in use, last used, whether
/// the agent manages (and may evict) it; then the cap.
pub fn detail(report: Option<&ImageReport>) -> String {
    let Some(report) = known(report) else {
        return "\nimages: -\n".into();
    };
    let cap = match report.capacity_bytes {
        0 => "no cap".into(),
        c => bytes(c),
    };
    let mut out = format!(
        "\nimages: {} managed of {cap}, {} evicted\n",
        bytes(report.managed_bytes),
        report.evictions,
    );
    let mut table = Table::new(&["IMAGE", "SIZE", "IN USE", "LAST USED", "MANAGED", "DIGEST"]);
    for image in &report.images {
        let name = if image.names.is_empty() {
            format!("<none> {}", short(&image.id))
        } else {
            image.names.join(", ")
        };
        let digest = if image.digest.is_empty() {
            MISSING.to_string()
        } else {
            short(&image.digest)
        };
        table.row(vec![
            name,
            bytes(image.size_bytes),
            image.in_use.to_string(),
            last_used(image),
            image.managed.to_string(),
            digest,
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
    let twelve: String = hex.chars().take(12).collect();
    if s.starts_with("sha256:") {
        format!("sha256:{twelve}")
    } else {
        twelve
    }
}

fn last_used(image: &ImageEntry) -> String {
    match image.last_used_ms {
        0 => MISSING.into(),
        ms => format!("{} ago", display::age(display::now_ms() - ms as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> ImageReport {
        serde_json::from_value(serde_json::json!({
        "known": true, "capacity_bytes": 10_737_418_240u64, "managed_bytes": 2_131_062,
        "evictions": 1,
        "images": [
            {"id": "12f22dfac501", "digest": "sha256:21097a7112bfa8dd3c91",
             "names": ["registry.internal/deeplearning/pytorch:2.1-cu12.1"],
             "size_bytes": 2_131_062, "last_used_ms": 0, "in_use": 1, "managed": true},
            {"id": "2a965f17ee80b786", "names": [], "size_bytes": 1_048_576,
             "last_used_ms": 0, "in_use": 0, "managed": false}
        ]}))
        .expect("an image report")
    }

    #[test]
    fn the_list_counts_images_and_their_bytes() {
        assert_eq!(summary(Some(&report())), "2, 3M");
        assert_eq!(summary(None), MISSING);
        let none = ImageReport {
            known: true,
            ..ImageReport::default()
        };
        assert_eq!(summary(Some(&none)), "0");
        assert_eq!(summary(Some(&ImageReport::default())), MISSING);
    }

    #[test]
    fn the_detail_lists_each_image() {
        let d = detail(Some(&report()));
        assert!(d.contains("images: 2M managed of 10G, 1 evicted"), "{d}");
        assert!(
            d.contains("registry.internal/deeplearning/pytorch:2.1-cu12.1"),
            "{d}"
        );
        assert!(d.contains("sha256:21097a7112bf"), "{d}");
        assert!(d.contains("<none> 2a965f17ee80"), "{d}");
    }
}
