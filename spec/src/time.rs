//! Timestamps: milliseconds since the Unix epoch, shown as RFC 3339 UTC.

/// Formats Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC), without a date crate.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// The UTC calendar date of `ms`, `YYYY-MM-DD`.
pub fn utc_date(ms: u64) -> String {
    let (y, m, d) = civil_from_days((ms / 86_400_000) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Midnight UTC of the first day of the month `ms` falls in.
pub fn month_start_ms(ms: u64) -> u64 {
    let (y, m, _) = civil_from_days((ms / 86_400_000) as i64);
    days_from_civil(y, m, 1).max(0) as u64 * 86_400_000
}

/// An instant as a client writes it: Unix milliseconds (`1721133296789`) or
/// RFC 3339 (`2024-07-16T12:34:56Z`, `2024-07-16T12:34:56.789+02:00`).
/// `None` when it is neither, or before 1970.
pub fn parse_instant(s: &str) -> Option<u64> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac_ms = 0i64;
    if let Some(f) = rest.strip_prefix('.') {
        let digits = f.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let ms3: String = f[..digits].chars().chain("000".chars()).take(3).collect();
        frac_ms = ms3.parse().ok()?;
        rest = &f[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let hh: i64 = o[1..3].parse().ok()?;
            let mm: i64 = o[4..6].parse().ok()?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (hh * 60 + mm)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    let ms = secs.checked_mul(1000)?.checked_add(frac_ms)?;
    u64::try_from(ms).ok()
}

/// Howard Hinnant's civil-to-days (the inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2024-07-16T12:34:56.789Z
        assert_eq!(rfc3339(1_721_133_296_789), "2024-07-16T12:34:56.789Z");
        // leap day
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn parses_unix_ms_and_rfc3339_and_refuses_the_rest() {
        assert_eq!(parse_instant("1721133296789"), Some(1_721_133_296_789));
        assert_eq!(
            parse_instant("2024-07-16T12:34:56.789Z"),
            Some(1_721_133_296_789)
        );
        assert_eq!(
            parse_instant("2024-07-16T14:34:56.789+02:00"),
            Some(1_721_133_296_789)
        );
        assert_eq!(parse_instant("2000-02-29T00:00:00Z"), Some(951_782_400_000));
        for bad in [
            "",
            "yesterday",
            "2024-13-01T00:00:00Z",
            "2024-07-16",
            "2024-07-16T12:34:56",
            "-5",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn month_and_day_boundaries() {
        // 2024-07-16T12:34:56.789Z -> 2024-07-01T00:00:00Z
        assert_eq!(
            rfc3339(month_start_ms(1_721_133_296_789)),
            "2024-07-01T00:00:00.000Z"
        );
        assert_eq!(utc_date(1_721_133_296_789), "2024-07-16");
    }
}
