//! Durations as people type them: `250ms`, `2s`, `5m`, `1h`, or a bare number in a unit the
//! caller chooses (seconds for run lengths, milliseconds for latency limits).

use std::time::Duration;

/// The longest duration anything accepts: 100 days. Longer values are refused as input and
/// saturate here at run time, so no timer arithmetic can overflow.
pub const MAX_SECONDS: f64 = 100.0 * 86_400.0;

/// Seconds in `s`; a bare number is multiplied by `bare_unit_s`. `None` unless finite, ≥ 0 and
/// at most [`MAX_SECONDS`].
pub fn seconds(s: &str, bare_unit_s: f64) -> Option<f64> {
    let t = s.trim();
    let (n, mult) = if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, bare_unit_s)
    };
    n.trim().parse::<f64>().ok().map(|v| v * mult).filter(|v| v.is_finite() && (0.0..=MAX_SECONDS).contains(v))
}

/// A computed number of seconds (a drawn think time, an arrival offset) as a `Duration`,
/// saturating: negative or NaN is zero, anything beyond [`MAX_SECONDS`] is `MAX_SECONDS`.
pub fn duration(secs: f64) -> Duration {
    let s = if secs.is_nan() { 0.0 } else { secs.clamp(0.0, MAX_SECONDS) };
    Duration::from_secs_f64(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(seconds("250ms", 1.0), Some(0.25));
        assert!((seconds("100us", 1.0).unwrap() - 1e-4).abs() < 1e-15);
        assert!((seconds("0.5µs", 1.0).unwrap() - 5e-7).abs() < 1e-18);
        assert_eq!(seconds(" 2s ", 1.0), Some(2.0));
        assert_eq!(seconds("1.5m", 1.0), Some(90.0));
        assert_eq!(seconds("1h", 1.0), Some(3600.0));
        assert_eq!(seconds("40", 0.001), Some(0.04));
        assert_eq!(seconds("-1s", 1.0), None);
        assert_eq!(seconds("soon", 1.0), None);
        assert_eq!(seconds("1e30s", 1.0), None);
        assert_eq!(seconds("100d", 1.0), None);
        assert_eq!(seconds("2400h", 1.0), Some(MAX_SECONDS));
        assert_eq!(seconds("2401h", 1.0), None);
    }

    #[test]
    fn durations_saturate() {
        assert_eq!(duration(1.5), Duration::from_millis(1500));
        assert_eq!(duration(-1.0), Duration::ZERO);
        assert_eq!(duration(f64::NAN), Duration::ZERO);
        assert_eq!(duration(1e300), Duration::from_secs_f64(MAX_SECONDS));
        assert_eq!(duration(f64::INFINITY), Duration::from_secs_f64(MAX_SECONDS));
    }
}
