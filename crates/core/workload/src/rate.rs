//! A request rate as every command reads it (`--rate`, and the rate a sharded or capacity plan
//! carries): requests per second of at least [`MIN_RATE`], or `inf` (everything at once).
//! Parsed once, here; nothing downstream turns a rate back into text to read it again.

use std::fmt;
use std::str::FromStr;

/// The slowest open loop accepted: one request every 1,000 s.
pub const MIN_RATE: f64 = 0.001;

/// Requests per second, or unbounded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// At least [`MIN_RATE`], finite.
    PerSecond(f64),
    /// `inf`: every request at once (the `throughput` profile).
    Unbounded,
}

impl Rate {
    /// `r` requests per second, if it is a finite rate of at least [`MIN_RATE`].
    pub fn per_second(r: f64) -> Option<Self> {
        (r.is_finite() && r >= MIN_RATE).then_some(Rate::PerSecond(r))
    }

    /// Requests per second (infinite when unbounded).
    pub fn value(self) -> f64 {
        match self {
            Rate::PerSecond(r) => r,
            Rate::Unbounded => f64::INFINITY,
        }
    }

    pub fn is_unbounded(self) -> bool {
        self == Rate::Unbounded
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("inf") {
            return Ok(Rate::Unbounded);
        }
        t.parse::<f64>().ok().and_then(Rate::per_second).ok_or_else(|| {
            format!("`{s}` is not a number of requests per second of at least {MIN_RATE} (or inf: all at once)")
        })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::PerSecond(r) => write!(f, "{r}"),
            Rate::Unbounded => f.write_str("inf"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_once_and_print_back() {
        assert_eq!("2.5".parse::<Rate>(), Ok(Rate::PerSecond(2.5)));
        assert_eq!(" INF ".parse::<Rate>(), Ok(Rate::Unbounded));
        assert_eq!("0.001".parse::<Rate>(), Ok(Rate::PerSecond(0.001)));
        for bad in ["0", "0.0009", "-1", "NaN", "infinity", "fast", ""] {
            let e = bad.parse::<Rate>().unwrap_err();
            assert!(e.contains("requests per second of at least 0.001"), "{bad}: {e}");
        }
        assert_eq!(Rate::PerSecond(2.5).to_string(), "2.5");
        assert_eq!(Rate::Unbounded.to_string(), "inf");
        assert_eq!(Rate::Unbounded.value(), f64::INFINITY);
        assert_eq!(Rate::per_second(1e-4), None);
    }
}
