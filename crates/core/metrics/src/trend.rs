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
    /// The slope's standard error, from the slope of consecutive blocks' means (up to 10 blocks
    /// of equal count, at least 5 requests each): a queue's TTFTs are correlated from request to
    /// request, so the requests' own scatter would understate it; infinite with fewer than 3
    /// blocks.
    pub slope_stderr: f64,
}

/// Least squares of `y` on `x`: slope, and the standard error of the slope (infinite with fewer
/// than 3 points or no spread in `x`).
fn ols(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (mx, my) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + (x - mx) * (y - my), b + (x - mx).powi(2)));
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let se = if points.len() < 3 {
        f64::INFINITY
    } else {
        let ss: f64 = points.iter().map(|(x, y)| (y - my - slope * (x - mx)).powi(2)).sum();
        (ss / (n - 2.0) / sxx).sqrt()
    };
    Some((slope, se))
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
    fit(points)
}

/// The trend of TPOT against scheduled time, over successful requests scheduled at or after
/// `from_ms` with a TPOT: its slope is milliseconds of TPOT gained per millisecond. An engine that
/// admits every request at once (a large batch limit) answers arrivals that outrun it by slowing
/// every stream down rather than by queueing them: TPOT rises while TTFT does not. `None` as for
/// [`ttft_trend`].
pub fn tpot_trend(records: &[RequestRecord], from_ms: f64) -> Option<Trend> {
    let points: Vec<(f64, f64)> = records
        .iter()
        .filter(|r| r.is_success() && r.scheduled_ms >= from_ms)
        .filter_map(|r| crate::request::RequestMetrics::of(r).tpot.map(|t| (r.scheduled_ms, t)))
        .collect();
    if points.len() < 10 {
        return None;
    }
    fit(points)
}

/// The trend of the requests in flight (scheduled, not yet ended) against time, sampled at 40
/// evenly spaced instants from `from_ms` plus the requests' 95th-percentile E2E (the fill: until
/// its long requests start ending, a steady system is still filling) to the last scheduled
/// arrival (after it, it drains): its slope is requests gained per millisecond (and `growth_ms`
/// holds the requests gained over that span, in the unit of the samples). Arrivals that outrun
/// what a deployment serves show here first when it admits them all: completions fall behind
/// arrivals long before its latencies move. `None` with fewer than 10 requests or no span left
/// after the fill.
pub fn in_flight_trend(records: &[RequestRecord], from_ms: f64) -> Option<Trend> {
    let mut e2e: Vec<f64> = records
        .iter()
        .filter(|r| r.is_success() && r.scheduled_ms >= from_ms)
        .filter_map(|r| Some(r.end_ms? - r.scheduled_ms))
        .collect();
    if e2e.len() < 10 {
        return None;
    }
    e2e.sort_by(f64::total_cmp);
    let start = from_ms + e2e[e2e.len() * 19 / 20];
    let end = records.iter().map(|r| r.scheduled_ms).fold(f64::MIN, f64::max);
    if end <= start {
        return None;
    }
    let mut arrivals: Vec<f64> = records.iter().map(|r| r.scheduled_ms).collect();
    let mut ends: Vec<f64> = records.iter().filter_map(|r| r.end_ms).collect();
    arrivals.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let count = |v: &[f64], t: f64| v.partition_point(|&x| x <= t) as f64;
    let points: Vec<(f64, f64)> = (0..40)
        .map(|i| {
            let t = start + (end - start) * i as f64 / 39.0;
            (t, count(&arrivals, t) - count(&ends, t))
        })
        .collect();
    fit(points)
}

