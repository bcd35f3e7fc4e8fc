//! Per-request latency metrics, exactly as defined in `docs/metrics.md`.
//!
//! Notation: `a` scheduled, `s` sent, `s'` written (the request's last byte left; `s` where
//! unknown), `c1..cK` content events, `m1..mK` tokens per event,
//! `N` output tokens.

use crate::record::RequestRecord;

/// Latencies of one request, in milliseconds. `None` where a quantity is undefined.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestMetrics {
    /// `c1 − s'`
    pub ttft: Option<f64>,
    /// `c1 − a`
    pub ttft_sched: Option<f64>,
    /// `s₀ − a` (`s₀`: the first attempt's send)
    pub client_queue: Option<f64>,
    /// `s₀ − a − cap_wait`: how late the load generator itself was.
    pub schedule_lag: Option<f64>,
    /// Waits between attempts for the server's `Retry-After` or the backoff (`--retries`):
    /// `Some` only for a request that was retried.
    pub retry_wait: Option<f64>,
    /// `cK − s'`
    pub e2e: Option<f64>,
    /// `cK − a`
    pub e2e_sched: Option<f64>,
    /// `cK − c1`
    pub decode: Option<f64>,
    /// `decode / (N − 1)`, undefined when `N ≤ 1`.
    pub tpot: Option<f64>,
    /// `E2E / N` (GuideLLM's "TPOT").
    pub normalized: Option<f64>,
    /// Longest gap between consecutive content events (the worst stall a reader saw).
    pub itl_max: Option<f64>,
    /// `end − s'`: until the stream closed (reported apart from E2E).
    pub stream_close: Option<f64>,
    /// Time to the first answer (output) token: `c(R+1) − s'` after `R` reasoning events (TTFT
    /// without reasoning); undefined when the stream never answered.
    pub ttfo: Option<f64>,
    /// A reasoning stream's TPOT of each phase: `(c_R − c_1) / (Σ_{k≤R} m_k − 1)` and
    /// `(c_K − c_(R+1)) / (Σ_{k>R} m_k − 1)`, undefined with fewer than two tokens in the phase;
    /// without reasoning, no reasoning TPOT and the answer's is TPOT.
    pub tpot_reasoning: Option<f64>,
    pub tpot_answer: Option<f64>,
}

impl RequestMetrics {
    pub fn of(r: &RequestRecord) -> Self {
        let a = r.scheduled_ms;
        // the client's lateness ends at the first send; retries after it are the server's
        let s0 = r.first_sent_ms();
        // service-view latencies start when the request's bytes left (`s'`, else `s`)
        let w = r.service_start_ms();
        let c1 = r.first_event_ms();
        let ck = r.last_event_ms();
        let n = r.output_tokens;
        let sub = |x: Option<f64>, y: Option<f64>| Some(x? - y?);
        let e2e = sub(ck, w);
        let decode = sub(ck, c1);
        let tpot = match (decode, n) {
            (Some(d), Some(n)) if n > 1 => Some(d / (n - 1) as f64),
            _ => None,
        };
        let normalized = match (e2e, n) {
            (Some(e), Some(n)) if n > 0 => Some(e / n as f64),
            _ => None,
        };
        let itl_max = largest_gap(&r.event_ms);
        let (tpot_reasoning, tpot_answer) = match r.reasoning_events {
            Some(k) => (phase_tpot(r, 0, k as usize), phase_tpot(r, k as usize, r.event_ms.len())),
            // without reasoning the whole output is the answer
            None => (None, tpot),
        };
        RequestMetrics {
            ttft: sub(c1, w),
            ttft_sched: c1.map(|c| c - a),
            client_queue: s0.map(|s| s - a),
            schedule_lag: s0.map(|s| s - a - r.cap_wait_ms),
            retry_wait: (!r.attempts.is_empty()).then(|| r.retry_wait_ms()),
            e2e,
            e2e_sched: ck.map(|c| c - a),
            decode,
            tpot,
            normalized,
            itl_max,
            stream_close: sub(r.end_ms, w),
            ttfo: sub(r.first_answer_ms(), w),
            tpot_reasoning,
            tpot_answer,
        }
    }
}

