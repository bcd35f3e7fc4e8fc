//! Comparing result documents (`goodput compare`, `goodput check`): pure logic over [`Run`]s.
//!
//! - [`fingerprint`]: what a run's workload was (planned and received lengths, arrivals, warm-up,
//!   ignore_eos, tokenizer, API); [`Fingerprint::differences`] names every field that differs;
//! - [`Subject`]: one file's runs (several runs of one workload are repeats: latencies pooled,
//!   throughputs averaged with their run-to-run spread);
//! - [`compare`]: the main metrics' deltas (absolute and relative) with a 95% interval of the
//!   difference and whether it excludes 0 ([`Significance`]);
//! - [`parse_bounds`], [`check`]: `--max-regress` bounds and the violations.
//!
//! What they produce is the document's (`goodput_results::comparison`). Every rule is spelled
//! out in `docs/metrics.md`, "Comparing runs".

use std::collections::BTreeMap;

use goodput_metrics::summary::measurement_window;
use goodput_metrics::{Distribution, RequestMetrics, Summary};
use goodput_results::comparison::{
    Bound, BoundCheck, BoundError, Comparison, FieldValue, Fingerprint, Latency, Limit, Method, Metric, MetricDelta,
    Significance, Stat,
};
use goodput_results::{ResultDoc, ResultError, Run, summary_options};
use serde::Serialize;

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2000;
/// The bootstrap's seed (fixed: the same files always give the same intervals).
pub const SEED: u64 = 0x9e37_79b9_7f4a_7c15;
/// Why a comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{0}")]
    Result(#[from] ResultError),
    #[error("{path} holds no runs")]
    NoRuns { path: String },
    #[error("{path} holds runs of different workloads (a sweep or capacity search?): {reasons}")]
    MixedRuns { path: String, reasons: String },
    #[error("{path}: {metric} is not available ({why})")]
    Missing { path: String, metric: String, why: String },
}

/// A field as text: a JSON string bare, anything else as compact JSON.
fn json<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => String::new(),
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut n, mut s) = (0usize, 0.0);
    for x in xs {
        n += 1;
        s += x;
    }
    (n > 0).then(|| s / n as f64)
}

/// The fingerprint of `run`: from its plan, and from its measured successful records (mean
/// input tokens sent, output tokens requested, output tokens received).
pub fn fingerprint(run: &Run) -> Fingerprint {
    let p = &run.plan;
    let spec = &p.workload.spec;
    let mut f = BTreeMap::new();
    let mut exact = |k: &str, v: String| {
        f.insert(k.to_string(), FieldValue::Exact(v));
    };
    exact("api", p.api.map_or_else(String::new, |a| a.name().to_string()));
    exact("ignore_eos", p.ignore_eos.to_string());
    exact("tokenizer", p.workload.tokenizer.clone());
    exact("dataset", json(&spec.source));
    exact("input lengths (planned)", json(&spec.input_tokens));
    exact("output lengths (planned)", json(&spec.output_tokens));
    exact("shared prefixes", format!("{} groups of {} tokens", spec.prefix_groups, spec.prefix_tokens));
    exact("turns", json(&spec.turns));
    exact("think time", json(&p.load.think_time));
    exact("profile", json(&p.load.profile));
    exact("arrivals", json(run.load.as_ref().unwrap_or(&p.load.load)));
    exact("warm-up", json(&p.load.warmup));
    exact("cool-down", json(&p.load.cooldown));
    if let Some(FieldValue::Exact(s)) = f.get("api")
        && s.is_empty()
    {
        f.insert("api".into(), FieldValue::Absent);
    }
    let ok: Vec<_> = measured(run).filter(|r| r.is_success()).collect();
    let approx = |v: Option<f64>| v.map_or(FieldValue::Absent, FieldValue::Approx);
    f.insert(
        "input tokens sent (mean)".into(),
        approx(mean(ok.iter().filter_map(|r| r.input_tokens).map(|n| n as f64))),
    );
    f.insert(
        "output tokens requested (mean)".into(),
        approx(mean(ok.iter().filter_map(|r| r.requested_output_tokens).map(|n| n as f64))),
    );
    f.insert(
        "output tokens received (mean)".into(),
        approx(mean(ok.iter().filter_map(|r| r.output_tokens).map(|n| n as f64))),
    );
    Fingerprint { fields: f }
}

/// The records of `run` inside its measurement window.
fn measured(run: &Run) -> impl Iterator<Item = &goodput_metrics::RequestRecord> {
    let load = run.load.clone().unwrap_or_else(|| run.plan.load.load.clone());
    let opts = summary_options(&run.plan, &load);
    let (_, mask) = measurement_window(&run.requests, &opts);
    run.requests.iter().zip(mask).filter(|(_, m)| *m).map(|(r, _)| r)
}

