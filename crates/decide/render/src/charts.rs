//! The charts of a report, computed from the result document: distributions (CDFs, histograms),
//! the run over time, ITL by token position, engine statistics, sweeps and capacity searches,
//! plans. Each reads every sample and draws at most [`MAX_POINTS`] points per series.

use goodput_metrics::RequestMetrics;
use goodput_metrics::request::itl_samples;
use goodput_results::planning::PlanReport;
use goodput_results::{CapacityReport, Run};

use crate::svg::{Chart, MAX_POINTS, Mark, Series, downsample};

/// Bins of a histogram.
const BINS: usize = 40;
/// Buckets of a time series.
const TIME_BUCKETS: usize = 400;

/// The latency metrics drawn as distributions: (id, label).
pub const METRICS: [(&str, &str); 5] =
    [("ttft", "TTFT"), ("ttft-sched", "TTFT from schedule"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")];

/// Samples of one metric over a run's successful requests, sorted (ITL: each token's gap, a
/// gap carried by an event of `m` tokens counted `m` times, as in the summary).
pub fn samples(run: &Run, metric: &str) -> Vec<f64> {
    let ok = run.requests.iter().filter(|r| r.is_success());
    let mut s: Vec<f64> = if metric == "itl" {
        let mut v = Vec::with_capacity(run.requests.iter().map(|r| r.output_tokens.unwrap_or(0) as usize).sum());
        for r in ok {
            for (x, m) in itl_samples(r) {
                if x.is_finite() {
                    v.extend(std::iter::repeat_n(x, m as usize));
                }
            }
        }
        v
    } else {
        ok.filter_map(|r| {
            let m = RequestMetrics::of(r);
            match metric {
                "ttft" => m.ttft,
                "ttft-sched" => m.ttft_sched,
                "tpot" => m.tpot,
                "e2e" => m.e2e,
                _ => None,
            }
        })
        .filter(|v| v.is_finite())
        .collect()
    };
    sort(&mut s);
    s
}

/// Sorts finite floats: a radix sort on their bits for large sets (a 100k-request run has
/// millions of ITL samples), else the standard sort.
pub fn sort(v: &mut [f64]) {
    if v.len() < 1 << 16 {
        v.sort_unstable_by(f64::total_cmp);
        return;
    }
    // order-preserving map of an f64 to a u64: flip every bit of a negative, the sign of a positive
    let key = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 { !b } else { b | (1 << 63) }
    };
    let unkey = |k: u64| f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k });
    let mut a: Vec<u64> = v.iter().map(|&x| key(x)).collect();
    let mut b = vec![0u64; a.len()];
    const BITS: u32 = 11;
    const MASK: u64 = (1 << BITS) - 1;
    let mut counts = vec![0usize; 1 << BITS];
    for pass in 0..64u32.div_ceil(BITS) {
        let shift = pass * BITS;
        counts.iter_mut().for_each(|c| *c = 0);
        for &k in &a {
            counts[((k >> shift) & MASK) as usize] += 1;
        }
        if counts.contains(&a.len()) {
            continue; // every key has this digit: nothing to move
        }
        let mut at = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = at;
            at += n;
        }
        for &k in &a {
            let d = ((k >> shift) & MASK) as usize;
            b[counts[d]] = k;
            counts[d] += 1;
        }
        std::mem::swap(&mut a, &mut b);
    }
    for (x, k) in v.iter_mut().zip(a) {
        *x = unkey(k);
    }
}

/// The empirical CDF of sorted samples, at most `max` points (each an exact point of the full
/// CDF: the first, the last, and evenly spaced ones between).
pub fn cdf(s: &[f64], max: usize) -> Vec<(f64, f64)> {
    let n = s.len();
    let point = |i: usize| (s[i], (i + 1) as f64 / n as f64);
    if n <= max || max < 2 {
        return (0..n).map(point).collect();
    }
    // the same ranks `downsample` keeps, without listing every index
    (0..max).map(|k| point(k * (n - 1) / (max - 1))).collect()
}

