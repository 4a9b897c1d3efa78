//! Duration strings: Go's form (`30m0s`, `1h2m3s`, `1.5s`, `300ms`) as used by the import and
//! export timeouts, and protobuf's JSON form (`43200s`, `0.5s`) as used by the settings API.
//! `d` (days) is accepted as a convenience for configuration.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("is empty")]
    Empty,
    #[error("is not a duration like 30s, 1h2m3s or 1.5s")]
    Malformed,
    #[error("is negative")]
    Negative,
    #[error("is too large")]
    TooLarge,
}

/// The largest duration accepted: 100 years.
const MAX_SECS: f64 = 100.0 * 365.0 * 86_400.0;

/// Parses a duration string.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if s.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let end = |k: usize| chars.get(k).map(|c| c.0).unwrap_or(s.len());
    let mut i = 0;
    let mut total = 0f64;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && (chars[i].1.is_ascii_digit() || chars[i].1 == '.') {
            i += 1;
        }
        let number = &s[end(start)..end(i)];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(DurationError::Malformed);
        }
        let value: f64 = number.parse().map_err(|_| DurationError::Malformed)?;
        let unit_start = i;
        while i < chars.len() && (chars[i].1.is_ascii_alphabetic() || chars[i].1 == 'µ') {
            i += 1;
        }
        let unit = &s[end(unit_start)..end(i)];
        let factor = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return Err(DurationError::Malformed),
        };
        total += value * factor;
        if total > MAX_SECS {
            return Err(DurationError::TooLarge);
        }
    }
    if !total.is_finite() {
        return Err(DurationError::Malformed);
    }
    Ok(Duration::from_secs_f64(total))
}

/// protobuf JSON form: whole seconds with an `s` suffix, fractions only when present.
pub fn format_proto(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        let s = format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
        format!("{}s", s.trim_end_matches('0'))
    }
}

/// Go's `time.Duration.String()` form for whole seconds: `30m0s`, `1h0m0s`, `45s`.
pub fn format_go(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_and_proto_forms() {
        assert_eq!(parse("30m0s").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse("1h2m3s").unwrap(), Duration::from_secs(3723));
        assert_eq!(parse("43200s").unwrap(), Duration::from_secs(43200));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(parse("720h").unwrap(), Duration::from_secs(720 * 3600));
        assert_eq!(parse("2d").unwrap(), Duration::from_secs(2 * 86400));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(parse("5µs").unwrap(), Duration::from_micros(5));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "s", "10", "1x", "-5s", "1..5s", "h1", "1h 2m", "99999999999999h", ".", "5µ", "ä"] {
            assert!(parse(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_proto(Duration::from_secs(43200)), "43200s");
        assert_eq!(format_proto(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go(Duration::from_secs(1800)), "30m0s");
        assert_eq!(format_go(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(format_go(Duration::from_secs(5)), "5s");
    }
}
