//! The `Range` header the peer server understands: `bytes=N-` and
//! `bytes=N-M` (one range; a resume needs no more).

/// The byte range asked for: `start..end` (end exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub end: u64,
}

/// A `Range` header that cannot be served (416).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsatisfiable;

/// The span of a file of `size` bytes a `Range` header asks for: None for
/// no header (the whole file, 200).
pub fn parse(header: Option<&str>, size: u64) -> Result<Option<Span>, Unsatisfiable> {
    let Some(h) = header else {
        return Ok(None);
    };
    let spec = h.trim().strip_prefix("bytes=").ok_or(Unsatisfiable)?;
    let (first, last) = spec.split_once('-').ok_or(Unsatisfiable)?;
    let start: u64 = first.trim().parse().map_err(|_| Unsatisfiable)?;
    let end = match last.trim() {
        "" => size,
        l => l
            .parse::<u64>()
            .map_err(|_| Unsatisfiable)?
            .saturating_add(1)
            .min(size),
    };
    if start >= size || start >= end {
        return Err(Unsatisfiable);
    }
    Ok(Some(Span { start, end }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_of_a_ten_byte_file() {
        let span = |start, end| Ok(Some(Span { start, end }));
        assert_eq!(parse(None, 10), Ok(None));
        assert_eq!(parse(Some("bytes=4-"), 10), span(4, 10));
        assert_eq!(parse(Some("bytes=4-5"), 10), span(4, 6));
        assert_eq!(parse(Some("bytes=4-99"), 10), span(4, 10));
        assert_eq!(parse(Some("bytes=10-"), 10), Err(Unsatisfiable));
        assert_eq!(parse(Some("bytes=-4"), 10), Err(Unsatisfiable));
        assert_eq!(parse(Some("lines=1-"), 10), Err(Unsatisfiable));
    }
}