fn stat_of(d: &Distribution, s: Stat) -> Option<f64> {
    match s {
        Stat::Mean => d.mean,
        Stat::P50 => d.p50,
        Stat::P90 => d.p90,
        Stat::P99 => d.p99,
    }
}

fn stat_ci(d: &Distribution, s: Stat) -> Option<[f64; 2]> {
    let ci = match s {
        Stat::Mean => None,
        Stat::P50 => d.p50_ci,
        Stat::P90 => d.p90_ci,
        Stat::P99 => d.p99_ci,
    }?;
    Some([ci[0]?, ci[1]?])
}

fn dist(s: &Summary, l: Latency) -> Option<&Distribution> {
    Some(match l {
        Latency::Ttft => &s.ttft_ms,
        Latency::Tpot => &s.tpot_ms,
        Latency::Itl => &s.itl_ms,
        Latency::E2e => &s.e2e_ms,
        Latency::Ttfo => &s.reasoning.as_ref()?.ttfo_ms,
    })
}

/// The value of `m` in a summary (`None`: undefined, or no SLO for attainment and goodput).
pub fn value(s: &Summary, m: Metric) -> Option<f64> {
    match m {
        Metric::Latency(st, l) => stat_of(dist(s, l)?, st),
        Metric::RequestThroughput => Some(s.request_throughput),
        Metric::OutputThroughput => Some(s.output_throughput),
        Metric::Attainment => s.slo.as_ref().map(|g| g.attainment),
        Metric::Goodput => s.slo.as_ref().map(|g| g.request_goodput),
        Metric::TokenGoodput => s.slo.as_ref().map(|g| g.token_goodput),
    }
}

/// One side of a comparison: a file's runs of one workload.
#[derive(Clone, Debug)]
pub struct Subject {
    /// The file's name, as the user gave it.
    pub label: String,
    /// The summary over every run's records (a single run's own summary).
    pub summary: Summary,
    /// Each run's summary (throughputs' run-to-run spread).
    pub per_run: Vec<Summary>,
    pub fingerprint: Fingerprint,
    /// Per-request TTFT, TPOT and E2E (ms) of the measured successful requests, every run's.
    pub samples: BTreeMap<Latency, Vec<f64>>,
    /// What makes this side's numbers less trustworthy: the client fell behind, or the embedded
    /// engine started iterations late (host CPU busy). Within-run significance cannot see these.
    pub cautions: Vec<String>,
}

/// The summary of several runs of one workload: latencies and attainment over every run's
/// records ([`Run::merge`]), throughputs and goodputs the mean of the runs' (the merge would add
/// them up, as for shards of one run).
fn repeats(runs: &[Run]) -> Result<Summary, ResultError> {
    let mut s = Run::merge(runs)?.summary;
    let k = runs.len() as f64;
    let avg = |f: &dyn Fn(&Summary) -> f64| runs.iter().map(|r| f(&r.summary)).sum::<f64>() / k;
    s.request_throughput = avg(&|s| s.request_throughput);
    s.input_throughput = avg(&|s| s.input_throughput);
    s.output_throughput = avg(&|s| s.output_throughput);
    s.total_throughput = avg(&|s| s.total_throughput);
    if let Some(g) = &mut s.slo {
        g.request_goodput = avg(&|s| s.slo.as_ref().map_or(0.0, |g| g.request_goodput));
        g.token_goodput = avg(&|s| s.slo.as_ref().map_or(0.0, |g| g.token_goodput));
    }
    Ok(s)
}

/// The cautions of one file's runs (see [`Subject::cautions`]).
fn cautions(label: &str, runs: &[Run]) -> Vec<String> {
    let mut out = Vec::new();
    if runs.iter().any(|r| r.summary.verdict != goodput_metrics::ClientVerdict::Ok) {
        out.push(format!("{label}: the client could not keep up with its schedule (client_bound)"));
    }
    let late: u64 = runs
        .iter()
        .filter(|r| matches!(r.target, goodput_results::Target::Embedded { .. }))
        .filter_map(|r| r.engine_stats.as_ref().map(|e| e.late_steps))
        .sum();
    if late > 0 {
        out.push(format!(
            "{label}: the embedded engine started {late} iterations more than 5 ms late (host CPU busy): its latencies include the host's delays"
        ));
    }
    out
}

impl Subject {
    /// Reads `path` and takes its runs.
    pub fn read(path: &std::path::Path) -> Result<Self, CompareError> {
        let doc = ResultDoc::read(path)?;
        Self::of(&path.display().to_string(), &doc)
    }

