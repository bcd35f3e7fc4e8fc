//! Service-level objectives, SLO attainment and goodput (docs/metrics.md, "Goodput").
//!
//! An [`Slo`] is a set of predicates: per-request bounds (`ttft<=200ms`) and percentile bounds
//! over the run (`p99(ttft)<=200ms`). A request is *good* when it succeeded and every bound holds
//! for it (a percentile bound also bounds each request, for attainment and goodput); failed
//! requests are never good. Percentile bounds are also judged as a whole, with their confidence:
//! met, missed, or not enough evidence.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::confidence::quantile_ranks;
use crate::record::RequestRecord;
use crate::request::RequestMetrics;
use crate::stats::{PercentileMethod, Samples};

/// A per-request latency an SLO can bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Ttft,
    TtftSched,
    Tpot,
    ItlMax,
    E2e,
    E2eSched,
    /// Time to the first answer token (TTFT without reasoning).
    Ttfo,
    /// A reasoning stream's answer-phase TPOT (TPOT without reasoning).
    TpotAnswer,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::TtftSched => "ttft_sched",
            Metric::Tpot => "tpot",
            Metric::ItlMax => "itl_max",
            Metric::E2e => "e2e",
            Metric::E2eSched => "e2e_sched",
            Metric::Ttfo => "ttfo",
            Metric::TpotAnswer => "tpot_answer",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "ttft" => Metric::Ttft,
            "ttft_sched" => Metric::TtftSched,
            "tpot" => Metric::Tpot,
            "itl_max" | "max_itl" => Metric::ItlMax,
            "e2e" => Metric::E2e,
            "e2e_sched" => Metric::E2eSched,
            "ttfo" => Metric::Ttfo,
            "tpot_answer" => Metric::TpotAnswer,
            _ => return None,
        })
    }

    /// The request's value, ms (`None` when undefined, e.g. TPOT of a one-token reply).
    pub fn of(self, m: &RequestMetrics) -> Option<f64> {
        match self {
            Metric::Ttft => m.ttft,
            Metric::TtftSched => m.ttft_sched,
            Metric::Tpot => m.tpot,
            Metric::ItlMax => m.itl_max,
            Metric::E2e => m.e2e,
            Metric::E2eSched => m.e2e_sched,
            Metric::Ttfo => m.ttfo,
            Metric::TpotAnswer => m.tpot_answer,
        }
    }
}

/// One predicate: `metric ≤ limit` for every request, or for the `p`-quantile when `p` is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Predicate {
    pub metric: Metric,
    pub limit_ms: f64,
    pub percentile: Option<f64>,
}

fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 && (ms / 1000.0).fract() == 0.0 { format!("{}s", ms / 1000.0) } else { format!("{ms}ms") }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.percentile {
            Some(p) => {
                let pct = p * 100.0;
                let pct = if pct.fract() == 0.0 { format!("{pct:.0}") } else { format!("{pct}") };
                write!(f, "p{pct}({})<={}", self.metric.name(), fmt_ms(self.limit_ms))
            }
            None => write!(f, "{}<={}", self.metric.name(), fmt_ms(self.limit_ms)),
        }
    }
}

/// `200ms`, `2s`, `1.5s`, or a bare number of milliseconds. Milliseconds (the display form) are
/// read as they are: converted through seconds, `5545282.23977744ms` would come back one ulp off
/// and an SLO would not round-trip through its text (found by `fuzz_slo`).
fn parse_ms(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.strip_suffix("ms").unwrap_or(t).trim().parse::<f64>() {
        Ok(ms) => Some(ms).filter(|v| v.is_finite() && (0.0..=crate::units::MAX_SECONDS * 1000.0).contains(v)),
        Err(_) => crate::units::seconds(t, 0.001).map(|v| v * 1000.0),
    }
}

impl FromStr for Predicate {
    type Err = crate::error::ParseError;

    fn from_str(s: &str) -> Result<Self, crate::error::ParseError> {
        Self::parse_text(s).map_err(|m| crate::error::ParseError::new(s, m))
    }
}