/// A histogram of sorted samples over `[min, p99.5]` (the rest in the last bin, so a far tail
/// does not squash the body): bin centres and counts.
pub fn histogram(s: &[f64]) -> Vec<(f64, f64)> {
    if s.is_empty() {
        return Vec::new();
    }
    let lo = s[0];
    let hi = s[((s.len() - 1) as f64 * 0.995) as usize].max(lo + 1e-9);
    let width = (hi - lo) / BINS as f64;
    let mut counts = vec![0u64; BINS];
    for &x in s {
        counts[(((x - lo) / width) as usize).min(BINS - 1)] += 1;
    }
    counts.iter().enumerate().map(|(i, &c)| (lo + (i as f64 + 0.5) * width, c as f64)).collect()
}

/// The CDF chart of one metric, one series per run (samples sorted, as [`samples`] gives them).
pub fn cdf_chart(id: &str, label: &str, runs: &[(String, Vec<f64>)]) -> Chart {
    let per = (MAX_POINTS / runs.len().max(1)).max(200);
    let mut c = Chart::new(format!("chart-cdf-{id}"), format!("{label}: CDF"), &format!("{label} (ms)"), "share");
    for (name, s) in runs {
        c = c.with(Series::new(name.clone(), Mark::Step, cdf(s, per)));
    }
    c
}

/// The histogram chart of one metric (one run).
pub fn histogram_chart(id: &str, label: &str, s: &[f64]) -> Chart {
    Chart::new(format!("chart-hist-{id}"), format!("{label}: histogram"), &format!("{label} (ms)"), "samples")
        .with(Series::new(label, Mark::Bars, histogram(s)))
}

/// Bucketed time axis of a run: `(t0_ms, width_ms, buckets)` over its sends and ends.
fn time_axis(run: &Run) -> Option<(f64, f64, usize)> {
    let t0 = run.requests.iter().map(|r| r.sent_ms.unwrap_or(r.scheduled_ms)).fold(f64::INFINITY, f64::min);
    let t1 = run
        .requests
        .iter()
        .filter_map(|r| r.end_ms.or(r.last_event_ms()).or(r.sent_ms))
        .fold(f64::NEG_INFINITY, f64::max);
    if !(t0.is_finite() && t1.is_finite()) || t1 <= t0 {
        return None;
    }
    // whole seconds, or at least 20 buckets for a short run, at most TIME_BUCKETS for a long one
    let span = t1 - t0;
    let width = (span / TIME_BUCKETS as f64).max(1000.0_f64.min(span / 20.0));
    let n = (((t1 - t0) / width).ceil() as usize).clamp(1, TIME_BUCKETS.max(1));
    Some((t0, width, n))
}

