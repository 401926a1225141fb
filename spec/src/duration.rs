//! Wall-clock lengths written as `HH:MM:SS`: the form a task's time limit
//! (`duration`) and its preparation timeout (`prepare_timeout`) take.

/// Why a duration did not parse; [`DurationError::naming`] turns it into the
/// sentence a person reads, naming the field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("must be HH:MM:SS (e.g. 01:30:00), not {0:?}")]
    Format(String),
    #[error("must be longer than 00:00:00")]
    Zero,
}

impl DurationError {
    /// `duration must be HH:MM:SS (e.g. 01:30:00), not "90"`.
    pub fn naming(&self, field: &str) -> String {
        format!("{field} {self}")
    }
}

/// Parses "HH:MM:SS" (hours may exceed 24) into seconds.
pub fn parse_duration(d: &str) -> Result<u64, DurationError> {
    let parts: Vec<&str> = d.split(':').collect();
    let bad = || DurationError::Format(d.to_string());
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) || p.len() > 5)
    {
        return Err(bad());
    }
    let n = |p: &str| p.parse::<u64>().map_err(|_| bad());
    let (h, m, s) = (n(parts[0])?, n(parts[1])?, n(parts[2])?);
    if m >= 60 || s >= 60 || parts[1].len() != 2 || parts[2].len() != 2 {
        return Err(bad());
    }
    let total = h * 3600 + m * 60 + s;
    if total == 0 {
        return Err(DurationError::Zero);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_may_pass_a_day_and_each_part_is_checked() {
        assert_eq!(parse_duration("01:30:00"), Ok(5400));
        assert_eq!(parse_duration("100:00:01"), Ok(360_001));
        assert_eq!(
            parse_duration("1:60:00").map_err(|e| e.naming("duration")),
            Err("duration must be HH:MM:SS (e.g. 01:30:00), not \"1:60:00\"".to_string())
        );
        assert_eq!(
            parse_duration("00:00:00").map_err(|e| e.naming("prepare_timeout")),
            Err("prepare_timeout must be longer than 00:00:00".to_string())
        );
    }
}