impl Predicate {
    fn parse_text(s: &str) -> Result<Self, String> {
        let expect = "expected METRIC<=LIMIT or pNN(METRIC)<=LIMIT with METRIC one of ttft, ttft_sched, tpot, itl_max, e2e, e2e_sched, ttfo, tpot_answer (e.g. ttft<=200ms, p99(tpot)<=40ms)";
        let s = s.trim();
        let (lhs, rhs) = s.split_once("<=").or_else(|| s.split_once('<')).ok_or_else(|| format!("`{s}`: {expect}"))?;
        let limit_ms =
            parse_ms(rhs).ok_or_else(|| format!("`{s}`: `{}` is not a duration like 200ms or 2s", rhs.trim()))?;
        let lhs = lhs.trim();
        let (metric, percentile) =
            match lhs.strip_prefix('p').and_then(|r| r.strip_suffix(')')).and_then(|r| r.split_once('(')) {
                Some((p, m)) => {
                    let p: f64 = p.parse().map_err(|_| format!("`{s}`: `p{p}` is not a percentile like p99"))?;
                    if !(p > 0.0 && p < 100.0) {
                        return Err(format!("`{s}`: the percentile must be between 0 and 100"));
                    }
                    (m, Some(p / 100.0))
                }
                None => (lhs, None),
            };
        let metric = Metric::parse(metric).ok_or_else(|| format!("`{s}`: unknown metric `{metric}`; {expect}"))?;
        Ok(Predicate { metric, limit_ms, percentile })
    }
}

/// Named SLOs, with where they come from.
pub const PRESETS: &[(&str, &str, &str)] = &[
    ("mlperf-llama2-70b", "p99(ttft)<=2s,p99(tpot)<=200ms", "MLPerf Inference v4.0+ Llama-2-70B server scenario"),
    (
        "mlperf-interactive",
        "p99(ttft)<=450ms,p99(tpot)<=40ms",
        "MLPerf Inference v5.0 Llama-2-70B interactive scenario",
    ),
    ("mlperf-llama3.1-8b", "p99(ttft)<=2s,p99(tpot)<=100ms", "MLPerf Inference v5.1 Llama-3.1-8B server scenario"),
    ("chat", "p99(ttft)<=200ms", "GuideLLM's chat target: TTFT under 200 ms for 99% of requests"),
    ("seed-online", "ttft<=450ms,tpot<=40ms", "the seed article's online-serving targets, per request"),
    (
        "reasoning",
        "p99(ttfo)<=30s,p99(tpot_answer)<=50ms",
        "a reasoning model's answer: first answer token within 30 s, then the answer at reading pace",
    ),
];

/// A set of predicates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slo {
    pub predicates: Vec<Predicate>,
}

impl Slo {
    /// Parses comma-separated predicates (repeatable flags are joined by the caller).
    pub fn parse(text: &str) -> Result<Self, crate::error::ParseError> {
        let predicates =
            text.split(',').filter(|t| !t.trim().is_empty()).map(str::parse).collect::<Result<Vec<_>, _>>()?;
        if predicates.is_empty() {
            return Err(crate::error::ParseError::new(text, "no predicates"));
        }
        Ok(Slo { predicates })
    }

    pub fn preset(name: &str) -> Result<Self, crate::error::ParseError> {
        PRESETS.iter().find(|(n, _, _)| *n == name).map(|(_, p, _)| Slo::parse(p).expect("presets parse")).ok_or_else(
            || {
                let known = PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ");
                crate::error::ParseError::new(name, format!("unknown preset `{name}`; known: {known}"))
            },
        )
    }

    pub fn extend(&mut self, other: Slo) {
        for p in other.predicates {
            if !self.predicates.contains(&p) {
                self.predicates.push(p);
            }
        }
    }

    /// The bound on `metric` (the tightest one, per request or percentile).
    pub fn limit(&self, metric: Metric) -> Option<f64> {
        self.predicates.iter().filter(|p| p.metric == metric).map(|p| p.limit_ms).reduce(f64::min)
    }

    /// Whether a request is good: it succeeded and meets every bound (undefined values pass).
    pub fn good(&self, r: &RequestRecord, m: &RequestMetrics) -> bool {
        r.is_success() && self.predicates.iter().all(|p| p.metric.of(m).is_none_or(|v| v <= p.limit_ms))
    }

