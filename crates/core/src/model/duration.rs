//! Go/Kubernetes duration syntax (`100ms`, `30s`, `1h30m`, `1.5h`) as exact
//! virtual-time spans in milliseconds.
//!
//! The simulator's clock and every timeout in a manifest use [`Millis`].
//! Sub-millisecond parts (`ns`, `us`) round up to the next millisecond.
//! Pure; called at the input boundary.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A span or instant of (virtual) time in whole milliseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Millis(pub i64);

/// A duration string that does not parse; holds the string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a duration (expected Go syntax such as `100ms`, `30s`, `10m`, `1h30m`)")]
pub struct DurationError(pub String);

impl Millis {
    /// No time.
    pub const ZERO: Millis = Millis(0);
    /// The longest representable duration.
    pub const MAX: Millis = Millis(i64::MAX);

    /// `secs` seconds.
    pub fn from_secs(secs: i64) -> Millis {
        Millis(secs.saturating_mul(1000))
    }
    /// In seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    /// `self + other`, saturating.
    pub fn saturating_add(self, other: Millis) -> Millis {
        Millis(self.0.saturating_add(other.0))
    }
    /// `self - other`, saturating.
    pub fn saturating_sub(self, other: Millis) -> Millis {
        Millis(self.0.saturating_sub(other.0))
    }
    /// `self × factor`, saturating.
    pub fn saturating_mul(self, factor: i64) -> Millis {
        Millis(self.0.saturating_mul(factor))
    }

    /// Parses Go's `time.ParseDuration` syntax. Negative durations are refused:
    /// nothing in Arbiter's manifests may be negative.
    pub fn parse(text: &str) -> Result<Millis, DurationError> {
        let err = || DurationError(text.to_string());
        let s = text.trim();
        if s == "0" {
            return Ok(Millis::ZERO);
        }
        if s.is_empty() || s.starts_with('-') {
            return Err(err());
        }
        let mut rest = s.strip_prefix('+').unwrap_or(s);
        // Accumulate in nanoseconds (u128) so `1.5h` and `300us` stay exact.
        let mut total_ns: u128 = 0;
        while !rest.is_empty() {
            let number_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(err)?;
            let (number, tail) = rest.split_at(number_len);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, next) = tail.split_at(unit_len);
            let unit_ns: u128 = match unit {
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => return Err(err()),
            };
            let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
            if (int_part.is_empty() && frac_part.is_empty())
                || frac_part.contains('.')
                || frac_part.len() > 18
            {
                return Err(err());
            }
            let int_value: u128 = if int_part.is_empty() {
                0
            } else {
                int_part.parse().map_err(|_| err())?
            };
            let mut part = int_value.checked_mul(unit_ns).ok_or_else(err)?;
            if !frac_part.is_empty() {
                let frac: u128 = frac_part.parse().map_err(|_| err())?;
                let scale = 10u128.pow(frac_part.len() as u32);
                part = part.checked_add(frac * unit_ns / scale).ok_or_else(err)?;
            }
            total_ns = total_ns.checked_add(part).ok_or_else(err)?;
            rest = next;
        }
        let millis = total_ns.div_ceil(1_000_000);
        i64::try_from(millis).map(Millis).map_err(|_| err())
    }
}

impl fmt::Display for Millis {
    /// Go-style spelling: `1h30m0s`-like but trimmed (`1h30m`, `250ms`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0;
        if ms == 0 {
            return f.write_str("0s");
        }
        if ms < 0 {
            f.write_str("-")?;
            ms = -ms;
        }
        let hours = ms / 3_600_000;
        let minutes = ms / 60_000 % 60;
        let seconds = ms / 1000 % 60;
        let rest_ms = ms % 1000;
        if hours > 0 {
            write!(f, "{hours}h")?;
        }
        if minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        match (seconds, rest_ms) {
            (0, 0) => Ok(()),
            (s, 0) => write!(f, "{s}s"),
            (0, r) if hours == 0 && minutes == 0 => write!(f, "{r}ms"),
            (s, r) => write!(f, "{s}.{r:03}s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(Millis::parse("100ms").unwrap(), Millis(100));
        assert_eq!(Millis::parse("30s").unwrap(), Millis(30_000));
        assert_eq!(Millis::parse("1h30m").unwrap(), Millis(5_400_000));
        assert_eq!(Millis::parse("1.5h").unwrap(), Millis(5_400_000));
        assert_eq!(Millis::parse("2m3.5s").unwrap(), Millis(123_500));
        assert_eq!(Millis::parse("0").unwrap(), Millis(0));
        assert_eq!(Millis::parse("0s").unwrap(), Millis(0));
        assert_eq!(Millis::parse("300us").unwrap(), Millis(1));
        assert_eq!(Millis::parse("1500us").unwrap(), Millis(2));
    }

    #[test]
    fn refuses_malformed_and_negative() {
        for bad in ["", "10", "1x", "h", "-1s", "1.2.3s", "s10", "1h 30m"] {
            assert!(Millis::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn displays_compactly() {
        assert_eq!(Millis(5_400_000).to_string(), "1h30m");
        assert_eq!(Millis(250).to_string(), "250ms");
        assert_eq!(Millis(61_500).to_string(), "1m1.500s");
        assert_eq!(Millis(0).to_string(), "0s");
    }
}
