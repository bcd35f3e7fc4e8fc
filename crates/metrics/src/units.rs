//! Durations as people type them: `250ms`, `2s`, `5m`, `1h`, or a bare number in a unit the
//! caller chooses (seconds for run lengths, milliseconds for latency limits).

/// Seconds in `s`; a bare number is multiplied by `bare_unit_s`. `None` unless finite and ≥ 0.
pub fn seconds(s: &str, bare_unit_s: f64) -> Option<f64> {
    let t = s.trim();
    let (n, mult) = if let Some(n) = t.strip_suffix("ms") {
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
    n.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).map(|v| v * mult)
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn units() {
        assert_eq!(seconds("250ms", 1.0), Some(0.25));
        assert_eq!(seconds(" 2s ", 1.0), Some(2.0));
        assert_eq!(seconds("1.5m", 1.0), Some(90.0));
        assert_eq!(seconds("1h", 1.0), Some(3600.0));
        assert_eq!(seconds("40", 0.001), Some(0.04));
        assert_eq!(seconds("-1s", 1.0), None);
        assert_eq!(seconds("soon", 1.0), None);
    }
}