    pub fn describe(&self) -> String {
        self.predicates.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
    }

    pub fn is_empty(&self) -> bool {
        self.predicates.is_empty()
    }
}

/// As the list of its predicates' text forms (`["p99(ttft)<=2s", …]`).
impl Serialize for Slo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.predicates.iter().map(|p| p.to_string()))
    }
}

impl<'de> Deserialize<'de> for Slo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let texts = Vec::<String>::deserialize(d)?;
        let predicates = texts.iter().map(|t| t.parse()).collect::<Result<Vec<Predicate>, crate::error::ParseError>>();
        predicates.map(|predicates| Slo { predicates }).map_err(serde::de::Error::custom)
    }
}

/// Parameters of the smoothed goodput (our reading-pace model).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Smoothing {
    /// TTFT budget `T0`, ms.
    pub t0_ms: f64,
    /// Reading pace `τ`, ms per token.
    pub tau_ms: f64,
    /// Excess delay still fully acceptable, ms (default `T0`).
    pub u_ok_ms: f64,
    /// Excess delay at which the benefit reaches zero, ms (default `5·T0`).
    pub u_max_ms: f64,
}

impl Smoothing {
    /// Defaults from the SLO's TTFT and TPOT bounds; `None` when the SLO has neither.
    pub fn from_slo(slo: &Slo) -> Option<Self> {
        let t0 = slo.limit(Metric::Ttft).or(slo.limit(Metric::TtftSched))?;
        let tau = slo.limit(Metric::Tpot).unwrap_or(0.0);
        Some(Smoothing { t0_ms: t0, tau_ms: tau, u_ok_ms: t0, u_max_ms: 5.0 * t0 })
    }

    /// Excess delay `U` of one request from its token times `t_i` (ms after sending):
    /// `ρ1 = max(t1, T0)`, `ρi = max(ti, ρ(i−1) + τ)`, `U = ρN − T0 − (N − 1)·τ` (≥ 0).
    pub fn excess_delay(&self, token_ms: impl IntoIterator<Item = f64>) -> Option<f64> {
        let mut rho: Option<f64> = None;
        let mut n = 0u64;
        for t in token_ms {
            rho = Some(match rho {
                None => t.max(self.t0_ms),
                Some(r) => t.max(r + self.tau_ms),
            });
            n += 1;
        }
        let rho = rho?;
        Some((rho - self.t0_ms - (n - 1) as f64 * self.tau_ms).max(0.0))
    }

    /// Benefit `b(U)`: 1 up to `U_ok`, falling linearly to 0 at `U_max`.
    pub fn benefit(&self, u: f64) -> f64 {
        if u <= self.u_ok_ms {
            1.0
        } else if u >= self.u_max_ms || self.u_max_ms <= self.u_ok_ms {
            0.0
        } else {
            1.0 - (u - self.u_ok_ms) / (self.u_max_ms - self.u_ok_ms)
        }
    }
}

/// Token arrival times of a request, ms after sending (each content event's time, once per token).
fn token_times(r: &RequestRecord) -> impl Iterator<Item = f64> + '_ {
    let s = r.service_start_ms().unwrap_or(r.scheduled_ms);
    r.event_ms.iter().zip(&r.event_tokens).flat_map(move |(&t, &m)| std::iter::repeat_n(t - s, m as usize))
}

/// Etalon's fluidity index for one request (arXiv:2407.07000, as we implement it): token `i` has a
/// deadline, `T0` for the first and the previous deadline plus `τ` after a met one (slack carries
/// forward) or the previous token's arrival plus `τ` after a miss; the index is the share of
/// deadlines met.
pub fn fluidity(token_ms: impl IntoIterator<Item = f64>, t0_ms: f64, tau_ms: f64) -> Option<f64> {
    let mut deadline = t0_ms;
    let (mut met, mut n) = (0u64, 0u64);
    for t in token_ms {
        n += 1;
        if t <= deadline {
            met += 1;
            deadline += tau_ms;
        } else {
            deadline = t + tau_ms;
        }
    }
    (n > 0).then(|| met as f64 / n as f64)
}

