//! Fitting the step cost: non-negative least squares (the `nnls` crate, Lawson–Hanson) of each
//! observed iteration's duration on what it held, with each parameter's uncertainty from a
//! bootstrap over the iterations; and the front end from the requests that found the server
//! idle.

use ndarray::{Array1, Array2};

use super::observe::{IdleArrival, StepRow};

/// Most rows one solve takes (a seeded sample of them beyond): a fit over 100k requests stays
/// in seconds, and a bootstrap over many times that.
const MAX_ROWS: usize = 50_000;

/// Bootstrap resamples for the uncertainties.
const RESAMPLES: usize = 40;

/// The regressors of the step cost, in column order.
pub const TERMS: [&str; 5] =
    ["step_overhead_s", "prefill_overhead_s", "per_prefill_token_s", "per_decode_seq_s", "per_context_token_s"];

/// A fitted coefficient: value, bootstrap standard error, and whether the data identify it
/// (its regressor varied independently of the others).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coef {
    pub value: f64,
    pub stderr: f64,
    pub identified: bool,
}

/// The step-cost fit: a coefficient per term, and the root-mean-square error of the fitted
/// durations, seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct StepFit {
    pub coefs: [Coef; 5],
    pub rmse_s: f64,
    pub rows: usize,
}

/// An iteration that prefills has its own fixed cost: on a GPU a decode-only iteration is
/// bound by reading the weights while a prefill is bound by compute, so the prefill's cost does
/// not add to the decode's (the roofline's maximum, not a sum).
fn regressors(r: &StepRow) -> [f64; 5] {
    let prefills = r.prefill_tokens > 0.0;
    [f64::from(!prefills), f64::from(prefills), r.prefill_tokens, r.decode_seqs, r.context_tokens]
}

/// The step time `coefs` give an iteration.
pub fn predict(coefs: &[f64; 5], r: &StepRow) -> f64 {
    regressors(r).iter().zip(coefs).map(|(x, c)| x * c).sum()
}

/// Solves for the coefficients over `rows` (columns scaled to unit maximum for conditioning).
fn solve(rows: &[&StepRow]) -> [f64; 5] {
    let m = rows.len();
    let mut scale = [0.0f64; 5];
    for r in rows {
        for (s, x) in scale.iter_mut().zip(regressors(r)) {
            *s = s.max(x.abs());
        }
    }
    let mut a = Array2::<f64>::zeros((m, 5));
    let mut b = Array1::<f64>::zeros(m);
    for (i, r) in rows.iter().enumerate() {
        for (j, x) in regressors(r).into_iter().enumerate() {
            a[(i, j)] = if scale[j] > 0.0 { x / scale[j] } else { 0.0 };
        }
        b[i] = r.seconds;
    }
    let (x, _) = nnls::nnls(a.view(), b.view());
    std::array::from_fn(|j| if scale[j] > 0.0 { x[j] / scale[j] } else { 0.0 })
}

/// Seeded draws for the sampling and the bootstrap (the workload's own stable mix).
struct Rng(u64, u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.1 += 1;
        (goodput_workload::seed::mix(&[self.0, self.1]) % n as u64) as usize
    }
}

/// Whether a regressor varies on its own: its spread relative to its mean is not negligible, and
/// it is not (nearly) a multiple of another regressor that also varies.
fn varies(rows: &[&StepRow], j: usize) -> bool {
    if j < 2 {
        // an iteration kind's fixed cost: identified when iterations of that kind were seen
        return rows.iter().any(|r| regressors(r)[j] > 0.0);
    }
    let xs: Vec<f64> = rows.iter().map(|r| regressors(r)[j]).collect();
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    if var.sqrt() <= 1e-6 * mean.abs().max(1e-12) || var == 0.0 || var.is_nan() {
        return false;
    }
    // collinear with another varying regressor (|correlation| > 0.995)?
    (2..5).filter(|&k| k != j).all(|k| {
        let ys: Vec<f64> = rows.iter().map(|r| regressors(r)[k]).collect();
        let my = ys.iter().sum::<f64>() / n;
        let vy = ys.iter().map(|y| (y - my).powi(2)).sum::<f64>() / n;
        if vy == 0.0 {
            return true;
        }
        let cov = xs.iter().zip(&ys).map(|(x, y)| (x - mean) * (y - my)).sum::<f64>() / n;
        (cov / (var.sqrt() * vy.sqrt())).abs() < 0.995 || j < k
    })
}