    /// `doc`'s runs: all must share one fingerprint; several are merged ([`Run::merge`]).
    pub fn of(label: &str, doc: &ResultDoc) -> Result<Self, CompareError> {
        let first = doc.runs.first().ok_or_else(|| CompareError::NoRuns { path: label.into() })?;
        let print = fingerprint(first);
        for r in &doc.runs[1..] {
            let d = print.differences(&fingerprint(r));
            if !d.is_empty() {
                let reasons = d.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
                return Err(CompareError::MixedRuns { path: label.into(), reasons });
            }
        }
        let summary = if doc.runs.len() == 1 { first.summary.clone() } else { repeats(&doc.runs)? };
        let mut samples: BTreeMap<Latency, Vec<f64>> = BTreeMap::new();
        for run in &doc.runs {
            for r in measured(run).filter(|r| r.is_success()) {
                let m = RequestMetrics::of(r);
                let ttfo = m.ttfo.filter(|_| first.summary.reasoning.is_some());
                for (l, v) in
                    [(Latency::Ttft, m.ttft), (Latency::Tpot, m.tpot), (Latency::E2e, m.e2e), (Latency::Ttfo, ttfo)]
                {
                    if let Some(v) = v {
                        samples.entry(l).or_default().push(v);
                    }
                }
            }
        }
        Ok(Subject {
            label: label.into(),
            summary,
            per_run: doc.runs.iter().map(|r| r.summary.clone()).collect(),
            fingerprint: print,
            samples,
            cautions: cautions(label, &doc.runs),
        })
    }
}

/// `other` against `base`, every metric of [`Metric::all`].
pub fn compare(base: &Subject, other: &Subject) -> Comparison {
    let boot = bootstrap(base, other);
    // TTFO is compared where a run reasoned (elsewhere it is TTFT again)
    let reasoned = base.summary.reasoning.is_some() || other.summary.reasoning.is_some();
    let metrics = Metric::all()
        .into_iter()
        .filter(|m| reasoned || !matches!(m, Metric::Latency(_, Latency::Ttfo)))
        .map(|m| delta(base, other, &boot, m))
        .collect();
    Comparison {
        base: base.label.clone(),
        other: other.label.clone(),
        differences: base.fingerprint.differences(&other.fingerprint),
        cautions: base.cautions.iter().chain(&other.cautions).cloned().collect(),
        metrics,
    }
}

/// The comparison data `compare` prints (and a report would draw): each later subject against
/// the first.
pub fn compare_all(subjects: &[Subject]) -> Vec<Comparison> {
    match subjects.split_first() {
        Some((base, rest)) => rest.iter().map(|o| compare(base, o)).collect(),
        None => Vec::new(),
    }
}

/// The percentiles whose difference is bootstrapped, in [`Stat`] order.
const BOOTSTRAPPED: [(Stat, f64); 3] = [(Stat::P50, 0.5), (Stat::P90, 0.9), (Stat::P99, 0.99)];

/// Bootstrap intervals of p50, p90 and p99 of TTFT, TPOT and E2E (one set of resamples each).
type Boot = BTreeMap<Latency, Vec<[f64; 2]>>;

fn bootstrap(a: &Subject, b: &Subject) -> Boot {
    let ps = BOOTSTRAPPED.map(|(_, p)| p);
    let mut out = Boot::new();
    for l in [Latency::Ttft, Latency::Tpot, Latency::E2e, Latency::Ttfo] {
        if let (Some(x), Some(y)) = (a.samples.get(&l), b.samples.get(&l))
            && x.len() >= 2
            && y.len() >= 2
        {
            out.insert(l, bootstrap_quantiles_diff(x, y, &ps, RESAMPLES, SEED));
        }
    }
    out
}

fn delta(a: &Subject, b: &Subject, boot: &Boot, m: Metric) -> MetricDelta {
    let base = value(&a.summary, m);
    let other = value(&b.summary, m);
    let delta = base.zip(other).map(|(x, y)| y - x);
    let relative = base.zip(delta).and_then(|(x, d)| (x != 0.0).then(|| d / x));
    let (ci, method) = if delta.is_none() { (None, Method::None) } else { interval(a, b, boot, m) };
    let significance = Significance::of(ci);
    let worse = delta.is_some_and(|d| if m.higher_is_worse() { d > 0.0 } else { d < 0.0 });
    MetricDelta {
        metric: m,
        unit: m.unit().into(),
        base,
        other,
        delta,
        relative,
        ci,
        method,
        significance,
        regression: worse && significance == Significance::Significant,
    }
}