/// How a percentile bound fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloVerdict {
    Met,
    Missed,
    NotEnoughEvidence,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassRate {
    pub predicate: String,
    /// Attempted requests that succeeded and satisfy this predicate alone.
    pub pass_rate: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PercentileVerdict {
    pub predicate: String,
    /// The percentile over successful requests.
    pub value: Option<f64>,
    /// Its 95% interval over attempted requests, failures counted as over the limit.
    pub ci: [Option<f64>; 2],
    pub n: u64,
    /// Attempted requests over the limit (failures included).
    pub over: u64,
    pub verdict: SloVerdict,
}

/// The SLO part of a summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloSummary {
    pub predicates: Vec<String>,
    pub attempted: u64,
    pub good: u64,
    /// good / attempted.
    pub attainment: f64,
    /// Good requests per second of the measurement window.
    pub request_goodput: f64,
    /// Output tokens of good requests per second of the window.
    pub token_goodput: f64,
    pub smoothed_goodput: Option<f64>,
    pub smoothed_attainment: Option<f64>,
    pub smoothing: Option<Smoothing>,
    /// Mean Etalon fluidity index over attempted requests (failures count 0).
    pub fluidity_index: Option<f64>,
    pub pass_rates: Vec<PassRate>,
    /// The predicate with the lowest pass rate.
    pub binding: Option<String>,
    pub percentiles: Vec<PercentileVerdict>,
}

/// Evaluates `slo` over the measured requests (`measured[i]` says whether record `i` is in the
/// measurement set) and a window of `window_s` seconds.
pub fn evaluate(
    slo: &Slo,
    smoothing: Option<Smoothing>,
    records: &[RequestRecord],
    measured: &[bool],
    window_s: f64,
    method: PercentileMethod,
) -> SloSummary {
    let t = tally(slo, smoothing, records, measured);
    let attempted = t.attempted;
    let per = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
    let frac = |x: f64| if attempted > 0 { x / attempted as f64 } else { 0.0 };
    let pass_rates: Vec<PassRate> = slo
        .predicates
        .iter()
        .zip(&t.pass)
        .map(|(p, &k)| PassRate { predicate: p.to_string(), pass_rate: frac(k as f64) })
        .collect();
    let binding = pass_rates
        .iter()
        .filter(|p| p.pass_rate < 1.0)
        .min_by(|a, b| a.pass_rate.total_cmp(&b.pass_rate))
        .map(|p| p.predicate.clone());
    let percentiles = percentile_verdicts(slo, t.values, t.all, method);
    SloSummary {
        predicates: slo.predicates.iter().map(|p| p.to_string()).collect(),
        attempted,
        good: t.good,
        attainment: frac(t.good as f64),
        request_goodput: per(t.good as f64),
        token_goodput: per(t.good_tokens as f64),
        smoothed_goodput: smoothing.map(|_| per(t.smooth_tokens)),
        smoothed_attainment: smoothing.map(|_| frac(t.smooth_sum)),
        smoothing,
        fluidity_index: smoothing.map(|_| frac(t.fluid_sum)),
        pass_rates,
        binding,
        percentiles,
    }
}

/// What one pass over the measured requests counts, for [`evaluate`].
struct Tally {
    attempted: u64,
    good: u64,
    good_tokens: u64,
    /// Per predicate: requests that pass it.
    pass: Vec<u64>,
    smooth_tokens: f64,
    smooth_sum: f64,
    fluid_sum: f64,
    /// Per percentile predicate: the successful requests' values.
    values: Vec<Samples>,
    /// Per percentile predicate: every attempted request's value (failures = ∞).
    all: Vec<Vec<f64>>,
}

