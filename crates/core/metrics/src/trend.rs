//! Is the queue still growing? The least-squares slope of schedule-anchored TTFT over scheduled
//! time.
//!
//! A server offered more than it can serve builds a queue that grows without bound: each request
//! waits longer than the one scheduled before it, so TTFT measured from the schedule rises
//! linearly, by `1 − μ/λ` seconds per second of arrivals (λ offered, μ served). A short run can
//! still show good attainment while that happens; capacity search uses this trend to call such a
//! step saturated instead of passing it.

use crate::RequestRecord;

/// The fitted trend of TTFT-from-schedule against scheduled time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trend {
    /// Milliseconds of TTFT gained per millisecond of schedule (dimensionless).
    pub slope: f64,
    /// `slope × (last − first scheduled time)`: how much longer the last request waited.
    pub growth_ms: f64,
    /// Successful requests the fit used.
    pub n: usize,
}

/// The trend over successful requests scheduled at or after `from_ms` (the measurement window's
/// start); `None` with fewer than 10 of them or when they were all scheduled at once.
pub fn ttft_trend(records: &[RequestRecord], from_ms: f64) -> Option<Trend> {
    let points: Vec<(f64, f64)> = records
        .iter()
        .filter(|r| r.is_success() && r.scheduled_ms >= from_ms)
        .filter_map(|r| r.event_ms.first().map(|&c1| (r.scheduled_ms, c1 - r.scheduled_ms)))
        .collect();
    if points.len() < 10 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + (x - mx) * (y - my), b + (x - mx).powi(2)));
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let span =
        points.iter().map(|p| p.0).fold(f64::MIN, f64::max) - points.iter().map(|p| p.0).fold(f64::MAX, f64::min);
    Some(Trend { slope, growth_ms: slope * span, n: points.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(scheduled: f64, ttft: f64) -> RequestRecord {
        RequestRecord {
            scheduled_ms: scheduled,
            sent_ms: Some(scheduled),
            event_ms: vec![scheduled + ttft],
            event_tokens: vec![1],
            end_ms: Some(scheduled + ttft),
            ..Default::default()
        }
    }

    #[test]
    fn slope_by_hand() {
        // TTFT 10, 20, ..., 100 ms for requests scheduled every second: 10 ms per 1000 ms
        let rs: Vec<_> = (0..10).map(|i| rec(i as f64 * 1000.0, 10.0 + 10.0 * i as f64)).collect();
        let t = ttft_trend(&rs, 0.0).unwrap();
        assert!((t.slope - 0.01).abs() < 1e-12);
        assert!((t.growth_ms - 90.0).abs() < 1e-9);
        assert_eq!(t.n, 10);
    }

    #[test]
    fn flat_noise_has_no_slope_and_warmup_is_left_out() {
        // 10, 30, 30, 10, repeated: symmetric about the middle, so the fit is exactly flat
        let mut rs: Vec<_> =
            (0..20).map(|i| rec(i as f64 * 100.0, if matches!(i % 4, 0 | 3) { 10.0 } else { 30.0 })).collect();
        let t = ttft_trend(&rs, 0.0).unwrap();
        assert!(t.slope.abs() < 1e-12, "{t:?}");
        // a warm-up request with a huge TTFT before the window does not count
        rs.insert(0, rec(-100.0, 5000.0));
        assert_eq!(ttft_trend(&rs, 0.0).unwrap().n, 20);
    }

    #[test]
    fn too_few_or_simultaneous_gives_none() {
        assert_eq!(ttft_trend(&vec![rec(0.0, 1.0); 9], 0.0), None);
        assert_eq!(ttft_trend(&vec![rec(0.0, 1.0); 20], 0.0), None);
    }
}
