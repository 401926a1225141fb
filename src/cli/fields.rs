//! Tolerant reading of API responses for display.
//!
//! The CLI reads `data` as a `serde_json::Value` instead of the server's own
//! types, so a field renamed, added or missing on the server shows up as "-"
//! in a table rather than breaking every command.
use serde_json::Value;

/// What is shown for a missing or null field.
pub const MISSING: &str = "-";

/// The value at a dotted path (`allocation.node`), or `None` if any step is
/// missing or the value is null.
pub fn get<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = value;
    for step in path.split('.') {
        current = match current {
            Value::Object(map) => map.get(step)?,
            Value::Array(items) => items.get(step.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    (!current.is_null()).then_some(current)
}

/// An optional value as display text; "-" when absent.
pub fn or_missing<T: std::fmt::Display>(value: Option<T>) -> String {
    value
        .map(|v| v.to_string())
        .unwrap_or_else(|| MISSING.to_string())
}

/// The field at `path` as display text; "-" when missing.
pub fn text(value: &Value, path: &str) -> String {
    get(value, path)
        .map(show)
        .unwrap_or_else(|| MISSING.to_string())
}

/// A JSON value as display text: strings without quotes, everything else as
/// compact JSON.
pub fn show(value: &Value) -> String {
    match value {
        Value::Null => MISSING.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The field at `path` as a number, if it is one.
pub fn number(value: &Value, path: &str) -> Option<f64> {
    get(value, path).and_then(Value::as_f64)
}

/// The field at `path` as an array (empty when missing), so callers can
/// iterate without caring whether the server sent it.
pub fn items<'a>(value: &'a Value, path: &str) -> &'a [Value] {
    get(value, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A size in MB for people: `81920` -> "80G", `1536` -> "1.5G", `512` -> "512M".
pub fn size_mb(mb: f64) -> String {
    if mb.abs() >= 1024.0 {
        trim_decimal(mb / 1024.0) + "G"
    } else {
        trim_decimal(mb) + "M"
    }
}

/// The field at `path`, a size in MB, for people; "-" when missing.
pub fn size_mb_at(value: &Value, path: &str) -> String {
    number(value, path)
        .map(size_mb)
        .unwrap_or_else(|| MISSING.to_string())
}

/// `free/total` of two MB fields, e.g. "600G/640G".
pub fn free_of_mb(value: &Value, free: &str, total: &str) -> String {
    format!("{}/{}", size_mb_at(value, free), size_mb_at(value, total))
}

/// Thousandths of a core as cores: `32000` -> "32", `500` -> "0.5".
pub fn cores_from_milli(milli: f64) -> String {
    trim_decimal(milli / 1000.0)
}

/// A number with at most one decimal, without a useless ".0".
pub fn trim_decimal(x: f64) -> String {
    let rounded = (x * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.1}")
    }
}

/// Milliseconds elapsed as a short age: "42s", "5m", "3h", "2d".
pub fn age(elapsed_ms: f64) -> String {
    let s = (elapsed_ms.max(0.0) / 1000.0) as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Now in milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_reach_into_objects_and_arrays() {
        let v =
            json!({"allocation": {"node": "node-1", "gpus": [{"index": 3}]}, "exit_code": null});
        assert_eq!(text(&v, "allocation.node"), "node-1");
        assert_eq!(text(&v, "allocation.gpus.0.index"), "3");
        assert_eq!(text(&v, "exit_code"), "-");
        assert_eq!(text(&v, "no.such.field"), "-");
        assert!(items(&v, "allocation.missing").is_empty());
    }

    #[test]
    fn sizes_are_shown_in_gigabytes_from_one_gigabyte_up() {
        assert_eq!(size_mb(81920.0), "80G");
        assert_eq!(size_mb(1536.0), "1.5G");
        assert_eq!(size_mb(512.0), "512M");
        assert_eq!(size_mb(0.0), "0M");
        assert_eq!(
            free_of_mb(&json!({"f": 61440, "t": 81920}), "f", "t"),
            "60G/80G"
        );
        assert_eq!(free_of_mb(&json!({}), "f", "t"), "-/-");
    }

    #[test]
    fn cores_and_ages_read_naturally() {
        assert_eq!(cores_from_milli(32000.0), "32");
        assert_eq!(cores_from_milli(500.0), "0.5");
        assert_eq!(age(42_000.0), "42s");
        assert_eq!(age(5.0 * 60_000.0), "5m");
        assert_eq!(age(3.0 * 3_600_000.0), "3h");
        assert_eq!(age(2.0 * 86_400_000.0), "2d");
        assert_eq!(age(-5.0), "0s");
    }
}