/// The longest gap between consecutive times, `None` with fewer than two. Four running maxima,
/// each over every fourth gap: a summary computes this for every request, and one maximum
/// would wait on the one before it at each gap.
fn largest_gap(t: &[f64]) -> Option<f64> {
    if t.len() < 2 {
        return None;
    }
    let (earlier, later) = (&t[..t.len() - 1], &t[1..]);
    let (mut a, mut b) = (earlier.chunks_exact(4), later.chunks_exact(4));
    let mut m = [f64::NEG_INFINITY; 4];
    for (x, y) in (&mut a).zip(&mut b) {
        for k in 0..4 {
            m[k] = m[k].max(y[k] - x[k]);
        }
    }
    let rest = a.remainder().iter().zip(b.remainder()).map(|(x, y)| y - x);
    Some(rest.chain(m).fold(f64::NEG_INFINITY, f64::max))
}

/// Token-level inter-token latencies of one request as `(value_ms, weight)` pairs: for each
/// content event `k ≥ 2` that carried `m_k ≥ 1` tokens, the gap since the previous event that
/// carried tokens, divided by `m_k`, counted `m_k` times. With `m1 = 1` their mean is TPOT.
pub fn itl_samples(r: &RequestRecord) -> impl Iterator<Item = (f64, u64)> + '_ {
    let mut prev: Option<f64> = None;
    r.event_ms.iter().zip(r.event_tokens.iter().copied().chain(std::iter::repeat(1))).filter_map(move |(&t, m)| {
        if m == 0 {
            return None;
        }
        // x / 1 is x exactly: skip the division (a long-latency one) for one-token events
        let out = prev.map(|p| (if m == 1 { t - p } else { (t - p) / m as f64 }, m as u64));
        prev = Some(t);
        out
    })
}

/// TPOT over events `lo..hi` (0-based): their time span over their tokens less one.
fn phase_tpot(r: &RequestRecord, lo: usize, hi: usize) -> Option<f64> {
    let hi = hi.min(r.event_ms.len());
    if hi <= lo {
        return None;
    }
    let tokens: u64 = (lo..hi).map(|k| r.event_tokens.get(k).copied().unwrap_or(1) as u64).sum();
    (tokens > 1).then(|| (r.event_ms[hi - 1] - r.event_ms[lo]) / (tokens - 1) as f64)
}

/// Token-level ITL samples of the events `lo..hi` alone (0-based; gaps between two of them):
/// a reasoning stream's phases (`itl_samples` over its reasoning or its answer events).
pub fn itl_samples_between(r: &RequestRecord, lo: usize, hi: usize) -> impl Iterator<Item = (f64, u64)> + '_ {
    let hi = hi.min(r.event_ms.len());
    let lo = lo.min(hi);
    let mut prev: Option<f64> = None;
    r.event_ms[lo..hi].iter().zip(r.event_tokens.iter().skip(lo).copied().chain(std::iter::repeat(1))).filter_map(
        move |(&t, m)| {
            if m == 0 {
                return None;
            }
            let out = prev.map(|p| ((t - p) / m as f64, m as u64));
            prev = Some(t);
            out
        },
    )
}

