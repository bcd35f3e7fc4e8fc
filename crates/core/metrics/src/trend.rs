//! Is the queue still growing? The least-squares slope of schedule-anchored TTFT over scheduled
//! time.
//!
//! A server offered more than it can serve builds a queue that grows without bound: each request
//! waits longer than the one scheduled before it, so TTFT measured from the schedule rises
//! linearly, by `1 − μ/λ` seconds per second of arrivals (λ offered, μ served). A short run can
//! still show good attainment while that happens; capacity search uses this trend to call such a
//! step saturated instead of passing it.

use std::collections::VecDeque;

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

// ---------------------------------------------------------------------------------------------
// The steady-state judgement: capacity search, and a run's `--stop-over-saturated`

/// The queue grows without bound: TTFT from the schedule rises by at least 2% of elapsed time
/// (arrivals outpace service by 2% or more) and by at least half the TTFT budget over the step
/// (at least 50 ms), so noise in a stable queue does not count.
pub fn growing(slope: f64, growth_ms: f64, ttft_budget_ms: f64) -> bool {
    slope >= 0.02 && growth_ms >= (0.5 * ttft_budget_ms).max(50.0)
}

/// The time a capacity must hold for: a queue that would grow by half the TTFT budget within it
/// is not in steady state (a planner asks whether a deployment sustains the rate, not whether
/// it survives one step).
pub const HORIZON_S: f64 = 600.0;

/// A step's queue over the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueTrend {
    Steady,
    Growing,
    /// The step was too short to tell a steady queue from one growing too fast for the horizon.
    Unclear,
}

impl QueueTrend {
    pub fn name(self) -> &'static str {
        match self {
            QueueTrend::Steady => "steady",
            QueueTrend::Growing => "growing",
            QueueTrend::Unclear => "unclear",
        }
    }
}

/// Judges a step's trend of TTFT-from-schedule against the growth the horizon allows (half the
/// TTFT budget over [`HORIZON_S`]): growing where the slope is at least twice its standard error
/// above that (or steep and large within the step: [`growing`]), steady where it is twice its
/// standard error below, unclear between. `last`: the step cannot be lengthened, so an unclear
/// trend is judged by the slope itself.
pub fn queue_trend(t: &Trend, ttft_budget_ms: f64, last: bool) -> QueueTrend {
    let allowed = 0.5 * ttft_budget_ms / (HORIZON_S * 1000.0);
    if growing(t.slope, t.growth_ms, ttft_budget_ms) { QueueTrend::Growing } else { judge(t, allowed, last) }
}

/// Judges a step's trend of TPOT ([`crate::trend::tpot_trend`]) against the growth the
/// horizon allows: half the TPOT budget over [`HORIZON_S`].
pub fn judge_tpot(t: &Trend, tpot_budget_ms: f64, last: bool) -> QueueTrend {
    judge(t, 0.5 * tpot_budget_ms / (HORIZON_S * 1000.0), last)
}

/// Judges a step's trend of requests in flight ([`crate::trend::in_flight_trend`]):
/// growing where the slope is at least twice its standard error above what the horizon allows (a
/// quarter of the mean in flight over [`HORIZON_S`]), steady otherwise. An engine that admits
/// every arrival (a batch limit of thousands) keeps its latencies for minutes while completions
/// fall behind arrivals; the batch it piles up breaks the SLO later. Only a clear rise counts:
/// a light load has few requests in flight, whose count is too noisy to bound its slope that
/// tightly, and its latencies' own trends judge it.
pub fn judge_in_flight(t: &Trend, mean_in_flight: f64) -> QueueTrend {
    let allowed = 0.25 * mean_in_flight.max(1.0) / (HORIZON_S * 1000.0);
    if rising(t, allowed) { QueueTrend::Growing } else { QueueTrend::Steady }
}

/// The slope is at least twice its standard error above `allowed`.
fn rising(t: &Trend, allowed: f64) -> bool {
    t.slope - 2.0 * t.slope_stderr >= allowed
}

fn judge(t: &Trend, allowed: f64, last: bool) -> QueueTrend {
    if rising(t, allowed) {
        QueueTrend::Growing
    } else if t.slope + 2.0 * t.slope_stderr < allowed {
        QueueTrend::Steady
    } else if last {
        if t.slope >= allowed { QueueTrend::Growing } else { QueueTrend::Steady }
    } else {
        QueueTrend::Unclear
    }
}

