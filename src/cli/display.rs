//! How the CLI shows figures to people: sizes, cores, ages, and the mark
//! for what an answer leaves out. The answers themselves are read into the
//! server's own view types (`caldera_spec::views`).
use caldera_spec::tenant::Quota;

/// What is shown for a field an answer leaves out.
pub const MISSING: &str = "-";

/// An optional value as display text; "-" when absent.
pub fn or_missing<T: std::fmt::Display>(value: Option<T>) -> String {
    value
        .map(|v| v.to_string())
        .unwrap_or_else(|| MISSING.to_string())
}

/// A size in MB for people: `81920` -> "80G", `1536` -> "1.5G", `512` -> "512M".
pub fn size_mb(mb: f64) -> String {
    if mb.abs() >= 1024.0 {
        trim_decimal(mb / 1024.0) + "G"
    } else {
        trim_decimal(mb) + "M"
    }
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

/// A quota in one line: "gpus 8, gpu memory 640 GB, cpu cores 64"; "no limits"
/// when every dimension is open.
pub fn quota_text(quota: &Quota) -> String {
    let parts: Vec<String> = [
        ("gpus", quota.gpus, ""),
        ("gpu memory", quota.gpu_memory_gb, " GB"),
        ("cpu cores", quota.cpu_cores, ""),
        ("memory", quota.memory_gb, " GB"),
        ("disk", quota.disk_gb, " GB"),
    ]
    .iter()
    .filter_map(|(label, x, unit)| x.map(|x| format!("{label} {}{unit}", trim_decimal(x))))
    .chain(
        quota
            .gpus_by_model
            .iter()
            .map(|(model, n)| format!("{model} gpus {}", trim_decimal(*n))),
    )
    .collect();
    if parts.is_empty() {
        "no limits".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_shown_in_gigabytes_from_one_gigabyte_up() {
        assert_eq!(size_mb(81920.0), "80G");
        assert_eq!(size_mb(1536.0), "1.5G");
        assert_eq!(size_mb(512.0), "512M");
        assert_eq!(size_mb(0.0), "0M");
    }

    #[test]
    fn an_absent_value_is_the_missing_mark() {
        assert_eq!(or_missing(Some(3)), "3");
        assert_eq!(or_missing(None::<&str>), "-");
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