/// Raw gaps between consecutive content events (what vLLM reports as ITL).
pub fn chunk_gaps(r: &RequestRecord) -> impl Iterator<Item = f64> + '_ {
    r.event_ms.windows(2).map(|w| w[1] - w[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> RequestRecord {
        // a = 0, s = 2, c = [52, 62, 82, 92] with m = [1, 1, 2, 1], N = 5, end = 95
        RequestRecord {
            scheduled_ms: 0.0,
            sent_ms: Some(2.0),
            event_ms: vec![52.0, 62.0, 82.0, 92.0],
            event_tokens: vec![1, 1, 2, 1],
            end_ms: Some(95.0),
            output_tokens: Some(5),
            ..Default::default()
        }
    }

    #[test]
    fn the_largest_gap_is_the_longest_between_neighbours() {
        assert_eq!(largest_gap(&[]), None);
        assert_eq!(largest_gap(&[5.0]), None);
        assert_eq!(largest_gap(&[5.0, 7.5]), Some(2.5));
        // every position of the longest gap, past the four lanes and in the remainder
        for n in 2..12 {
            for at in 1..n {
                let t: Vec<f64> = (0..n).map(|i| i as f64 + if i >= at { 9.0 } else { 0.0 }).collect();
                assert_eq!(largest_gap(&t), Some(10.0), "n {n}, longest gap ending at {at}");
            }
        }
    }

    #[test]
    fn hand_computed_request_metrics() {
        let m = RequestMetrics::of(&rec());
        assert_eq!(m.ttft, Some(50.0));
        assert_eq!(m.ttft_sched, Some(52.0));
        assert_eq!(m.client_queue, Some(2.0));
        assert_eq!(m.schedule_lag, Some(2.0));
        assert_eq!(m.e2e, Some(90.0));
        assert_eq!(m.e2e_sched, Some(92.0));
        assert_eq!(m.decode, Some(40.0));
        assert_eq!(m.tpot, Some(10.0)); // 40 / (5 - 1)
        assert_eq!(m.normalized, Some(18.0)); // 90 / 5
        assert_eq!(m.itl_max, Some(20.0));
        assert_eq!(m.stream_close, Some(93.0));
    }

    #[test]
    fn service_latencies_count_from_when_the_request_was_written() {
        // the same request, its bytes written at s' = 6 (4 ms connecting and dispatching)
        let r = RequestRecord { written_ms: Some(6.0), ..rec() };
        let m = RequestMetrics::of(&r);
        assert_eq!(m.ttft, Some(46.0)); // 52 − 6
        assert_eq!(m.e2e, Some(86.0)); // 92 − 6
        assert_eq!(m.stream_close, Some(89.0)); // 95 − 6
        assert_eq!(m.normalized, Some(17.2)); // 86 / 5
        // the user's view, the client's queue and its lag still count from a and s
        assert_eq!((m.ttft_sched, m.e2e_sched), (Some(52.0), Some(92.0)));
        assert_eq!((m.client_queue, m.schedule_lag), (Some(2.0), Some(2.0)));
        // and decode-side quantities do not move
        assert_eq!((m.decode, m.tpot, m.itl_max), (Some(40.0), Some(10.0), Some(20.0)));
    }

    #[test]
    fn itl_token_level_mean_is_tpot() {
        let r = rec();
        let s: Vec<_> = itl_samples(&r).collect();
        // gaps 10 (m=1), 20 (m=2 -> 10 twice), 10 (m=1)
        assert_eq!(s, vec![(10.0, 1), (10.0, 2), (10.0, 1)]);
        let total: f64 = s.iter().map(|&(v, w)| v * w as f64).sum();
        let n: u64 = s.iter().map(|&(_, w)| w).sum();
        assert_eq!(total / n as f64, RequestMetrics::of(&r).tpot.unwrap());
        assert_eq!(chunk_gaps(&r).collect::<Vec<_>>(), vec![10.0, 20.0, 10.0]);
    }

    #[test]
    fn zero_token_event_folds_into_next_gap() {
        let r = RequestRecord {
            event_ms: vec![0.0, 5.0, 10.0],
            event_tokens: vec![1, 0, 1],
            output_tokens: Some(2),
            ..Default::default()
        };
        assert_eq!(itl_samples(&r).collect::<Vec<_>>(), vec![(10.0, 1)]);
    }

    #[test]
    fn tpot_undefined_for_single_token() {
        let r = RequestRecord {
            sent_ms: Some(0.0),
            event_ms: vec![30.0],
            event_tokens: vec![1],
            output_tokens: Some(1),
            ..Default::default()
        };
        let m = RequestMetrics::of(&r);
        assert_eq!(m.tpot, None);
        assert_eq!(m.ttft, Some(30.0));
        assert_eq!(m.decode, Some(0.0));
        assert_eq!(m.itl_max, None);
    }

    #[test]
    fn a_reasoning_streams_phases_by_hand() {
        // s' = 2; 3 reasoning events at 52, 62, 72 (1 token each), then the answer at 92, 97
        // (2 tokens), 107
        let r = RequestRecord {
            sent_ms: Some(2.0),
            event_ms: vec![52.0, 62.0, 72.0, 92.0, 97.0, 107.0],
            event_tokens: vec![1, 1, 1, 1, 2, 1],
            output_tokens: Some(7),
            reasoning_events: Some(3),
            ..Default::default()
        };
        let m = RequestMetrics::of(&r);
        assert_eq!(m.ttft, Some(50.0));
        assert_eq!(m.ttfo, Some(90.0)); // 92 − 2
        assert_eq!(m.tpot_reasoning, Some(10.0)); // (72 − 52) / (3 − 1)
        assert_eq!(m.tpot_answer, Some(5.0)); // (107 − 92) / (4 − 1)
        assert_eq!(m.tpot, Some(55.0 / 6.0)); // (107 − 52) / (7 − 1)
        // phase ITLs: gaps inside each phase only (the 97 event's 5 ms over its 2 tokens)
        assert_eq!(itl_samples_between(&r, 0, 3).collect::<Vec<_>>(), vec![(10.0, 1), (10.0, 1)]);
        assert_eq!(itl_samples_between(&r, 3, 6).collect::<Vec<_>>(), vec![(2.5, 2), (10.0, 1)]);
        // never answered: no TTFO; no reasoning: TTFO is TTFT
        let unanswered = RequestRecord { reasoning_events: Some(6), ..r.clone() };
        assert_eq!((RequestMetrics::of(&unanswered).ttfo, RequestMetrics::of(&unanswered).tpot_answer), (None, None));
        let plain = RequestRecord { reasoning_events: None, ..r };
        let p = RequestMetrics::of(&plain);
        assert_eq!((p.ttfo, p.tpot_reasoning, p.tpot_answer), (Some(50.0), None, p.tpot));
    }

    #[test]
    fn retries_are_not_lag() {
        // scheduled at 10, first sent at 10.5, a 429 at 12, resent after Retry-After: 1 at 1012
        let r = RequestRecord {
            scheduled_ms: 10.0,
            sent_ms: Some(1012.0),
            event_ms: vec![1062.0],
            event_tokens: vec![1],
            output_tokens: Some(1),
            attempts: vec![crate::record::Attempt {
                sent_ms: 10.5,
                end_ms: 12.0,
                error: crate::record::RequestError {
                    class: crate::record::ErrorClass::HttpStatus,
                    message: String::new(),
                    status: Some(429),
                },
            }],
            reconnects: 1,
            ..Default::default()
        };
        let m = RequestMetrics::of(&r);
        assert_eq!((m.schedule_lag, m.client_queue), (Some(0.5), Some(0.5)));
        assert_eq!(m.retry_wait, Some(1000.0));
        // the service view is the measured attempt's; the user's view holds the whole wait
        assert_eq!((m.ttft, m.ttft_sched), (Some(50.0), Some(1052.0)));
        assert_eq!(RequestMetrics::of(&rec()).retry_wait, None);
    }

    #[test]
    fn cap_wait_is_not_lag() {
        let r = RequestRecord { scheduled_ms: 10.0, cap_wait_ms: 30.0, sent_ms: Some(40.5), ..Default::default() };
        let m = RequestMetrics::of(&r);
        assert_eq!(m.client_queue, Some(30.5));
        assert_eq!(m.schedule_lag, Some(0.5));
    }
}
