//! Reading typed values out of a query string (`?limit=&cursor=`), each
//! bad one a 400 that names its parameter: what the handlers and the
//! portal's pages turn their query strings into before calling the API.
use crate::error::ApiError;
use std::collections::HashMap;

/// A page by event seq: `cursor` (the seq after which to start; 0 when
/// absent; `why` says what it is when it is not a number) and `limit`
/// (1..=1000, default 100).
pub fn query_page(
    q: &HashMap<String, String>,
    cursor: &str,
    why: &str,
) -> Result<(u64, usize), ApiError> {
    let after = match q.get(cursor) {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| ApiError::bad_query(cursor, why))?,
    };
    Ok((after, query_num(q, "limit", 100, 1000)? as usize))
}

/// An optional byte offset (0 allowed): absent is None.
pub fn query_offset(q: &HashMap<String, String>, key: &str) -> Result<Option<u64>, ApiError> {
    match q.get(key) {
        None => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_query(
                key,
                format!("{key} must be a byte offset (0 or more), not {v:?}"),
            )
        }),
    }
}

/// An optional number in `1..=max` (absent: `default`), naming `key` when it is bad.
pub fn query_num(
    q: &HashMap<String, String>,
    key: &str,
    default: u64,
    max: u64,
) -> Result<u64, ApiError> {
    match q.get(key) {
        None => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n >= 1 && n <= max => Ok(n),
            _ => Err(ApiError::bad_query(
                key,
                format!("{key} must be a number from 1 to {max}, not {v:?}"),
            )),
        },
    }
}