/// The worse of two judgements: growing if either grows, steady only if both are.
pub fn worse(a: QueueTrend, b: QueueTrend) -> QueueTrend {
    match (a, b) {
        (QueueTrend::Growing, _) | (_, QueueTrend::Growing) => QueueTrend::Growing,
        (QueueTrend::Steady, QueueTrend::Steady) => QueueTrend::Steady,
        _ => QueueTrend::Unclear,
    }
}

/// `--stop-over-saturated`: watches a run as it goes and calls the server over-saturated once
/// its queue grows, by either of two signs over the last [`OVERSAT_WINDOW_MS`], each judged as
/// capacity search judges a step (against [`HORIZON_S`], with its error):
/// - TTFT from the send of the requests that finished rises ([`queue_trend`] against the TTFT
///   budget), counting a wait for a `--max-concurrency` slot (a capped client holds the server's
///   queue) but not the client's own lag (a client that falls behind its schedule does not
///   raise it);
/// - the requests in flight rise ([`judge_in_flight`]), once the run has filled: in flight rises
///   at first however light the load, for about one request's time, so only what came after
///   twice the mean time from schedule to end of the requests that ended is judged. A server so
///   far behind that hardly any request finishes still shows it; one that finishes none at all
///   is judged from the start once [`OVERSAT_NOTHING_ENDED_MS`] have passed, without waiting for
///   timeouts.
///
/// Judged every [`OVERSAT_EVERY_MS`] of run time, each trend over at least [`OVERSAT_MIN_MS`] of
/// it, and called at two judgements in a row. A rise in flight must also be material: at least
/// the mean in flight over the window (a queue that has doubled), as a near-capacity server's
/// busy periods raise it by a lot for seconds at a time and then drain. Requests in flight are
/// kept as one sample per 100 ms, so its cost stays linear in the run whatever the rate.
///
/// Neither is judged while the client's own lag (send behind schedule) grows as a queue does: the
/// load generator is then the bottleneck (its send-rate check says so), and a queue in the client
/// says nothing about the server.
#[derive(Clone, Debug)]
pub struct OverSaturation {
    budget_ms: f64,
    /// Finished requests: scheduled time, TTFT from the send (successes), send lag, ms.
    finished: VecDeque<(f64, Option<f64>, f64)>,
    /// Requests in flight: (time, count), at most one per 100 ms.
    in_flight: VecDeque<(f64, f64)>,
    first_ms: Option<f64>,
    /// Requests that ended, and the sum of their times from schedule to end, ms.
    ended: (u64, f64),
    checked_ms: f64,
    strikes: u32,
    verdict: Option<String>,
}

/// The run time a judgement looks back over, ms.
pub const OVERSAT_WINDOW_MS: f64 = 120_000.0;
/// The run time before the first judgement, and the least span of arrivals either trend is fitted
/// over, ms (GuideLLM's over-saturation check waits 30 s too).
pub const OVERSAT_MIN_MS: f64 = 30_000.0;
/// How often it judges, ms of run time.
pub const OVERSAT_EVERY_MS: f64 = 5_000.0;
/// Finished requests the TTFT trend needs (the in-flight trend needs none).
pub const OVERSAT_MIN_REQUESTS: usize = 40;
/// A run none of whose requests has ended is judged by its requests in flight after this, ms.
pub const OVERSAT_NOTHING_ENDED_MS: f64 = 60_000.0;

impl OverSaturation {
    /// Judged against a TTFT budget of `ttft_budget_ms` (the SLO's, else 1 s).
    pub fn new(ttft_budget_ms: f64) -> Self {
        OverSaturation {
            budget_ms: ttft_budget_ms,
            finished: VecDeque::new(),
            in_flight: VecDeque::new(),
            first_ms: None,
            ended: (0, 0.0),
            checked_ms: f64::NEG_INFINITY,
            strikes: 0,
            verdict: None,
        }
    }

