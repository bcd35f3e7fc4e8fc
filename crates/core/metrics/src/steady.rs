//! The steady-state window: the part of a run in which its concurrency held its plateau, with
//! throughput and latency measured over it, beside the whole-run figures. A run's start (users
//! or arrivals filling the server) and end (the last requests draining) hold fewer requests in
//! flight than the load does; figures over the whole run mix them in. Definition:
//! `docs/metrics.md`, "Steady-state window".

use serde::{Deserialize, Serialize};

use crate::record::RequestRecord;
use crate::request::RequestMetrics;
use crate::stats::{Distribution, PercentileMethod, Samples};

/// Where a run held its plateau, and what it measured there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SteadyWindow {
    /// The window, ms on the run's clock: from the first moment the requests in flight reached
    /// the plateau to the last moment they were still at it.
    pub start_ms: f64,
    pub end_ms: f64,
    pub duration_s: f64,
    /// The window's share of the run (first send to last end).
    pub share: f64,
    /// The plateau: the time-weighted median of the requests in flight over the run.
    pub level: f64,
    /// Mean requests in flight over the window.
    pub mean_concurrency: f64,
    /// Successful requests that ended inside the window, per second of it.
    pub requests: u64,
    pub request_throughput: f64,
    /// Output tokens that arrived inside the window, per second of it.
    pub output_throughput: f64,
    /// Of the successful requests sent and ended inside the window.
    pub ttft_ms: Distribution,
    pub tpot_ms: Distribution,
    pub e2e_ms: Distribution,
}

/// The steady-state window of `records` (every record of the run: failed ones held a place in
/// flight too), or `None` when fewer than two requests ran or the plateau never lasted.
pub fn steady_window(records: &[RequestRecord], m: PercentileMethod) -> Option<SteadyWindow> {
    // requests in flight: +1 at each first send, −1 at each end
    let mut steps: Vec<(f64, i64)> = Vec::with_capacity(2 * records.len());
    for r in records {
        if let (Some(sent), Some(end)) = (r.first_sent_ms(), r.end_ms.or(r.last_event_ms()))
            && end >= sent
        {
            steps.push((sent, 1));
            steps.push((end, -1));
        }
    }
    if steps.len() < 4 {
        return None;
    }
    // ends before sends at the same instant: a closed loop's user frees its place, then takes it
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (first, last) = (steps[0].0, steps[steps.len() - 1].0);
    if last <= first {
        return None;
    }
    // the level held over each interval [steps[i].0, steps[i + 1].0)
    let mut level = 0i64;
    let mut spans: Vec<(f64, f64, i64)> = Vec::with_capacity(steps.len());
    for w in steps.windows(2) {
        level += w[0].1;
        if w[1].0 > w[0].0 {
            spans.push((w[0].0, w[1].0, level));
        }
    }
    let plateau = weighted_median(&spans)?;
    let start_ms = spans.iter().find(|s| s.2 >= plateau)?.0;
    let end_ms = spans.iter().rev().find(|s| s.2 >= plateau)?.1;
    let dur_ms = end_ms - start_ms;
    if dur_ms <= 0.0 {
        return None;
    }
    let inside = |t: f64| t >= start_ms && t <= end_ms;
    let held: f64 = spans.iter().map(|&(a, b, c)| (b.min(end_ms) - a.max(start_ms)).max(0.0) * c as f64).sum();
    let mut out = SteadyWindow {
        start_ms,
        end_ms,
        duration_s: dur_ms / 1000.0,
        share: dur_ms / (last - first),
        level: plateau as f64,
        mean_concurrency: held / dur_ms,
        ..Default::default()
    };
    let (mut ttft, mut tpot, mut e2e) = (Samples::default(), Samples::default(), Samples::default());
    let mut tokens = 0u64;
    for r in records.iter().filter(|r| r.is_success()) {
        for (&t, &k) in r.event_ms.iter().zip(&r.event_tokens) {
            if inside(t) {
                tokens += k as u64;
            }
        }
        let Some(end) = r.end_ms.or(r.last_event_ms()) else { continue };
        if !inside(end) {
            continue;
        }
        out.requests += 1;
        if !r.first_sent_ms().is_some_and(inside) {
            continue;
        }
        let x = RequestMetrics::of(r);
        for (samples, v) in [(&mut ttft, x.ttft), (&mut tpot, x.tpot), (&mut e2e, x.e2e)] {
            if let Some(v) = v {
                samples.push(v);
            }
        }
    }
    out.request_throughput = out.requests as f64 / out.duration_s;
    out.output_throughput = tokens as f64 / out.duration_s;
    out.ttft_ms = ttft.describe(m);
    out.tpot_ms = tpot.describe(m);
    out.e2e_ms = e2e.describe(m);
    Some(out)
}