/// Least squares over `points` (at least 10), with the slope's error from block means.
fn fit(points: Vec<(f64, f64)>) -> Option<Trend> {
    let (slope, _) = ols(&points)?;
    let span =
        points.iter().map(|p| p.0).fold(f64::MIN, f64::max) - points.iter().map(|p| p.0).fold(f64::MAX, f64::min);
    let mut sorted = points.clone();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let blocks = (sorted.len() / 5).min(10);
    let means: Vec<(f64, f64)> = (0..blocks)
        .map(|b| {
            let part = &sorted[b * sorted.len() / blocks..(b + 1) * sorted.len() / blocks];
            let k = part.len() as f64;
            part.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 / k, y + p.1 / k))
        })
        .collect();
    let slope_stderr = if blocks >= 3 { ols(&means).map_or(f64::INFINITY, |(_, se)| se) } else { f64::INFINITY };
    Some(Trend { slope, growth_ms: slope * span, n: points.len(), slope_stderr })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests every 100 ms for 60 s, each taking `e2e(i)` ms.
    fn flow(e2e: impl Fn(usize) -> f64) -> Vec<RequestRecord> {
        (0..600)
            .map(|i| {
                let t = i as f64 * 100.0;
                let e = e2e(i);
                RequestRecord {
                    scheduled_ms: t,
                    sent_ms: Some(t),
                    event_ms: vec![t + 10.0, t + e],
                    event_tokens: vec![1, 1],
                    end_ms: Some(t + e),
                    ..Default::default()
                }
            })
            .collect()
    }

    #[test]
    fn in_flight_is_flat_when_served_and_climbs_when_outrun() {
        // every request takes 2 s: 20 in flight once filled, whatever the time
        let steady = in_flight_trend(&flow(|_| 2000.0), 0.0).unwrap();
        assert!(steady.slope.abs() < 1e-3 && steady.slope_stderr < 1e-3, "{steady:?}");
        // served at 8 of the 10 arrivals per second: each request ends 25 ms later than the one
        // before it, so 2 requests per second pile up (0.002 per ms)
        let outrun = in_flight_trend(&flow(|i| 2000.0 + 25.0 * i as f64), 0.0).unwrap();
        assert!((outrun.slope - 0.002).abs() < 2e-4, "{outrun:?}");
        assert!(outrun.slope - 2.0 * outrun.slope_stderr > 0.0015);
    }

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
        // two blocks of five: too few to say how sure the slope is
        assert_eq!(t.slope_stderr, f64::INFINITY);
    }

    #[test]
    fn the_slope_error_comes_from_block_means() {
        // 50 requests a second apart, TTFT 100 ms + 1 ms per second, ±20 ms alternating by block
        // of five: the 10 block means lie at 100 + t ± 20 (t their mid-times 2, 7, ..., 47 s)
        let rs: Vec<_> = (0..50)
            .map(|i| {
                let wobble = if (i / 5) % 2 == 0 { 20.0 } else { -20.0 };
                rec(i as f64 * 1000.0, 100.0 + i as f64 + wobble)
            })
            .collect();
        let t = ttft_trend(&rs, 0.0).unwrap();
        // by hand over the means: x = 2000, 7000, ..., 47000 ms; y = 102 ± 20 + (x − 2000)/1000
        let xs: Vec<f64> = (0..10).map(|b| 2000.0 + 5000.0 * b as f64).collect();
        let ys: Vec<f64> = (0..10).map(|b| 102.0 + 5.0 * b as f64 + if b % 2 == 0 { 20.0 } else { -20.0 }).collect();
        let (mx, my) = (xs.iter().sum::<f64>() / 10.0, ys.iter().sum::<f64>() / 10.0);
        let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
        let b = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum::<f64>() / sxx;
        let ss: f64 = xs.iter().zip(&ys).map(|(x, y)| (y - my - b * (x - mx)).powi(2)).sum();
        let se = (ss / 8.0 / sxx).sqrt();
        assert!((t.slope_stderr - se).abs() < 1e-12, "{} vs {se}", t.slope_stderr);
        assert!(se > 0.0 && t.slope > 0.0);
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
    fn tpot_slope_by_hand() {
        // requests a second apart with 5 tokens each: TPOT 10, 12, 14, ... ms (decode 40, 48, ...)
        let rs: Vec<_> = (0..20)
            .map(|i| {
                let (s, tpot) = (i as f64 * 1000.0, 10.0 + 2.0 * i as f64);
                let events: Vec<f64> = (0..5).map(|k| s + 5.0 + k as f64 * tpot).collect();
                RequestRecord {
                    event_ms: events.clone(),
                    event_tokens: vec![1; 5],
                    output_tokens: Some(5),
                    end_ms: events.last().copied(),
                    ..rec(s, 5.0)
                }
            })
            .collect();
        let t = tpot_trend(&rs, 0.0).unwrap();
        assert!((t.slope - 0.002).abs() < 1e-12 && t.n == 20, "{t:?}");
    }

    #[test]
    fn too_few_or_simultaneous_gives_none() {
        assert_eq!(ttft_trend(&vec![rec(0.0, 1.0); 9], 0.0), None);
        assert_eq!(ttft_trend(&vec![rec(0.0, 1.0); 20], 0.0), None);
    }
}