/// Counts the measured requests: attempted, good, each predicate's passes, smoothed sums and percentile values.
fn tally(slo: &Slo, smoothing: Option<Smoothing>, records: &[RequestRecord], measured: &[bool]) -> Tally {
    let mut attempted = 0u64;
    let mut good = 0u64;
    let mut good_tokens = 0u64;
    let mut pass = vec![0u64; slo.predicates.len()];
    let (mut smooth_tokens, mut smooth_sum) = (0.0f64, 0.0f64);
    let mut fluid_sum = 0.0f64;
    // per percentile predicate: successful values, and every attempted value (failures = ∞)
    let mut values: Vec<Samples> = slo.predicates.iter().map(|_| Samples::new()).collect();
    let mut all: Vec<Vec<f64>> = slo.predicates.iter().map(|_| Vec::new()).collect();
    for (r, _) in records.iter().zip(measured).filter(|(_, m)| **m) {
        attempted += 1;
        let m = RequestMetrics::of(r);
        for (i, p) in slo.predicates.iter().enumerate() {
            let v = p.metric.of(&m);
            if r.is_success() && v.is_none_or(|v| v <= p.limit_ms) {
                pass[i] += 1;
            }
            if p.percentile.is_some() {
                match (r.is_success(), v) {
                    (true, Some(v)) => {
                        values[i].push(v);
                        all[i].push(v);
                    }
                    (true, None) => {}
                    (false, _) => all[i].push(f64::INFINITY),
                }
            }
        }
        let n = r.output_tokens.unwrap_or(0);
        if slo.good(r, &m) {
            good += 1;
            good_tokens += n;
        }
        if let Some(sm) = smoothing
            && r.is_success()
        {
            // two lazy passes over the token times: nothing per token is allocated, however many
            // tokens the server's usage claims
            let b = sm.excess_delay(token_times(r)).map_or(0.0, |u| sm.benefit(u));
            smooth_sum += b;
            smooth_tokens += n as f64 * b;
            fluid_sum += fluidity(token_times(r), sm.t0_ms, sm.tau_ms).unwrap_or(0.0);
        }
    }
    Tally { attempted, good, good_tokens, pass, smooth_tokens, smooth_sum, fluid_sum, values, all }
}