/// Fits the step cost to `rows` (at least two).
pub fn fit_steps(rows: &[StepRow], seed: u64) -> Option<StepFit> {
    if rows.len() < 2 {
        return None;
    }
    let mut rng = Rng(seed ^ 0x7769_6e5f, 0);
    let sample: Vec<&StepRow> = if rows.len() > MAX_ROWS {
        (0..MAX_ROWS).map(|_| &rows[rng.below(rows.len())]).collect()
    } else {
        rows.iter().collect()
    };
    let x = solve(&sample);
    let rmse_s =
        (sample.iter().map(|r| (predict(&x, r) - r.seconds).powi(2)).sum::<f64>() / sample.len() as f64).sqrt();
    // the bootstrap: the same solve over resampled rows
    let boot_n = sample.len().clamp(2, MAX_ROWS / 5);
    let mut draws: Vec<[f64; 5]> = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let resample: Vec<&StepRow> = (0..boot_n).map(|_| sample[rng.below(sample.len())]).collect();
        draws.push(solve(&resample));
    }
    let scale = (boot_n as f64 / sample.len() as f64).sqrt();
    let coefs = std::array::from_fn(|j| {
        let mean = draws.iter().map(|d| d[j]).sum::<f64>() / draws.len() as f64;
        let sd = (draws.iter().map(|d| (d[j] - mean).powi(2)).sum::<f64>() / (draws.len() - 1) as f64).sqrt();
        Coef { value: x[j], stderr: sd * scale, identified: varies(&sample, j) }
    });
    Some(StepFit { coefs, rmse_s, rows: rows.len() })
}

/// A line `y = intercept + slope × x` with both non-negative (non-negative least squares), the
/// standard deviation of what it leaves (with `n − 2` degrees of freedom, `n − 1` for a level
/// alone), and the standard error of the slope. Where `x` does not vary, the slope is 0 and the
/// intercept the mean (at least 0).
struct Line {
    intercept: f64,
    slope: f64,
    sd: f64,
    slope_stderr: f64,
    varied: bool,
}

fn line(xs: &[f64], ys: &[f64]) -> Line {
    let n = xs.len() as f64;
    let varied = xs.iter().any(|x| (x - xs[0]).abs() > 0.5);
    let (intercept, slope) = if varied {
        let hi = xs.iter().copied().fold(1.0, f64::max);
        let a = Array2::from_shape_fn((xs.len(), 2), |(i, j)| if j == 0 { 1.0 } else { xs[i] / hi });
        let (x, _) = nnls::nnls(a.view(), Array1::from(ys.to_vec()).view());
        (x[0], x[1] / hi)
    } else {
        ((ys.iter().sum::<f64>() / n).max(0.0), 0.0)
    };
    let dof = if varied { (n - 2.0).max(1.0) } else { (n - 1.0).max(1.0) };
    let ss = xs.iter().zip(ys).map(|(x, y)| (y - intercept - slope * x).powi(2)).sum::<f64>();
    let sd = if xs.len() > 1 { (ss / dof).sqrt() } else { 0.0 };
    let mx = xs.iter().sum::<f64>() / n;
    let sxx = xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>();
    Line { intercept, slope, sd, slope_stderr: if sxx > 0.0 { sd / sxx.sqrt() } else { 0.0 }, varied }
}

/// The front end: each idle arrival's time to first token less the fitted iteration that
/// prefilled it, fitted (non-negative least squares) as a fixed latency plus a latency per
/// prompt token (tokenization). Returns the two, the standard deviation of what they leave (the
/// jitter), seconds, and the arrivals used; `None` without idle arrivals.
pub fn front_end(arrivals: &[IdleArrival], coefs: &[f64; 5]) -> Option<FrontFit> {
    if arrivals.is_empty() {
        return None;
    }
    let f: Vec<f64> = arrivals.iter().map(|a| a.ttft_s - predict(coefs, &a.step)).collect();
    let prompts: Vec<f64> = arrivals.iter().map(|a| a.step.prefill_tokens).collect();
    Some(front_fit(&prompts, &f, FrontSource::FirstToken))
}