    /// At `now_ms`, `in_flight` requests are in flight (called as the run goes: at every send
    /// and every end). True once the server is over-saturated.
    pub fn tick(&mut self, now_ms: f64, in_flight: usize) -> bool {
        if self.verdict.is_some() {
            return true;
        }
        let first = *self.first_ms.get_or_insert(now_ms);
        let bucket = |t: f64| (t / 100.0).floor();
        match self.in_flight.back_mut() {
            Some(last) if bucket(last.0) == bucket(now_ms) => last.1 = in_flight as f64,
            _ => self.in_flight.push_back((now_ms, in_flight as f64)),
        }
        let from = now_ms - OVERSAT_WINDOW_MS;
        while self.in_flight.front().is_some_and(|p| p.0 < from) {
            self.in_flight.pop_front();
        }
        while self.finished.len() > 200 && self.finished.front().is_some_and(|p| p.0 < from) {
            self.finished.pop_front();
        }
        if now_ms - first < OVERSAT_MIN_MS || now_ms - self.checked_ms < OVERSAT_EVERY_MS {
            return false;
        }
        self.checked_ms = now_ms;
        match self.judge(now_ms) {
            Some(why) => {
                self.strikes += 1;
                if self.strikes >= 2 {
                    self.verdict = Some(format!("over-saturated: {why}"));
                    return true;
                }
            }
            None => self.strikes = 0,
        }
        false
    }

    /// A request scheduled at `scheduled_ms` and first sent at `sent_ms` (less its wait for a
    /// concurrency slot: `sent_ms − scheduled_ms` is its schedule lag) ended at `now_ms`, its
    /// first token at `first_ms` (absent when it failed), leaving `in_flight` in flight. True once
    /// over-saturated.
    pub fn finished(
        &mut self,
        now_ms: f64,
        scheduled_ms: f64,
        sent_ms: f64,
        first_ms: Option<f64>,
        in_flight: usize,
    ) -> bool {
        if self.verdict.is_none() {
            let sent = sent_ms.max(scheduled_ms);
            self.finished.push_back((scheduled_ms, first_ms.map(|c| c - sent), sent - scheduled_ms));
            self.ended = (self.ended.0 + 1, self.ended.1 + (now_ms - scheduled_ms).max(0.0));
        }
        self.tick(now_ms, in_flight)
    }

    /// Why the queue grows now, if it does.
    fn judge(&self, now_ms: f64) -> Option<String> {
        let lag: Vec<(f64, f64)> = self.finished.iter().map(|&(a, _, l)| (a, l)).collect();
        if lag.len() >= 10
            && let Some(t) = fit(lag)
            && queue_trend(&t, self.budget_ms, false) == QueueTrend::Growing
        {
            // the client falls behind its schedule: its queue, not the server's
            return None;
        }
        let ttft: Vec<(f64, f64)> = self.finished.iter().filter_map(|&(a, t, _)| Some((a, t?))).collect();
        let arrivals = ttft.last().map_or(0.0, |l| l.0) - ttft.first().map_or(0.0, |f| f.0);
        if ttft.len() >= OVERSAT_MIN_REQUESTS
            && arrivals >= OVERSAT_MIN_MS
            && let Some(t) = fit(ttft)
            && queue_trend(&t, self.budget_ms, false) == QueueTrend::Growing
        {
            let span = self.finished.back().map_or(0.0, |b| b.0) - self.finished.front().map_or(0.0, |f| f.0);
            return Some(format!(
                "TTFT from the send rose {:.1} ms per second of arrivals ({:.0} ms over the last {:.0} s, ± {:.1} \
                 ms/s), faster than a {:.0} ms TTFT budget allows over {HORIZON_S} s: the queue grows without bound",
                t.slope * 1000.0,
                t.growth_ms,
                span / 1000.0,
                2.0 * t.slope_stderr * 1000.0,
                self.budget_ms,
            ));
        }
        let first = self.first_ms.unwrap_or(now_ms);
        let (from, min_span) = match self.ended {
            (0, _) => (first, OVERSAT_NOTHING_ENDED_MS),
            (n, sum) => (first + 2.0 * sum / n as f64, OVERSAT_MIN_MS),
        };
        let pts: Vec<(f64, f64)> = self.in_flight.iter().copied().filter(|p| p.0 >= from).collect();
        if pts.last().map_or(0.0, |l| l.0) - pts.first().map_or(0.0, |f| f.0) < min_span - 100.0 {
            return None;
        }
        let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len().max(1) as f64;
        let t = (pts.len() >= 10).then(|| fit(pts)).flatten()?;
        (judge_in_flight(&t, mean) == QueueTrend::Growing && t.growth_ms >= mean.max(1.0)).then(|| {
            let span = now_ms - self.in_flight.iter().find(|p| p.0 >= from).map_or(now_ms, |p| p.0);
            format!(
                "requests in flight rose {:.1} per second ({:.0} more over the last {:.0} s, ± {:.1}/s; {:.0} now), \
                 faster than a quarter of the {mean:.0} in flight over {HORIZON_S} s: arrivals outrun completions",
                t.slope * 1000.0,
                t.growth_ms,
                span / 1000.0,
                2.0 * t.slope_stderr * 1000.0,
                self.in_flight.back().map_or(0.0, |p| p.1),
            )
        })
    }