/// Each percentile predicate's verdict: its value, a 95% interval from every attempted value, met or missed.
fn percentile_verdicts(
    slo: &Slo,
    mut values: Vec<Samples>,
    mut all: Vec<Vec<f64>>,
    method: PercentileMethod,
) -> Vec<PercentileVerdict> {
    let mut percentiles = Vec::new();
    for (i, p) in slo.predicates.iter().enumerate() {
        let Some(q) = p.percentile else { continue };
        let mut vals = std::mem::take(&mut all[i]);
        vals.sort_unstable_by(f64::total_cmp);
        let n = vals.len() as u64;
        let over = vals.iter().filter(|&&v| v > p.limit_ms).count() as u64;
        let (l, u) = quantile_ranks(n, q, 0.05);
        let at = |r: Option<u64>| r.map(|r| vals[(r - 1) as usize]).filter(|v| v.is_finite());
        let (lo, hi) = (l.map(|r| vals[(r - 1) as usize]), u.map(|r| vals[(r - 1) as usize]));
        // met: even the interval's upper end is within the limit; missed: even its lower end is over
        let verdict = if hi.is_some_and(|h| h <= p.limit_ms) {
            SloVerdict::Met
        } else if lo.is_some_and(|l| l > p.limit_ms) {
            SloVerdict::Missed
        } else {
            SloVerdict::NotEnoughEvidence
        };
        percentiles.push(PercentileVerdict {
            predicate: p.to_string(),
            value: values[i].percentile(q, method),
            ci: [at(l), at(u)],
            n,
            over,
            verdict,
        });
    }
    percentiles
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ErrorClass, RequestError};

    fn rec(ttft: f64, gap: f64, n: usize) -> RequestRecord {
        let events: Vec<f64> = (0..n).map(|i| ttft + gap * i as f64).collect();
        RequestRecord {
            sent_ms: Some(0.0),
            end_ms: events.last().copied(),
            event_tokens: vec![1; n],
            event_ms: events,
            output_tokens: Some(n as u64),
            ..Default::default()
        }
    }

    fn failed() -> RequestRecord {
        RequestRecord {
            sent_ms: Some(0.0),
            end_ms: Some(5.0),
            error: Some(RequestError { class: ErrorClass::HttpStatus, message: "503".into(), status: Some(503) }),
            ..Default::default()
        }
    }

    #[test]
    fn parses_predicates_and_presets() {
        let s = Slo::parse("ttft<=200ms, tpot<40ms,p99(ttft)<=2s,p99.9(e2e)<=10s").unwrap();
        assert_eq!(s.predicates.len(), 4);
        assert_eq!(s.predicates[1], Predicate { metric: Metric::Tpot, limit_ms: 40.0, percentile: None });
        assert_eq!(s.predicates[2], Predicate { metric: Metric::Ttft, limit_ms: 2000.0, percentile: Some(0.99) });
        assert_eq!(s.predicates[3].to_string(), "p99.9(e2e)<=10s");
        assert_eq!(s.describe(), "ttft<=200ms, tpot<=40ms, p99(ttft)<=2s, p99.9(e2e)<=10s");
        for bad in ["ttft", "ttft<=fast", "latency<=3ms", "p120(ttft)<=1s", "px(ttft)<=1s"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Slo::preset("mlperf-interactive").unwrap().limit(Metric::Tpot), Some(40.0));
        assert!(Slo::preset("fast").unwrap_err().message.contains("mlperf-llama2-70b"));
    }

    #[test]
    fn attainment_and_goodput_by_hand() {
        // 4 attempted over 2 s: two fast (TTFT 50, TPOT 10, 5 tokens), one slow TTFT, one failed
        let recs = vec![rec(50.0, 10.0, 5), rec(50.0, 10.0, 5), rec(500.0, 10.0, 5), failed()];
        let slo = Slo::parse("ttft<=200ms,tpot<=40ms").unwrap();
        let s = evaluate(&slo, None, &recs, &[true; 4], 2.0, PercentileMethod::Linear);
        assert_eq!((s.attempted, s.good), (4, 2));
        assert_eq!(s.attainment, 0.5);
        assert_eq!(s.request_goodput, 1.0);
        assert_eq!(s.token_goodput, 5.0); // 10 good tokens over 2 s
        assert_eq!(s.pass_rates[0].pass_rate, 0.5); // TTFT: two of four
        assert_eq!(s.pass_rates[1].pass_rate, 0.75); // TPOT: three of four (the failure fails it)
        assert_eq!(s.binding.as_deref(), Some("ttft<=200ms"));
    }

    #[test]
    fn smoothed_goodput_by_hand() {
        // T0 = 100, τ = 10, U_ok = 100, U_max = 500.
        let sm = Smoothing { t0_ms: 100.0, tau_ms: 10.0, u_ok_ms: 100.0, u_max_ms: 500.0 };
        // on time: tokens at 50, 60, 70 → ρ = 100, 110, 120 → U = 120 − 100 − 20 = 0
        assert_eq!(sm.excess_delay([50.0, 60.0, 70.0]), Some(0.0));
        // a 300 ms stall after the first: 90, 400, 410 → ρ = 100, 400, 410 → U = 410 − 100 − 20 = 290
        assert_eq!(sm.excess_delay([90.0, 400.0, 410.0]), Some(290.0));
        // b(290) = 1 − (290 − 100)/400 = 0.525
        assert!((sm.benefit(290.0) - 0.525).abs() < 1e-12);
        let recs = vec![
            rec(50.0, 10.0, 3),
            {
                let mut r = rec(90.0, 0.0, 3);
                r.event_ms = vec![90.0, 400.0, 410.0];
                r
            },
            failed(),
        ];
        let slo = Slo::parse("ttft<=100ms,tpot<=10ms").unwrap();
        let s = evaluate(&slo, Some(sm), &recs, &[true; 3], 1.0, PercentileMethod::Linear);
        // Σ N·b = 3·1 + 3·0.525; Σ b / attempted = 1.525 / 3
        assert!((s.smoothed_goodput.unwrap() - 4.575).abs() < 1e-9);
        assert!((s.smoothed_attainment.unwrap() - 1.525 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn fluidity_by_hand() {
        // deadlines 100, 110, 120: the second arrives late at 115 → next deadline 125, met at 120
        assert_eq!(fluidity([90.0, 115.0, 120.0], 100.0, 10.0), Some(2.0 / 3.0));
        assert_eq!(fluidity(Vec::new(), 100.0, 10.0), None);
    }

    #[test]
    fn percentile_verdicts() {
        let slo = Slo::parse("p50(ttft)<=100ms").unwrap();
        // 40 requests all at 50 ms: clearly met
        let fast: Vec<_> = (0..40).map(|_| rec(50.0, 10.0, 2)).collect();
        let s = evaluate(&slo, None, &fast, &[true; 40], 1.0, PercentileMethod::Linear);
        assert_eq!(s.percentiles[0].verdict, SloVerdict::Met);
        // 40 at 500 ms: clearly missed
        let slow: Vec<_> = (0..40).map(|_| rec(500.0, 10.0, 2)).collect();
        let s = evaluate(&slo, None, &slow, &[true; 40], 1.0, PercentileMethod::Linear);
        assert_eq!(s.percentiles[0].verdict, SloVerdict::Missed);
        // 4 requests: too few to tell
        let s = evaluate(&slo, None, &fast[..4], &[true; 4], 1.0, PercentileMethod::Linear);
        assert_eq!(s.percentiles[0].verdict, SloVerdict::NotEnoughEvidence);
        // failures count as over the limit: 30 fast and 10 failed still meet p50, not p90
        let mut mixed: Vec<_> = (0..30).map(|_| rec(50.0, 10.0, 2)).collect();
        mixed.extend((0..10).map(|_| failed()));
        let slo = Slo::parse("p50(ttft)<=100ms,p90(ttft)<=100ms").unwrap();
        let s = evaluate(&slo, None, &mixed, &[true; 40], 1.0, PercentileMethod::Linear);
        assert_eq!(s.percentiles[0].verdict, SloVerdict::Met);
        assert_eq!(s.percentiles[1].verdict, SloVerdict::Missed);
        assert_eq!(s.percentiles[1].over, 10);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn times() -> impl Strategy<Value = Vec<f64>> {
            proptest::collection::vec(0.0f64..50.0, 1..30).prop_map(|gaps| {
                let mut t = 0.0;
                gaps.into_iter()
                    .map(|g| {
                        t += g;
                        t
                    })
                    .collect()
            })
        }

        fn with_times(t: &[f64]) -> RequestRecord {
            RequestRecord {
                sent_ms: Some(0.0),
                end_ms: t.last().copied(),
                event_ms: t.to_vec(),
                event_tokens: vec![1; t.len()],
                output_tokens: Some(t.len() as u64),
                ..Default::default()
            }
        }

        fn score(recs: &[RequestRecord]) -> (f64, f64) {
            let slo = Slo::parse("ttft<=100ms,tpot<=10ms").unwrap();
            let sm = Smoothing::from_slo(&slo);
            let s = evaluate(&slo, sm, recs, &vec![true; recs.len()], 1.0, PercentileMethod::Linear);
            (s.smoothed_goodput.unwrap(), s.smoothed_attainment.unwrap())
        }

        proptest! {
            #[test]
            fn delaying_a_token_never_raises_either(t in times(), k in 0usize..30, d in 0.0f64..500.0) {
                let k = k % t.len();
                let mut later = t.clone();
                for x in later.iter_mut().skip(k) { *x += d; }
                let (g0, a0) = score(&[with_times(&t)]);
                let (g1, a1) = score(&[with_times(&later)]);
                prop_assert!(g1 <= g0 + 1e-9 && a1 <= a0 + 1e-9);
            }

            #[test]
            fn delivering_early_never_lowers_them(t in times(), k in 0usize..30, d in 0.0f64..50.0) {
                // move token k earlier, never before token k − 1
                let k = k % t.len();
                let mut early = t.clone();
                let floor = if k == 0 { 0.0 } else { t[k - 1] };
                early[k] = (t[k] - d).max(floor);
                let (g0, a0) = score(&[with_times(&t)]);
                let (g1, a1) = score(&[with_times(&early)]);
                prop_assert!(g1 >= g0 - 1e-9 && a1 >= a0 - 1e-9);
            }

            #[test]
            fn dropping_a_request_never_raises_attainment(ts in proptest::collection::vec(times(), 1..8)) {
                let recs: Vec<_> = ts.iter().map(|t| with_times(t)).collect();
                let (_, a0) = score(&recs);
                let mut dropped = recs.clone();
                let last = dropped.len() - 1;
                dropped[last] = failed();
                let (_, a1) = score(&dropped);
                prop_assert!(a1 <= a0 + 1e-9);
            }
        }
    }
}