fn interval(a: &Subject, b: &Subject, boot: &Boot, m: Metric) -> (Option<[f64; 2]>, Method) {
    match m {
        Metric::Latency(Stat::Mean, l) => {
            let (da, db) = (dist(&a.summary, l), dist(&b.summary, l));
            let ci = (|| {
                let (da, db) = (da?, db?);
                let (ma, mb, sa, sb) = (da.mean?, db.mean?, da.std?, db.std?);
                if da.n < 2 || db.n < 2 {
                    return None;
                }
                let se = (sa * sa / da.n as f64 + sb * sb / db.n as f64).sqrt();
                let d = mb - ma;
                Some([d - 1.96 * se, d + 1.96 * se])
            })();
            (ci, Method::Normal)
        }
        Metric::Latency(s, Latency::Itl) => {
            let ci = stat_ci(&a.summary.itl_ms, s)
                .zip(stat_ci(&b.summary.itl_ms, s))
                .map(|([alo, ahi], [blo, bhi])| [blo - ahi, bhi - alo]);
            (ci, Method::OrderStatistics)
        }
        Metric::Latency(s, l) => {
            let k = BOOTSTRAPPED.iter().position(|(st, _)| *st == s);
            (k.and_then(|k| boot.get(&l).map(|v| v[k])), Method::Bootstrap)
        }
        Metric::Attainment => {
            let ci = a.summary.slo.as_ref().zip(b.summary.slo.as_ref()).and_then(|(x, y)| {
                if x.attempted == 0 || y.attempted == 0 {
                    return None;
                }
                let (pa, pb) = (x.attainment, y.attainment);
                let se = (pa * (1.0 - pa) / x.attempted as f64 + pb * (1.0 - pb) / y.attempted as f64).sqrt();
                Some([pb - pa - 1.96 * se, pb - pa + 1.96 * se])
            });
            (ci, Method::Proportions)
        }
        _ => (run_to_run(a, b, m), Method::RunToRun),
    }
}

/// Student's t at 97.5% for `df` degrees of freedom (1..=30; beyond, the normal's 1.96).
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    if df == 0 { f64::INFINITY } else { T.get(df - 1).copied().unwrap_or(1.96) }
}

/// The interval of a throughput's difference from the spread between runs: the variance pooled
/// over the sides with two runs or more (each run one sample), `t × s × √(1/na + 1/nb)`. `None`
/// when neither side has two runs.
fn run_to_run(a: &Subject, b: &Subject, m: Metric) -> Option<[f64; 2]> {
    let va: Vec<f64> = a.per_run.iter().filter_map(|s| value(s, m)).collect();
    let vb: Vec<f64> = b.per_run.iter().filter_map(|s| value(s, m)).collect();
    if va.is_empty() || vb.is_empty() {
        return None;
    }
    let (mut ss, mut df) = (0.0, 0usize);
    for v in [&va, &vb] {
        if v.len() >= 2 {
            let mu = v.iter().sum::<f64>() / v.len() as f64;
            ss += v.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>();
            df += v.len() - 1;
        }
    }
    if df == 0 {
        return None;
    }
    let s = (ss / df as f64).sqrt();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let d = mean(&vb) - mean(&va);
    let half = t975(df) * s * (1.0 / va.len() as f64 + 1.0 / vb.len() as f64).sqrt();
    Some([d - half, d + half])
}

/// SplitMix64: a small, fixed, portable generator (the intervals must not change with a crate's
/// version).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-40 for our sizes).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}

/// The `ps` quantiles (linear interpolation between closest ranks) of one resample of `sorted`,
/// drawn with replacement by counting how often each rank is drawn (no sort per resample: O(n)).
fn resampled_quantiles(sorted: &[f64], ps: &[f64], counts: &mut [u32], rng: &mut SplitMix) -> Vec<f64> {
    let n = sorted.len();
    counts.iter_mut().for_each(|c| *c = 0);
    for _ in 0..n {
        counts[rng.below(n)] += 1;
    }
    // the value at expanded rank r: the first index whose cumulative count exceeds r
    let mut ranks: Vec<u64> = ps
        .iter()
        .flat_map(|&p| {
            let h = (n - 1) as f64 * p;
            [h.floor() as u64, h.ceil() as u64]
        })
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut at: Vec<f64> = Vec::with_capacity(ranks.len());
    let (mut acc, mut next) = (0u64, 0usize);
    for (i, &c) in counts.iter().enumerate() {
        acc += c as u64;
        while next < ranks.len() && acc > ranks[next] {
            at.push(sorted[i]);
            next += 1;
        }
        if next == ranks.len() {
            break;
        }
    }
    let value = |r: u64| at[ranks.binary_search(&r).expect("a listed rank")];
    ps.iter()
        .map(|&p| {
            let h = (n - 1) as f64 * p;
            let (lo, hi) = (h.floor() as u64, h.ceil() as u64);
            let (a, b) = (value(lo), value(hi));
            a + (b - a) * (h - lo as f64)
        })
        .collect()
}