/// The level held for half the time or more, counting from the highest: the time-weighted
/// median of the spans' levels (the upper one at a tie).
fn weighted_median(spans: &[(f64, f64, i64)]) -> Option<i64> {
    let total: f64 = spans.iter().map(|s| s.1 - s.0).sum();
    if total <= 0.0 {
        return None;
    }
    let mut by: Vec<(i64, f64)> = spans.iter().map(|s| (s.2, s.1 - s.0)).collect();
    by.sort_by_key(|b| std::cmp::Reverse(b.0));
    let mut acc = 0.0;
    for (level, d) in by {
        acc += d;
        if acc >= total / 2.0 {
            return Some(level);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(sent: f64, ttft: f64, end: f64, tokens: u32) -> RequestRecord {
        RequestRecord {
            scheduled_ms: sent,
            sent_ms: Some(sent),
            event_ms: vec![sent + ttft, end],
            event_tokens: vec![1, tokens - 1],
            end_ms: Some(end),
            output_tokens: Some(tokens as u64),
            ..Default::default()
        }
    }

    #[test]
    fn a_closed_loop_plateau_leaves_out_its_drain() {
        // 4 users, each request 1 s, back to back for 10 s; then one last slow request per user
        // ending at 11, 12, 13 and 14 s: the run holds 4 in flight from 0 to 11 s (then 3, 2, 1)
        let mut rs = Vec::new();
        for u in 0..4 {
            for k in 0..10 {
                let t = k as f64 * 1000.0;
                rs.push(rec(t, 100.0, t + 1000.0, 10));
            }
            rs.push(rec(10_000.0, 100.0, 11_000.0 + 1000.0 * u as f64, 10));
        }
        let w = steady_window(&rs, PercentileMethod::Linear).unwrap();
        // by hand: 4 in flight for 11 of 14 s, the median level is 4; the window is 0–11 s
        assert_eq!(w.level, 4.0);
        assert_eq!((w.start_ms, w.end_ms), (0.0, 11_000.0));
        assert!((w.share - 11.0 / 14.0).abs() < 1e-12);
        assert!((w.mean_concurrency - 4.0).abs() < 1e-12);
        // 40 requests end at 1..=10 s and one at 11 s: 41 in 11 s
        assert_eq!(w.requests, 41);
        assert!((w.request_throughput - 41.0 / 11.0).abs() < 1e-12);
        // tokens: 40 × 10 of the early requests, plus every user's last first token (at 10.1 s)
        // and the 11 s one's 9 more: 400 + 4 + 9 = 413
        assert!((w.output_throughput - 413.0 / 11.0).abs() < 1e-9, "{}", w.output_throughput);
        // latency over the 40 + 1 requests sent and ended inside: TTFT 100 ms each
        assert_eq!(w.ttft_ms.n, 41);
        assert_eq!(w.ttft_ms.mean, Some(100.0));
    }

    #[test]
    fn a_growing_queue_holds_its_plateau_only_at_the_top() {
        // one arrival a second, each staying 0.5 s longer than the one before (TTFT grows):
        // in flight rises as the run goes, so the window is its later part
        let rs: Vec<RequestRecord> =
            (0..20).map(|i| rec(i as f64 * 1000.0, 10.0 + 500.0 * i as f64, i as f64 * 1500.0 + 1000.0, 4)).collect();
        let w = steady_window(&rs, PercentileMethod::Linear).unwrap();
        assert!(w.start_ms > 5_000.0 && w.share < 0.8, "{w:?}");
        assert!(steady_window(&rs[..1], PercentileMethod::Linear).is_none());
    }
}