    /// Why the run was called over-saturated, once it was.
    pub fn verdict(&self) -> Option<&str> {
        self.verdict.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_queue_is_called_over_saturated_and_a_steady_one_is_not() {
        // 10 req/s for 60 s; served: TTFT 50 ms ± noise
        let mut steady = OverSaturation::new(1000.0);
        for i in 0..600 {
            let a = i as f64 * 100.0;
            // one request in flight: each ends 50 ms after its schedule
            assert!(!steady.tick(a, 1), "steady at request {i}");
            assert!(!steady.finished(a + 50.0, a, a, Some(a + 50.0 + (i % 7) as f64), 0), "steady at request {i}");
        }
        // arrivals 25% faster than service: each waits 25 ms more than the one before, ends
        // when its first token comes (so in flight grows too, but TTFT is seen first)
        let mut growing = OverSaturation::new(1000.0);
        let at = (0..600).position(|i| {
            let a = i as f64 * 100.0;
            let first = a + 50.0 + 25.0 * i as f64;
            growing.finished(first, a, a, Some(first), i / 4)
        });
        // judged every 5 s of run time once 30 s of arrivals have ended (request 300 ends at
        // 37.6 s): first at 40 s (request 320), confirmed at 45 s (request 360)
        let at = at.expect("called over-saturated");
        assert!((350..=370).contains(&at), "{at}");
        assert!(
            growing.verdict().unwrap().starts_with("over-saturated: TTFT from the send rose 250.0 ms"),
            "{:?}",
            growing.verdict()
        );
    }

    #[test]
    fn a_client_that_falls_behind_its_schedule_is_not_a_server_over_saturated() {
        // 10 req/s scheduled; the client sends each 25 ms later than the one before (its own queue
        // grows), the server answers each 50 ms after the send: TTFT from the schedule and the
        // requests in flight grow as in the test above, TTFT from the send does not
        let mut behind = OverSaturation::new(1000.0);
        for i in 0..600 {
            let a = i as f64 * 100.0;
            let sent = a + 25.0 * i as f64;
            assert!(!behind.finished(sent + 50.0, a, sent, Some(sent + 50.0), i / 4), "request {i}");
        }
        assert_eq!(behind.verdict(), None);
        // the same server queueing (TTFT from the send grows) is still called
        let mut queued = OverSaturation::new(1000.0);
        let called = (0..600).any(|i| {
            let a = i as f64 * 100.0;
            let sent = a + 1.0;
            queued.finished(sent + 50.0 + 25.0 * i as f64, a, sent, Some(sent + 50.0 + 25.0 * i as f64), i / 4)
        });
        assert!(called);
    }

    #[test]
    fn a_server_that_finishes_nothing_is_called_over_saturated_by_its_requests_in_flight() {
        // 10 arrivals a second, none ends: 10 more in flight each second
        let mut stuck = OverSaturation::new(1000.0);
        let at = (0..1000).position(|i| stuck.tick(i as f64 * 100.0, i + 1)).expect("called");
        // judged from 60 s on (request 600), every 5 s: called at the second judgement
        assert!((645..=655).contains(&at), "{at}");
        // one of them ended at 2 s, 2 s after its schedule: judged from 4 s on, once that spans
        // 30 s: at 35 s and 40 s
        let mut slow = OverSaturation::new(1000.0);
        let at = (0..1000)
            .position(|i| {
                if i == 20 { slow.finished(2000.0, 0.0, 0.0, None, i) } else { slow.tick(i as f64 * 100.0, i + 1) }
            })
            .expect("called");
        assert!((395..=405).contains(&at), "{at}");
        // a run filling up for 9 s (requests take 9 s), then steady at 90 in flight: never called
        let mut filling = OverSaturation::new(1000.0);
        assert!((0..6000).all(|i| {
            let t = i as f64 * 10.0;
            if i == 900 { !filling.finished(t, 0.0, 0.0, Some(100.0), 90) } else { !filling.tick(t, (i / 10).min(90)) }
        }));
        let v = stuck.verdict().unwrap();
        assert!(v.starts_with("over-saturated: requests in flight rose 10.0 per second"), "{v}");
        // a closed loop of 64 users holds 64 in flight: never called
        let mut closed = OverSaturation::new(1000.0);
        assert!((0..6000).all(|i| !closed.tick(i as f64 * 10.0, 64 - (i % 3))));
    }

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