/// The 95% percentile-bootstrap intervals of `quantile_p(b) − quantile_p(a)` for each `p` of
/// `ps`: `resamples` pairs of resamples drawn with replacement from each side (every `p` from the
/// same resamples), from a generator seeded with `seed`.
pub fn bootstrap_quantiles_diff(a: &[f64], b: &[f64], ps: &[f64], resamples: usize, seed: u64) -> Vec<[f64; 2]> {
    let sort = |x: &[f64]| {
        let mut v = x.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    let (sa, sb) = (sort(a), sort(b));
    let mut ca = vec![0u32; sa.len()];
    let mut cb = vec![0u32; sb.len()];
    let mut rng = SplitMix(seed);
    let mut diffs: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); ps.len()];
    for _ in 0..resamples {
        let qb = resampled_quantiles(&sb, ps, &mut cb, &mut rng);
        let qa = resampled_quantiles(&sa, ps, &mut ca, &mut rng);
        for (k, d) in diffs.iter_mut().enumerate() {
            d.push(qb[k] - qa[k]);
        }
    }
    diffs
        .into_iter()
        .map(|mut d| {
            d.sort_by(f64::total_cmp);
            let q = |p: f64| {
                let h = (d.len() - 1) as f64 * p;
                let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
                d[lo] + (d[hi] - d[lo]) * (h - lo as f64)
            };
            [q(0.025), q(0.975)]
        })
        .collect()
}

/// [`bootstrap_quantiles_diff`] for one quantile.
pub fn bootstrap_quantile_diff(a: &[f64], b: &[f64], p: f64, resamples: usize, seed: u64) -> [f64; 2] {
    bootstrap_quantiles_diff(a, b, &[p], resamples, seed)[0]
}

/// Bounds separated by commas (`--max-regress`).
pub fn parse_bounds(text: &str, origin: &str) -> Result<Vec<Bound>, BoundError> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().map_err(|message| BoundError { origin: origin.into(), message }))
        .collect()
}

/// A bounds file: one or more bounds per line (commas allowed), `#` starts a comment.
pub fn parse_bounds_file(text: &str, path: &str) -> Result<Vec<Bound>, BoundError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        out.extend(parse_bounds(line, &format!("{path}:{}", i + 1))?);
    }
    Ok(out)
}

/// Checks `bounds` against a comparison. A bound on a metric either side lacks is an error
/// (`CompareError::Missing`). With `require_significant`, a bound fails only when its regression
/// is significant; one whose significance is not available is judged on its value alone.
pub fn check(cmp: &Comparison, bounds: &[Bound], require_significant: bool) -> Result<Vec<BoundCheck>, CompareError> {
    let mut out = Vec::new();
    for &bound in bounds {
        let m = bound.metric;
        let d = cmp.get(m).cloned().unwrap_or_else(|| MetricDelta {
            metric: m,
            unit: m.unit().into(),
            base: None,
            other: None,
            delta: None,
            relative: None,
            ci: None,
            method: Method::None,
            significance: Significance::NotAvailable,
            regression: false,
        });
        let why = if matches!(m, Metric::Attainment | Metric::Goodput | Metric::TokenGoodput) {
            "the run has no SLO".to_string()
        } else {
            "no samples".to_string()
        };
        let (Some(base), Some(delta)) = (d.base, d.delta) else {
            let path = if d.base.is_none() { &cmp.base } else { &cmp.other };
            return Err(CompareError::Missing { path: path.clone(), metric: m.name(), why });
        };
        let worse = if m.higher_is_worse() { delta } else { -delta };
        let regressed_by = match bound.limit {
            Limit::Percent(_) if base == 0.0 => {
                if worse > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            }
            Limit::Percent(_) => worse / base.abs() * 100.0,
            Limit::Points(_) => worse * 100.0,
            Limit::Absolute(_) => worse,
        };
        let limit = match bound.limit {
            Limit::Percent(x) | Limit::Points(x) | Limit::Absolute(x) => x,
        };
        let exceeded = regressed_by > limit + 1e-9;
        let violated = exceeded && (!require_significant || d.significance != Significance::NotSignificant);
        out.push(BoundCheck { bound, delta: d, regressed_by, violated });
    }
    Ok(out)
}