fn front_fit(prompts: &[f64], latencies: &[f64], source: FrontSource) -> FrontFit {
    let l = line(prompts, latencies);
    FrontFit {
        fixed_s: l.intercept,
        per_token_s: l.slope,
        jitter_s: l.sd,
        requests: prompts.len(),
        per_token_identified: l.varied,
        source,
    }
}

/// The front end read off the response headers, where the server answers them as soon as it has
/// taken a request (llama.cpp's server and vLLM's do, for streams): the time to headers of
/// requests that found it idle, as a fixed latency plus one per prompt token, with the spread
/// they leave as the jitter. `None` where fewer than two idle arrivals carry the time, or where
/// headers came with the first token (at least half of it, for the median arrival): the server
/// then shows nothing of its front end apart from its prefill.
pub fn front_end_from_headers(arrivals: &[IdleArrival]) -> Option<FrontFit> {
    let seen: Vec<(f64, f64, f64)> = arrivals
        .iter()
        .filter_map(|a| a.headers_s.map(|h| (a.step.prefill_tokens, h.max(0.0), h / a.ttft_s.max(1e-12))))
        .collect();
    if seen.len() < 2 {
        return None;
    }
    let mut share: Vec<f64> = seen.iter().map(|s| s.2).collect();
    share.sort_by(f64::total_cmp);
    if share[share.len() / 2] >= 0.5 {
        return None;
    }
    let early: Vec<&(f64, f64, f64)> = seen.iter().filter(|s| s.2 < 0.5).collect();
    let prompts: Vec<f64> = early.iter().map(|s| s.0).collect();
    let latencies: Vec<f64> = early.iter().map(|s| s.1).collect();
    Some(front_fit(&prompts, &latencies, FrontSource::Headers))
}

/// The prefill cost and the front end from requests that found the server idle, when their
/// prompts vary: each one's time to first token, less the decode terms of the iteration that
/// prefilled it, is `front end + prefill fixed cost + per token × prompt` (a line fitted by
/// non-negative least squares: the cleanest view of prefill a server gives, where prefilling
/// iterations among running decodes are few or noisy). With the front end known from the
/// headers (`front`), each arrival's own time to headers is taken off first and the line's intercept is the prefill's fixed
/// cost; without, the intercept is split between the prefill's fixed cost (the median of what
/// the timed prefilling iterations leave, when there are some) and the front end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdlePrefill {
    pub per_token_s: f64,
    pub per_token_stderr_s: f64,
    pub fixed_s: f64,
    pub front_end_s: f64,
    /// What the line leaves: the spread of an idle request's time to first token that neither
    /// the prompt nor the front end explains (the server's own variance), seconds.
    pub jitter_s: f64,
    pub requests: usize,
}

/// See [`IdlePrefill`]; `None` without at least two idle arrivals whose prompts differ by half.
pub fn prefill_from_idle(
    arrivals: &[IdleArrival],
    steps: &[StepRow],
    coefs: &[f64; 5],
    front: Option<&FrontFit>,
) -> Option<IdlePrefill> {
    let xs: Vec<f64> = arrivals.iter().map(|a| a.step.prefill_tokens).collect();
    let (lo, hi) = xs.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    if arrivals.len() < 2 || !(hi >= 1.5 * lo && lo > 0.0) {
        return None;
    }
    let decode = |r: &StepRow| coefs[3] * r.decode_seqs + coefs[4] * r.context_tokens;
    let front_at = |p: f64| front.map_or(0.0, |f| f.fixed_s + f.per_token_s * p);
    // each arrival's own time to headers where the front end was read there, else the line
    let front_of = |a: &IdleArrival| match (front, a.headers_s) {
        (Some(f), Some(h)) if f.source == FrontSource::Headers && h < 0.5 * a.ttft_s => h.max(0.0),
        _ => front_at(a.step.prefill_tokens),
    };
    let ys: Vec<f64> = arrivals.iter().map(|a| a.ttft_s - decode(&a.step) - front_of(a)).collect();
    let l = line(&xs, &ys);
    let fixed = if front.is_some() {
        l.intercept
    } else {
        let mut left: Vec<f64> = steps
            .iter()
            .filter(|r| r.prefill_tokens > 0.0)
            .map(|r| r.seconds - l.slope * r.prefill_tokens - decode(r))
            .collect();
        left.sort_by(f64::total_cmp);
        left.get(left.len() / 2).copied().unwrap_or(0.0).clamp(0.0, l.intercept)
    };
    Some(IdlePrefill {
        per_token_s: l.slope,
        per_token_stderr_s: l.slope_stderr,
        fixed_s: fixed,
        front_end_s: if front.is_some() { front_at(0.0) } else { l.intercept - fixed },
        jitter_s: l.sd,
        requests: xs.len(),
    })
}