/// Throughput over time (output tokens/s and completed requests/s), in-flight count, and TTFT
/// (mean and max per bucket) against when the first token came.
pub fn time_charts(run: &Run, suffix: &str) -> Vec<Chart> {
    let Some((t0, width, n)) = time_axis(run) else {
        return vec![
            Chart::new(format!("chart-throughput{suffix}"), "Throughput over time", "time (s)", "tokens/s"),
            Chart::new(format!("chart-inflight{suffix}"), "Requests in flight", "time (s)", "requests"),
            Chart::new(format!("chart-ttft-time{suffix}"), "TTFT over time", "time (s)", "TTFT (ms)"),
        ];
    };
    let bucket = |t: f64| (((t - t0) / width).max(0.0) as usize).min(n - 1);
    let x = |i: usize| (t0 + (i as f64 + 0.5) * width) / 1000.0;
    let mut tokens = vec![0f64; n];
    let mut done = vec![0f64; n];
    let mut ttft = vec![(0f64, 0u64, f64::NEG_INFINITY); n];
    // in flight: +1 at send, −1 at end, swept at each bucket's end
    let mut edges: Vec<(f64, i64)> = Vec::with_capacity(run.requests.len() * 2);
    for r in &run.requests {
        for (&t, &m) in r.event_ms.iter().zip(r.event_tokens.iter().chain(std::iter::repeat(&1))) {
            tokens[bucket(t)] += f64::from(m);
        }
        if let (Some(s), Some(e)) = (r.sent_ms, r.end_ms.or(r.last_event_ms())) {
            edges.push((s, 1));
            edges.push((e, -1));
            if r.is_success() {
                done[bucket(e)] += 1.0;
            }
        }
        if let (Some(s), Some(c1)) = (r.service_start_ms(), r.first_event_ms())
            && r.is_success()
        {
            let b = &mut ttft[bucket(c1)];
            b.0 += c1 - s;
            b.1 += 1;
            b.2 = b.2.max(c1 - s);
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let per_s = 1000.0 / width;
    let mut inflight = Vec::with_capacity(n);
    let (mut k, mut level) = (0usize, 0i64);
    for i in 0..n {
        let end = t0 + (i as f64 + 1.0) * width;
        while k < edges.len() && edges[k].0 <= end {
            level += edges[k].1;
            k += 1;
        }
        inflight.push((x(i), level as f64));
    }
    let tput: Vec<(f64, f64)> = tokens.iter().enumerate().map(|(i, t)| (x(i), t * per_s)).collect();
    let reqs: Vec<(f64, f64)> = done.iter().enumerate().map(|(i, d)| (x(i), d * per_s)).collect();
    let mean: Vec<(f64, f64)> =
        ttft.iter().enumerate().filter(|b| b.1.1 > 0).map(|(i, b)| (x(i), b.0 / b.1 as f64)).collect();
    let max: Vec<(f64, f64)> = ttft.iter().enumerate().filter(|b| b.1.1 > 0).map(|(i, b)| (x(i), b.2)).collect();
    vec![
        Chart::new(format!("chart-throughput{suffix}"), "Output throughput over time", "time (s)", "tokens/s")
            .with(Series::new("output tokens/s", Mark::Line, tput)),
        Chart::new(format!("chart-requests{suffix}"), "Completed requests over time", "time (s)", "requests/s")
            .with(Series::new("completed req/s", Mark::Line, reqs)),
        Chart::new(format!("chart-inflight{suffix}"), "Requests in flight", "time (s)", "requests").with(Series::new(
            "in flight",
            Mark::Step,
            inflight,
        )),
        Chart::new(format!("chart-ttft-time{suffix}"), "TTFT over time (by first token)", "time (s)", "TTFT (ms)")
            .with(Series::new("mean", Mark::Line, mean))
            .with(Series::new("max", Mark::Line, max)),
    ]
}

/// ITL by output token position: the mean and the max over requests at each position (positions
/// grouped when there are more than [`MAX_POINTS`]), so stalls at a position show.
pub fn itl_position_chart(run: &Run, suffix: &str) -> Chart {
    let mut acc: Vec<(f64, u64, f64)> = Vec::new();
    for r in run.requests.iter().filter(|r| r.is_success()) {
        // position of a token: tokens received before it (the first token is position 0)
        let mut pos = r.event_tokens.first().copied().unwrap_or(1) as usize;
        for (v, m) in itl_samples(r) {
            for _ in 0..m {
                if acc.len() <= pos {
                    acc.resize(pos + 1, (0.0, 0, f64::NEG_INFINITY));
                }
                let a = &mut acc[pos];
                a.0 += v;
                a.1 += 1;
                a.2 = a.2.max(v);
                pos += 1;
            }
        }
    }
    let group = acc.len().div_ceil(MAX_POINTS).max(1);
    let mut mean = Vec::new();
    let mut max = Vec::new();
    for (g, chunk) in acc.chunks(group).enumerate() {
        let (s, n, m) = chunk.iter().fold((0.0, 0u64, f64::NEG_INFINITY), |a, b| (a.0 + b.0, a.1 + b.1, a.2.max(b.2)));
        if n > 0 {
            let x = (g * group) as f64 + (chunk.len() as f64 - 1.0) / 2.0;
            mean.push((x, s / n as f64));
            max.push((x, m));
        }
    }
    Chart::new(format!("chart-itl-position{suffix}"), "ITL by output token position", "token position", "ITL (ms)")
        .with(Series::new("mean", Mark::Line, mean))
        .with(Series::new("max", Mark::Line, max))
}

/// Multi-turn and agentic sessions: TTFT by call index (mean and p90), from the summary: a later
/// call resends a longer context, which a prefix cache serves.
pub fn call_chart(run: &Run, suffix: &str) -> Option<Chart> {
    let s = run.summary.sessions.as_ref().filter(|s| s.ttft_by_call.len() > 1)?;
    let pick = |f: fn(&goodput_metrics::sessions::CallTtft) -> Option<f64>| -> Vec<(f64, f64)> {
        s.ttft_by_call.iter().filter_map(|c| Some((c.call as f64, f(c)?))).collect()
    };
    Some(
        Chart::new(
            format!("chart-ttft-call{suffix}"),
            "TTFT by call index",
            "call (0 = a session's first)",
            "TTFT (ms)",
        )
        .with(Series::new("mean", Mark::Line, pick(|c| c.mean)))
        .with(Series::new("p90", Mark::Line, pick(|c| c.p90))),
    )
}

/// The engine's state over time (`series`: `[t_s, running, waiting, kv_utilization,
/// kv_used_share, …counters]`, see [`mechanism_charts`]): batch and queue, KV usage, and the
/// mechanisms' rates.
pub fn engine_charts(run: &Run, suffix: &str) -> Vec<Chart> {
    let Some(s) = run.engine_stats.as_ref() else { return Vec::new() };
    let rows = downsample(&s.series, MAX_POINTS);
    let col = |i: usize, scale: f64| -> Vec<(f64, f64)> {
        rows.iter().filter(|r| r.len() > i).map(|r| (r[0], r[i] * scale)).collect()
    };
    let mut out = vec![
        Chart::new(format!("chart-engine-batch{suffix}"), "Engine: batch and queue", "time (s)", "sequences")
            .with(Series::new("running", Mark::Step, col(1, 1.0)))
            .with(Series::new("waiting", Mark::Step, col(2, 1.0))),
        Chart::new(format!("chart-engine-kv{suffix}"), "Engine: KV cache", "time (s)", "%")
            .with(Series::new("KV blocks used", Mark::Step, col(3, 100.0)))
            .with(Series::new("reserved slots holding tokens", Mark::Step, col(4, 100.0))),
    ];
    out.extend(mechanism_charts(&rows, suffix));
    // documents written before a column existed lack it: no empty series
    for c in &mut out {
        c.series.retain(|s| !s.points.is_empty());
    }
    out
}

/// Columns of the engine's cumulative counters in a `series` row.
const PREEMPTIONS: usize = 5;
const PREFIX_QUERIED: usize = 6;
const PREFIX_HIT: usize = 7;
const SPEC_STEPS: usize = 8;
const SPEC_DRAFTED: usize = 9;
const SPEC_ACCEPTED: usize = 10;
const GENERATED: usize = 11;

/// Per interval between consecutive rows that both have column `num` (and `den`): the counters'
/// increases `(Δnum, Δden)` at the interval's midpoint, `den` defaulting to elapsed seconds.
/// Intervals of no time, or where `den` did not grow, are skipped (a ratio of nothing).
fn increments(rows: &[Vec<f64>], num: usize, den: Option<usize>) -> Vec<(f64, f64, f64)> {
    let col = den.unwrap_or(0);
    rows.windows(2)
        .filter(|w| w[0].len() > num.max(col) && w[1].len() > num.max(col))
        .filter_map(|w| {
            let dt = w[1][0] - w[0][0];
            let dn = w[1][num] - w[0][num];
            let dd = w[1][col] - w[0][col];
            (dt > 0.0 && dd > 0.0).then_some(((w[0][0] + w[1][0]) / 2.0, dn, dd))
        })
        .collect()
}

/// Whether counter `c` grew during the series (the mechanism was at work).
fn grew(rows: &[Vec<f64>], c: usize) -> bool {
    match (rows.first(), rows.last()) {
        (Some(a), Some(b)) if a.len() > c && b.len() > c => b[c] > a[c],
        _ => false,
    }
}

/// The mechanisms' counters as rates over time, each chart only when its counter moved:
/// generated tokens/s, preemptions/s, the prefix cache's hit rate (hit ÷ queried tokens), and
/// speculative decoding's acceptance rate (accepted ÷ drafted tokens) with the tokens each
/// verified step produced (1 + accepted ÷ verified steps).
pub fn mechanism_charts(rows: &[Vec<f64>], suffix: &str) -> Vec<Chart> {
    let rate = |num: usize, scale: f64| -> Vec<(f64, f64)> {
        increments(rows, num, None).into_iter().map(|(t, n, d)| (t, n / d * scale)).collect()
    };
    let ratio = |num: usize, den: usize, scale: f64, plus: f64| -> Vec<(f64, f64)> {
        increments(rows, num, Some(den)).into_iter().map(|(t, n, d)| (t, plus + n / d * scale)).collect()
    };
    let mut out = Vec::new();
    if grew(rows, GENERATED) {
        out.push(
            Chart::new(format!("chart-engine-tokens{suffix}"), "Engine: generated tokens", "time (s)", "tokens/s")
                .with(Series::new("generated tokens/s", Mark::Line, rate(GENERATED, 1.0))),
        );
    }
    if grew(rows, PREEMPTIONS) {
        out.push(
            Chart::new(format!("chart-engine-preemptions{suffix}"), "Engine: preemptions", "time (s)", "preemptions/s")
                .with(Series::new("preemptions/s", Mark::Line, rate(PREEMPTIONS, 1.0))),
        );
    }
    if grew(rows, PREFIX_QUERIED) {
        out.push(
            Chart::new(format!("chart-engine-prefix{suffix}"), "Engine: prefix cache hit rate", "time (s)", "%")
                .with(Series::new("hit ÷ queried tokens", Mark::Line, ratio(PREFIX_HIT, PREFIX_QUERIED, 100.0, 0.0))),
        );
    }
    if grew(rows, SPEC_DRAFTED) {
        out.push(
            Chart::new(
                format!("chart-engine-spec{suffix}"),
                "Engine: speculative decoding acceptance",
                "time (s)",
                "% accepted",
            )
            .with(Series::new(
                "accepted ÷ drafted tokens",
                Mark::Line,
                ratio(SPEC_ACCEPTED, SPEC_DRAFTED, 100.0, 0.0),
            )),
        );
        out.push(
            Chart::new(
                format!("chart-engine-spec-length{suffix}"),
                "Engine: tokens per verified step",
                "time (s)",
                "tokens",
            )
            .with(Series::new(
                "1 + accepted ÷ verified steps",
                Mark::Line,
                ratio(SPEC_ACCEPTED, SPEC_STEPS, 1.0, 1.0),
            )),
        );
    }
    out
}

/// Sweeps and capacity searches: goodput and attainment vs rate, p99 latency vs throughput.
pub fn rate_charts(runs: &[Run], capacity: Option<&CapacityReport>) -> Vec<Chart> {
    let mut goodput = Vec::new();
    let mut attain = Vec::new();
    match capacity {
        Some(c) => {
            for p in &c.curve {
                goodput.push((p.rate, p.request_goodput));
                attain.push((p.rate, p.attainment * 100.0));
            }
        }
        None => {
            for r in runs {
                if let Some(g) = &r.summary.slo {
                    let rate = r.summary.offered_rate.unwrap_or(r.summary.request_throughput);
                    goodput.push((rate, g.request_goodput));
                    attain.push((rate, g.attainment * 100.0));
                }
            }
        }
    }
    let by_x = |v: &mut Vec<(f64, f64)>| v.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_x(&mut goodput);
    by_x(&mut attain);
    let mut ttft = Vec::new();
    let mut tpot = Vec::new();
    let mut e2e = Vec::new();
    for r in runs {
        let s = &r.summary;
        let x = s.request_throughput;
        if let Some(v) = s.ttft_ms.p99 {
            ttft.push((x, v));
        }
        if let Some(v) = s.tpot_ms.p99 {
            tpot.push((x, v));
        }
        if let Some(v) = s.e2e_ms.p99 {
            e2e.push((x, v));
        }
    }
    for v in [&mut ttft, &mut tpot, &mut e2e] {
        by_x(v);
    }
    let mut out = Vec::new();
    if !goodput.is_empty() {
        let mut a =
            Chart::new("chart-attainment-rate", "SLO attainment vs rate", "request rate (req/s)", "attainment (%)")
                .with(Series::new("attainment", Mark::Line, attain.clone()))
                .with(Series::new("steps", Mark::Dots, attain));
        if let Some(c) = capacity {
            let t = c.attainment_target * 100.0;
            let (lo, hi) = (
                c.curve.iter().map(|p| p.rate).fold(f64::INFINITY, f64::min),
                c.curve.iter().map(|p| p.rate).fold(0.0, f64::max),
            );
            a = a.with(Series::new("target", Mark::Line, vec![(lo, t), (hi, t)]));
        }
        out.push(
            Chart::new("chart-goodput-rate", "Goodput vs rate", "request rate (req/s)", "good requests/s")
                .with(Series::new("goodput", Mark::Line, goodput.clone()))
                .with(Series::new("steps", Mark::Dots, goodput)),
        );
        out.push(a);
    }
    let mut lat = Chart::new("chart-p99-throughput", "p99 latency vs throughput", "throughput (req/s)", "p99 (ms)");
    for (name, v) in [("TTFT p99", ttft), ("TPOT p99", tpot), ("E2E p99", e2e)] {
        if !v.is_empty() {
            lat = lat.with(Series::new(name, Mark::Line, v));
        }
    }
    out.push(lat);
    out
}

/// A plan's candidates: cost per million output tokens vs p99 latency (TTFT p99 + TPOT p99), the
/// Pareto front apart.
pub fn plan_chart(p: &PlanReport) -> Chart {
    let point = |i: usize| {
        let c = &p.candidates[i];
        let name = format!("#{} {}", i + 1, crate::planning::name(c));
        Some((c.ttft_p99_ms? + c.tpot_p99_ms.unwrap_or(0.0), c.cost_per_m_output?, name))
    };
    let all: Vec<(f64, f64, String)> = (0..p.candidates.len()).filter_map(point).collect();
    let mut front: Vec<(f64, f64, String)> =
        p.pareto.iter().filter(|&&i| i < p.candidates.len()).filter_map(|&i| point(i)).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    // every candidate names itself on hover; the Pareto front's are written on the chart
    Chart::new("chart-plan-cost", "Cost vs p99 latency", "TTFT p99 + TPOT p99 (ms)", "$ per million output tokens")
        .with(Series::labelled("candidates", Mark::Dots, all, false))
        .with(Series::labelled("Pareto front", Mark::Line, front, true))
}

/// The top three candidates' capacity searches: p99 TTFT and p99 TPOT against the rate tried,
/// one line each, the SLO's limit as a line, and each capacity marked with its rate.
pub fn plan_curves(p: &PlanReport) -> Vec<Chart> {
    let top: Vec<(usize, &goodput_results::planning::PlanCandidate)> =
        p.candidates.iter().enumerate().filter(|(_, c)| c.capacity.is_some() && !c.curve.is_empty()).take(3).collect();
    if top.is_empty() {
        return Vec::new();
    }
    let limits: Vec<goodput_metrics::slo::Predicate> =
        p.slo.split(',').filter_map(|t| t.trim().parse::<goodput_metrics::slo::Predicate>().ok()).collect();
    let limit = |m: goodput_metrics::slo::Metric| limits.iter().find(|q| q.metric == m).map(|q| q.limit_ms);
    type Pick = fn(&goodput_results::CapacityPoint) -> Option<f64>;
    let kinds: [(&str, &str, &str, Pick, goodput_metrics::slo::Metric, &str); 2] = [
        (
            "chart-plan-ttft-rate",
            "p99 TTFT vs request rate",
            "p99 TTFT (ms)",
            |q| q.ttft_p99_ms,
            goodput_metrics::slo::Metric::Ttft,
            "TTFT",
        ),
        (
            "chart-plan-tpot-rate",
            "p99 TPOT vs request rate",
            "p99 TPOT (ms)",
            |q| q.tpot_p99_ms,
            goodput_metrics::slo::Metric::Tpot,
            "TPOT",
        ),
    ];
    let (lo, hi) = top
        .iter()
        .flat_map(|(_, c)| c.curve.iter().map(|q| q.rate))
        .fold((f64::INFINITY, 0.0_f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    kinds
        .iter()
        .map(|&(id, title, y_label, pick, metric, short)| {
            let mut chart = Chart::new(id, title, "request rate (req/s)", y_label);
            let mut marks = Vec::new();
            for &(i, c) in &top {
                // ranks as in the table above (the legend stays short)
                let name = format!("#{}", i + 1);
                // the search's steps by rate (a step run again longer keeps its last figures)
                let mut by_rate: Vec<(f64, f64)> = Vec::new();
                for q in &c.curve {
                    if let Some(y) = pick(q) {
                        match by_rate.iter_mut().find(|(r, _)| *r == q.rate) {
                            Some(p) => p.1 = y,
                            None => by_rate.push((q.rate, y)),
                        }
                    }
                }
                by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
                let cap = c.capacity.unwrap_or(f64::NAN);
                if let Some(&(r, y)) = by_rate.iter().min_by(|a, b| (a.0 - cap).abs().total_cmp(&(b.0 - cap).abs())) {
                    marks.push((r, y, format!("#{} capacity {cap:.1} req/s", i + 1)));
                }
                chart = chart.with(Series::new(name, Mark::Line, by_rate));
            }
            chart = chart.with(Series::labelled("capacity", Mark::Dots, marks, true));
            if let Some(l) = limit(metric).filter(|_| hi > 0.0) {
                chart = chart.with(Series::new(format!("SLO {short} ≤ {l} ms"), Mark::Line, vec![(lo, l), (hi, l)]));
            }
            chart
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_matches_the_standard_sort() {
        let mut x: u64 = 88172645463325252;
        let mut v: Vec<f64> = (0..200_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let f = (x >> 11) as f64 / (1u64 << 53) as f64;
                if i % 7 == 0 { -f * 1e3 } else { f * 50.0 }
            })
            .collect();
        v.push(0.0);
        let mut want = v.clone();
        want.sort_by(f64::total_cmp);
        sort(&mut v);
        assert_eq!(v, want);
    }

    /// A series row: time, four gauges, then the counters.
    fn row(t: f64, counters: [f64; 7]) -> Vec<f64> {
        let mut r = vec![t, 1.0, 0.0, 0.5, 0.9];
        r.extend(counters);
        r
    }

    #[test]
    fn mechanism_counters_become_rates() {
        // 0 → 2 s: 4 preemptions, 100 of 400 queried tokens hit, 10 steps drafting 40 tokens of
        // which 20 accepted, 300 tokens generated; 2 → 3 s: nothing queried, 5 steps, 20 drafted,
        // 5 accepted, 100 generated
        let rows = vec![
            row(0.0, [0.0; 7]),
            row(2.0, [4.0, 400.0, 100.0, 10.0, 40.0, 20.0, 300.0]),
            row(3.0, [4.0, 400.0, 100.0, 15.0, 60.0, 25.0, 400.0]),
        ];
        let cs = mechanism_charts(&rows, "");
        let ids: Vec<&str> = cs.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "chart-engine-tokens",
                "chart-engine-preemptions",
                "chart-engine-prefix",
                "chart-engine-spec",
                "chart-engine-spec-length"
            ]
        );
        let pts = |i: usize| cs[i].series[0].points.clone();
        assert_eq!(pts(0), vec![(1.0, 150.0), (2.5, 100.0)]);
        assert_eq!(pts(1), vec![(1.0, 2.0), (2.5, 0.0)]);
        // the second interval queried nothing: no hit rate there
        assert_eq!(pts(2), vec![(1.0, 25.0)]);
        assert_eq!(pts(3), vec![(1.0, 50.0), (2.5, 25.0)]);
        assert_eq!(pts(4), vec![(1.0, 3.0), (2.5, 2.0)]);
    }

    #[test]
    fn old_five_column_series_and_idle_mechanisms_draw_no_mechanism_chart() {
        let old = vec![vec![0.0, 1.0, 0.0, 0.5, 0.9], vec![1.0, 2.0, 0.0, 0.6, 0.9]];
        assert!(mechanism_charts(&old, "").is_empty());
        // counters present but only tokens moved: the token rate alone
        let rows = vec![row(0.0, [0.0; 7]), row(1.0, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 50.0])];
        let cs = mechanism_charts(&rows, "-r0");
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].id, "chart-engine-tokens-r0");
    }

    #[test]
    fn cdf_points_are_exact_and_bounded() {
        let s: Vec<f64> = (1..=10_000).map(f64::from).collect();
        let c = cdf(&s, 2000);
        assert_eq!(c.len(), 2000);
        assert_eq!(c[0], (1.0, 1e-4));
        assert_eq!(c[1999], (10_000.0, 1.0));
        assert!(c.iter().all(|&(v, p)| (p - v / 10_000.0).abs() < 1e-12));
        let h = histogram(&s);
        assert_eq!(h.iter().map(|p| p.1).sum::<f64>(), 10_000.0);
    }
}
