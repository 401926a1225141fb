//! `?from=&to=` of the history and cost routes: Unix ms or RFC 3339, a bad
//! one (or `from >= to`) a 400 that names the parameter.
use crate::error::ApiError;
use std::collections::HashMap;

/// One instant parameter; `None` when absent.
fn instant(q: &HashMap<String, String>, key: &str) -> Result<Option<u64>, ApiError> {
    match q.get(key) {
        None => Ok(None),
        Some(v) => caldera_spec::time::parse_instant(v).map(Some).ok_or_else(|| {
            ApiError::bad_query(
                key,
                format!("{key} must be Unix milliseconds or RFC 3339 (2024-07-16T12:00:00Z), not {v:?}"),
            )
        }),
    }
}

/// `[from, to)`: `to` defaults to `now`, `from` to `default_from(to)`.
pub fn parse(
    q: &HashMap<String, String>,
    now: u64,
    default_from: impl Fn(u64) -> u64,
) -> Result<(u64, u64), ApiError> {
    let to = instant(q, "to")?.unwrap_or(now);
    let from = instant(q, "from")?.unwrap_or_else(|| default_from(to));
    if from >= to {
        return Err(ApiError::bad_query(
            "from",
            format!(
                "from ({}) must be before to ({})",
                caldera_spec::time::rfc3339(from),
                caldera_spec::time::rfc3339(to)
            ),
        ));
    }
    Ok((from, to))
}