/// Where the front end was read: off the response headers, or off the first token less the
/// fitted prefill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontSource {
    Headers,
    FirstToken,
}

/// The front end's fit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrontFit {
    pub fixed_s: f64,
    pub per_token_s: f64,
    pub jitter_s: f64,
    pub requests: usize,
    pub per_token_identified: bool,
    pub source: FrontSource,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(p: f64, d: f64, c: f64, coefs: [f64; 5]) -> StepRow {
        let mut r = StepRow { prefill_tokens: p, decode_seqs: d, context_tokens: c, seconds: 0.0 };
        r.seconds = predict(&coefs, &r);
        r
    }

    #[test]
    fn recovers_a_known_step_cost() {
        // 2 ms per decode step, 1 ms per prefill step, 50 µs per prompt token, 0.3 ms per
        // sequence, 1 µs per context token
        let truth = [2e-3, 1e-3, 50e-6, 0.3e-3, 1e-6];
        let mut rows = Vec::new();
        for d in 0..8 {
            for p in [0.0, 128.0, 512.0] {
                rows.push(row(p, d as f64, d as f64 * (300.0 + 40.0 * p / 128.0 + d as f64 * 7.0), truth));
            }
        }
        let f = fit_steps(&rows, 1).unwrap();
        for (c, t) in f.coefs.iter().zip(truth) {
            assert!((c.value - t).abs() < 1e-9 + t * 1e-6, "{} vs {t}", c.value);
            assert!(c.identified);
        }
        assert!(f.rmse_s < 1e-9);
    }

    #[test]
    fn a_term_that_never_varies_is_named_unidentified() {
        // one sequence at a time, never a prefill: the per-sequence cost cannot be told from the
        // overhead, nor a prefill's cost from nothing
        let truth = [2e-3, 1e-3, 50e-6, 0.3e-3, 1e-6];
        let rows: Vec<StepRow> = (0..50).map(|i| row(0.0, 1.0, 200.0 + i as f64, truth)).collect();
        let f = fit_steps(&rows, 1).unwrap();
        assert!(!f.coefs[1].identified && !f.coefs[2].identified && !f.coefs[3].identified);
        assert!(f.coefs[0].identified && f.coefs[4].identified);
    }

    #[test]
    fn front_end_by_hand() {
        let coefs = [3e-3, 1e-3, 1e-5, 0.0, 0.0];
        // prefill of 100 tokens: 1 ms + 1 ms; TTFTs 7 and 9 ms: front end 5 and 7 ms
        let step = StepRow { prefill_tokens: 100.0, decode_seqs: 0.0, context_tokens: 0.0, seconds: 0.0 };
        let a =
            [IdleArrival { ttft_s: 7e-3, headers_s: None, step }, IdleArrival { ttft_s: 9e-3, headers_s: None, step }];
        let f = front_end(&a, &coefs).unwrap();
        assert!((f.fixed_s - 6e-3).abs() < 1e-12 && (f.jitter_s - 2f64.sqrt() * 1e-3).abs() < 1e-12);
        assert_eq!((f.requests, f.per_token_s, f.per_token_identified), (2, 0.0, false));
        // 100 and 300 prompt tokens, 5 µs each on top of 2 ms: recovered exactly, no jitter
        let b = StepRow { prefill_tokens: 300.0, ..step };
        let two = [
            IdleArrival { ttft_s: 2e-3 + 5e-4 + 2e-3, headers_s: None, step },
            IdleArrival { ttft_s: 2e-3 + 15e-4 + (1e-3 + 3e-3), headers_s: None, step: b },
        ];
        let f = front_end(&two, &coefs).unwrap();
        assert!((f.fixed_s - 2e-3).abs() < 1e-9 && (f.per_token_s - 5e-6).abs() < 1e-12 && f.jitter_s < 1e-9, "{f:?}");
    }

    #[test]
    fn prefill_and_front_end_from_idle_arrivals_by_hand() {
        // decode terms: 0.1 ms per sequence; idle arrivals: TTFT = 5 ms front end + 2 ms prefill
        // fixed cost + 10 µs per prompt token, at 100 and 400 tokens
        let coefs = [3e-3, 0.0, 0.0, 1e-4, 0.0];
        let row = |p: f64, d: f64| StepRow { prefill_tokens: p, decode_seqs: d, context_tokens: 0.0, seconds: 0.0 };
        let arrivals: Vec<IdleArrival> = [100.0, 400.0, 100.0, 400.0]
            .into_iter()
            .map(|p| IdleArrival { ttft_s: 5e-3 + 2e-3 + 1e-5 * p, headers_s: None, step: row(p, 0.0) })
            .collect();
        // a timed prefilling iteration among 3 decodes: 2 ms + 300 × 10 µs + 0.3 ms
        let steps = [StepRow { seconds: 2e-3 + 3e-3 + 3e-4, ..row(300.0, 3.0) }];
        let p = prefill_from_idle(&arrivals, &steps, &coefs, None).unwrap();
        assert!((p.per_token_s - 1e-5).abs() < 1e-12, "{p:?}");
        assert!((p.fixed_s - 2e-3).abs() < 1e-9 && (p.front_end_s - 5e-3).abs() < 1e-9, "{p:?}");
        assert!(p.jitter_s < 1e-9 && p.requests == 4);
        // prompts that do not vary by half identify nothing
        assert_eq!(prefill_from_idle(&arrivals[..1], &steps, &coefs, None), None);
    }

    #[test]
    fn the_front_end_read_off_the_headers_by_hand() {
        // headers 1 ms + 10 µs per prompt token after the send, ±0.5 ms; first tokens 2 ms +
        // 100 µs per token after the headers
        let row = |p: f64| StepRow { prefill_tokens: p, decode_seqs: 0.0, context_tokens: 0.0, seconds: 0.0 };
        let arrivals: Vec<IdleArrival> = [(100.0, 5e-4), (100.0, -5e-4), (300.0, 5e-4), (300.0, -5e-4)]
            .into_iter()
            .map(|(p, j)| {
                let h = 1e-3 + 1e-5 * p + j;
                IdleArrival { ttft_s: h + 2e-3 + 1e-4 * p, headers_s: Some(h), step: row(p) }
            })
            .collect();
        let f = front_end_from_headers(&arrivals).unwrap();
        assert_eq!((f.source, f.requests), (FrontSource::Headers, 4));
        // the line through the pairs' means; residuals ±0.5 ms with 2 degrees of freedom
        assert!((f.fixed_s - 1e-3).abs() < 1e-12 && (f.per_token_s - 1e-5).abs() < 1e-14, "{f:?}");
        assert!((f.jitter_s - (4.0 * 0.25e-6 / 2.0f64).sqrt()).abs() < 1e-12, "{f:?}");
        // with it taken off, the idle line is the prefill alone: 2 ms + 100 µs per token
        let p = prefill_from_idle(&arrivals, &[], &[0.0; 5], Some(&f)).unwrap();
        assert!((p.fixed_s - 2e-3).abs() < 1e-9 && (p.per_token_s - 1e-4).abs() < 1e-12, "{p:?}");
        assert!((p.front_end_s - 1e-3).abs() < 1e-12 && p.jitter_s < 1e-9, "{p:?}");
        // headers that come with the first token show no front end
        let late: Vec<IdleArrival> = arrivals.iter().map(|a| IdleArrival { headers_s: Some(a.ttft_s), ..*a }).collect();
        assert_eq!(front_end_from_headers(&late), None);
        assert_eq!(front_end_from_headers(&arrivals[..1]), None);
    }
}
