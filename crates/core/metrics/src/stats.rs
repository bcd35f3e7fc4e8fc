//! Exact distribution statistics over (optionally weighted) samples.
//!
//! A [`Samples`] collection holds `(value, weight)` pairs; a weight of `w` means the value was
//! observed `w` times (the token-level ITL counts each chunk gap once per token it carried).
//! Every statistic is exactly what the expanded sample vector would give, without expanding it.
//!
//! Percentiles default to NumPy's `linear` method (interpolation between closest ranks);
//! [`PercentileMethod::NearestRank`] gives the classic `ceil(p·n)`-th smallest value.
//!
//! Memory is bounded: past [`DEFAULT_EXACT_LIMIT`] entries (or the limit given to
//! [`Samples::with_limit`]) the samples fold into a [`Sketch`] whose percentiles (and confidence
//! interval bounds) are within [`DEFAULT_RELATIVE_ERROR`] of the exact ones; the described
//! [`Distribution`] then says so in its `estimate` field. Below the limit nothing changes.

use serde::{Deserialize, Serialize};

use crate::sketch::{DEFAULT_RELATIVE_ERROR, Sketch};

/// Entries a [`Samples`] keeps exactly before it switches to a sketch (1M per metric: 16 MB).
pub const DEFAULT_EXACT_LIMIT: usize = 1_000_000;

/// How a percentile is read off the sorted samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PercentileMethod {
    /// NumPy's default (`method="linear"`): rank `h = (n − 1)·p`, interpolate between
    /// the values at ranks `floor(h)` and `floor(h) + 1`.
    #[default]
    Linear,
    /// The `ceil(p·n)`-th smallest value (1-based), `p = 0` giving the minimum.
    NearestRank,
}

impl PercentileMethod {
    /// Every method, its name and what it does.
    pub const ALL: [(PercentileMethod, &'static str, &'static str); 2] = [
        (PercentileMethod::Linear, "linear", "Linear interpolation between closest ranks (NumPy's default)."),
        (PercentileMethod::NearestRank, "nearest-rank", "The ceil(p·n)-th smallest sample."),
    ];
}

impl std::str::FromStr for PercentileMethod {
    type Err = crate::error::ParseError;

    fn from_str(s: &str) -> Result<Self, crate::error::ParseError> {
        Self::parse_text(s).map_err(|m| crate::error::ParseError::new(s, m))
    }
}

impl PercentileMethod {
    fn parse_text(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(_, n, _)| *n == s.trim())
            .map(|(m, ..)| *m)
            .ok_or_else(|| format!("unknown percentile method `{s}`; expected linear or nearest-rank"))
    }
}

/// A multiset of samples, each with an integer weight.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    items: Vec<(f64, u64)>,
    sorted: bool,
    /// Entries kept exactly; 0 means [`DEFAULT_EXACT_LIMIT`].
    limit: usize,
    /// Once more than `limit` entries came: every sample so far, sketched (`items` is then empty).
    sketch: Option<Box<Sketch>>,
}

impl Samples {
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps at most `limit` entries exactly (at least 1), then sketches.
    pub fn with_limit(limit: usize) -> Self {
        Samples { limit: limit.max(1), ..Self::default() }
    }

    fn limit(&self) -> usize {
        if self.limit == 0 { DEFAULT_EXACT_LIMIT } else { self.limit }
    }

    /// Whether the samples were folded into a sketch (percentiles are then estimates).
    pub fn is_sketched(&self) -> bool {
        self.sketch.is_some()
    }

    /// Adds every sample of `other` (a sketch if either is one, or if the union passes the limit).
    pub fn merge(&mut self, other: &Samples) {
        match &other.sketch {
            Some(o) => {
                self.fold_into_sketch();
                self.sketch.as_mut().expect("sketched").merge(o);
            }
            None => {
                for &(v, w) in &other.items {
                    self.push_weighted(v, w);
                }
            }
        }
    }

    fn fold_into_sketch(&mut self) {
        if self.sketch.is_none() {
            let mut k = Sketch::new(DEFAULT_RELATIVE_ERROR);
            for &(v, w) in &self.items {
                k.add(v, w);
            }
            self.items = Vec::new();
            self.sorted = false;
            self.sketch = Some(Box::new(k));
        }
    }

    /// Adds one observation. Non-finite values are ignored (they cannot be ranked).
    #[inline]
    pub fn push(&mut self, value: f64) {
        self.push_weighted(value, 1);
    }

    /// Adds `weight` observations of `value`. A zero weight adds nothing.
    #[inline]
    pub fn push_weighted(&mut self, value: f64, weight: u64) {
        if weight == 0 || !value.is_finite() {
            return;
        }
        if let Some(k) = &mut self.sketch {
            k.add(value, weight);
            return;
        }
        self.items.push((value, weight));
        self.sorted = false;
        if self.items.len() > self.limit() {
            self.fold_into_sketch();
        }
    }

    /// [`Samples::push_weighted`] of each `(value, weight)` in turn (once sketched, without
    /// looking again at each one whether it is).
    pub fn extend_weighted(&mut self, pairs: impl IntoIterator<Item = (f64, u64)>) {
        let mut pairs = pairs.into_iter();
        while self.sketch.is_none() {
            let Some((v, w)) = pairs.next() else { return };
            self.push_weighted(v, w);
        }
        self.sketch.as_mut().expect("sketched").extend(pairs);
    }

    /// Total weight (the number of observations in the expanded vector).
    pub fn count(&self) -> u64 {
        match &self.sketch {
            Some(k) => k.count(),
            None => self.items.iter().map(|&(_, w)| w).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    fn sort(&mut self) {
        if !self.sorted {
            // by value, then weight: one order however the samples came (so the moments, summed
            // in it, do not depend on arrival order), without a stable sort's cost
            self.items.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            self.sorted = true;
        }
    }

    /// The value at 0-based rank `i` of the expanded sorted vector. Requires sorted, `i < count`.
    fn at_rank(&self, cumulative: &[u64], i: u64) -> f64 {
        // first group whose cumulative weight exceeds i
        let g = cumulative.partition_point(|&c| c <= i);
        self.items[g.min(self.items.len() - 1)].0
    }

    fn cumulative(&self) -> Vec<u64> {
        let mut acc = 0;
        self.items
            .iter()
            .map(|&(_, w)| {
                acc += w;
                acc
            })
            .collect()
    }

    /// One percentile, `p` in `[0, 1]`. `None` when there are no samples.
    pub fn percentile(&mut self, p: f64, method: PercentileMethod) -> Option<f64> {
        if let Some(k) = &self.sketch {
            return sketch_percentile(k, p, method);
        }
        self.sort();
        let cumulative = self.cumulative();
        percentile_sorted(self, &cumulative, p, method)
    }

    /// The fixed set of statistics every latency distribution reports.
    pub fn describe(&mut self, method: PercentileMethod) -> Distribution {
        let n = self.count();
        if n == 0 {
            return Distribution::default();
        }
        if let Some(k) = &self.sketch {
            return describe_sketch(k, method);
        }
        self.sort();
        let cumulative = self.cumulative();
        let nf = n as f64;
        let mean = self.items.iter().map(|&(v, w)| v * w as f64).sum::<f64>() / nf;
        let var = self.items.iter().map(|&(v, w)| (v - mean) * (v - mean) * w as f64).sum::<f64>() / nf;
        let q = |p| percentile_sorted(self, &cumulative, p, method);
        let ci = |p| {
            let (l, u) = crate::confidence::quantile_ranks(n, p, 0.05);
            Some([l.map(|r| self.at_rank(&cumulative, r - 1)), u.map(|r| self.at_rank(&cumulative, r - 1))])
        };
        let moments =
            [Some(mean), Some(var.max(0.0).sqrt()), Some(self.items[0].0), Some(self.items[self.items.len() - 1].0)];
        Distribution::from_parts(n, moments, q, ci, None)
    }

    /// The sorted, expanded-order values with their weights (for confidence intervals and plots);
    /// empty once the samples were sketched.
    pub fn sorted_items(&mut self) -> &[(f64, u64)] {
        self.sort();
        &self.items
    }
}

impl FromIterator<f64> for Samples {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        let mut s = Samples::new();
        for v in iter {
            s.push(v);
        }
        s
    }
}

/// A percentile read off a sketch: the same ranks as the exact method, each rank's value within
/// the sketch's relative error.
fn sketch_percentile(k: &Sketch, p: f64, method: PercentileMethod) -> Option<f64> {
    let n = k.count();
    if n == 0 {
        return None;
    }
    let p = p.clamp(0.0, 1.0);
    match method {
        PercentileMethod::Linear => {
            let h = (n - 1) as f64 * p;
            let lo = h.floor() as u64;
            let frac = h - lo as f64;
            let a = k.value_at_rank(lo)?;
            if frac == 0.0 || lo + 1 >= n {
                return Some(a);
            }
            let b = k.value_at_rank(lo + 1)?;
            Some(a + frac * (b - a))
        }
        PercentileMethod::NearestRank => {
            let rank = ((p * n as f64).ceil() as u64).clamp(1, n);
            k.value_at_rank(rank - 1)
        }
    }
}

fn describe_sketch(k: &Sketch, method: PercentileMethod) -> Distribution {
    let n = k.count();
    let q = |p| sketch_percentile(k, p, method);
    let ci = |p| {
        let (l, u) = crate::confidence::quantile_ranks(n, p, 0.05);
        Some([l.and_then(|r| k.value_at_rank(r - 1)), u.and_then(|r| k.value_at_rank(r - 1))])
    };
    let moments = [k.mean(), k.std(), k.min(), k.max()];
    let estimate = Estimate { method: EstimateMethod::LogLinear, relative_error: k.relative_error() };
    Distribution::from_parts(n, moments, q, ci, Some(estimate))
}

/// How a distribution's percentiles were computed when not exactly (absent: exact).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub method: EstimateMethod,
    /// Every percentile and confidence bound is within this fraction of the exact value's
    /// magnitude (count, min, max and mean are exact).
    pub relative_error: f64,
}

/// The sketch a distribution was estimated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimateMethod {
    /// A log-linear bucket sketch (as HDR histograms) kept past the exact-sample limit.
    LogLinear,
}

fn percentile_sorted(s: &Samples, cumulative: &[u64], p: f64, method: PercentileMethod) -> Option<f64> {
    let n = *cumulative.last()?;
    let p = p.clamp(0.0, 1.0);
    match method {
        PercentileMethod::Linear => {
            let h = (n - 1) as f64 * p;
            let lo = h.floor() as u64;
            let frac = h - lo as f64;
            let a = s.at_rank(cumulative, lo);
            if frac == 0.0 || lo + 1 >= n {
                return Some(a);
            }
            let b = s.at_rank(cumulative, lo + 1);
            Some(a + frac * (b - a))
        }
        PercentileMethod::NearestRank => {
            let rank = ((p * n as f64).ceil() as u64).clamp(1, n);
            Some(s.at_rank(cumulative, rank - 1))
        }
    }
}

/// Summary statistics of one distribution. Every field is `None` (JSON `null`) without samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Number of samples (the expanded count for weighted samples).
    pub n: u64,
    pub mean: Option<f64>,
    /// Population standard deviation (NumPy's `std` with `ddof=0`).
    pub std: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p99_9: Option<f64>,
    /// 95% confidence intervals of the percentiles, from order statistics (binomial); a side is
    /// `null` when there are too few samples to bound it.
    #[serde(default)]
    pub p50_ci: Option<[Option<f64>; 2]>,
    #[serde(default)]
    pub p90_ci: Option<[Option<f64>; 2]>,
    #[serde(default)]
    pub p95_ci: Option<[Option<f64>; 2]>,
    #[serde(default)]
    pub p99_ci: Option<[Option<f64>; 2]>,
    /// Present when the samples passed the exact-sample limit (1M entries per metric; 100k in a
    /// one-pass summary, `ONE_PASS_EXACT_LIMIT`) and were sketched: the method and its relative
    /// error bound. Absent: every statistic is exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
}

impl Distribution {
    /// A distribution from its count, `[mean, std, min, max]`, its quantile function and the
    /// quantile CIs (the exact and the sketched paths share the percentiles reported).
    fn from_parts(
        n: u64,
        [mean, std, min, max]: [Option<f64>; 4],
        q: impl Fn(f64) -> Option<f64>,
        ci: impl Fn(f64) -> Option<[Option<f64>; 2]>,
        estimate: Option<Estimate>,
    ) -> Self {
        Distribution {
            n,
            mean,
            std,
            min,
            max,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p99_9: q(0.999),
            p50_ci: ci(0.50),
            p90_ci: ci(0.90),
            p95_ci: ci(0.95),
            p99_ci: ci(0.99),
            estimate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extending_is_pushing_one_by_one_across_the_switch_to_a_sketch() {
        // a limit of 3: the 4th entry folds everything into the sketch mid-way; a zero weight and
        // a NaN add nothing either way
        let pairs = [(5.0, 1), (1.0, 2), (f64::NAN, 1), (3.0, 0), (2.0, 1), (8.0, 3), (4.0, 1)];
        let mut one = Samples::with_limit(3);
        for (v, w) in pairs {
            one.push_weighted(v, w);
        }
        let mut all = Samples::with_limit(3);
        all.extend_weighted(pairs);
        assert!(all.is_sketched());
        assert_eq!(all.count(), 8);
        assert_eq!(all.describe(PercentileMethod::Linear), one.describe(PercentileMethod::Linear));
        // below the limit: exact, the same samples
        let mut exact = Samples::new();
        exact.extend_weighted([(2.0, 1), (4.0, 1)]);
        assert!(!exact.is_sketched());
        assert_eq!(exact.describe(PercentileMethod::Linear).p50, Some(3.0));
    }

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("value");
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn numpy_linear_parity() {
        // np.percentile([1, 2, 3, 4], [50, 90, 95, 99, 99.9]) =
        // [2.5, 3.7, 3.85, 3.97, 3.997]
        let mut s: Samples = [4.0, 1.0, 3.0, 2.0].into_iter().collect();
        let d = s.describe(PercentileMethod::Linear);
        close(d.p50, 2.5);
        close(d.p90, 3.7);
        close(d.p95, 3.85);
        close(d.p99, 3.97);
        close(d.p99_9, 3.997);
        close(d.mean, 2.5);
        // np.std([1,2,3,4]) = sqrt(1.25)
        close(d.std, 1.25f64.sqrt());
        close(d.min, 1.0);
        close(d.max, 4.0);
        assert_eq!(d.n, 4);
    }

    #[test]
    fn numpy_linear_parity_uneven() {
        // x = [10, 20, 35, 50, 100, 7]; sorted [7, 10, 20, 35, 50, 100]
        // p50: h = 2.5 -> 20 + 0.5*15 = 27.5
        // p90: h = 4.5 -> 50 + 0.5*50 = 75
        // p99: h = 4.95 -> 50 + 0.95*50 = 97.5
        let mut s: Samples = [10.0, 20.0, 35.0, 50.0, 100.0, 7.0].into_iter().collect();
        close(s.percentile(0.5, PercentileMethod::Linear), 27.5);
        close(s.percentile(0.9, PercentileMethod::Linear), 75.0);
        close(s.percentile(0.99, PercentileMethod::Linear), 97.5);
        close(s.percentile(0.0, PercentileMethod::Linear), 7.0);
        close(s.percentile(1.0, PercentileMethod::Linear), 100.0);
    }

    #[test]
    fn nearest_rank() {
        // n = 5: p50 -> ceil(2.5) = 3rd = 30; p90 -> ceil(4.5) = 5th = 50; p0 -> 1st
        let mut s: Samples = [50.0, 10.0, 40.0, 20.0, 30.0].into_iter().collect();
        close(s.percentile(0.5, PercentileMethod::NearestRank), 30.0);
        close(s.percentile(0.9, PercentileMethod::NearestRank), 50.0);
        close(s.percentile(0.2, PercentileMethod::NearestRank), 10.0);
        close(s.percentile(0.0, PercentileMethod::NearestRank), 10.0);
    }

    #[test]
    fn weighted_equals_expanded() {
        // (5, x3), (1, x1), (9, x2) expands to [1, 5, 5, 5, 9, 9]
        let mut w = Samples::new();
        w.push_weighted(5.0, 3);
        w.push_weighted(1.0, 1);
        w.push_weighted(9.0, 2);
        let mut e: Samples = [1.0, 5.0, 5.0, 5.0, 9.0, 9.0].into_iter().collect();
        assert_eq!(w.describe(PercentileMethod::Linear), e.describe(PercentileMethod::Linear));
        assert_eq!(w.describe(PercentileMethod::NearestRank), e.describe(PercentileMethod::NearestRank));
        // mean = 34/6
        close(w.describe(PercentileMethod::Linear).mean, 34.0 / 6.0);
    }

    #[test]
    fn confidence_intervals_from_order_statistics() {
        // 10 samples 1..=10: the median's 95% interval is [x(2), x(9)] = [2, 9]
        let mut s: Samples = (1..=10).map(|x| x as f64).collect();
        let d = s.describe(PercentileMethod::Linear);
        assert_eq!(d.p50_ci, Some([Some(2.0), Some(9.0)]));
        // too few samples to bound p99 from above
        assert_eq!(d.p99_ci.unwrap()[1], None);
    }

    #[test]
    fn empty_and_single() {
        let mut s = Samples::new();
        assert_eq!(s.describe(PercentileMethod::Linear), Distribution::default());
        s.push(f64::NAN);
        assert!(s.is_empty());
        s.push(3.0);
        let d = s.describe(PercentileMethod::Linear);
        close(d.p99, 3.0);
        close(d.std, 0.0);
    }

    #[test]
    fn switches_to_a_sketch_past_the_limit() {
        // 1..=1000 ms, exact limit 100 entries: sketched, within 1% of NumPy's values
        let mut small = Samples::with_limit(100);
        let mut exact = Samples::new();
        for k in 1..=1000 {
            small.push(k as f64);
            exact.push(k as f64);
        }
        assert!(small.is_sketched() && !exact.is_sketched());
        let (a, e) = (small.describe(PercentileMethod::Linear), exact.describe(PercentileMethod::Linear));
        assert_eq!(a.n, 1000);
        assert_eq!(e.estimate, None);
        let est = a.estimate.expect("sketched distributions say so");
        assert_eq!(est.method, EstimateMethod::LogLinear);
        assert_eq!(est.relative_error, 1.0 / 128.0);
        // exact: p50 = 500.5, p99 = 990.01, mean 500.5, min 1, max 1000
        close(e.p50, 500.5);
        close(e.p99, 990.01);
        for (x, y) in [(a.p50, e.p50), (a.p90, e.p90), (a.p99, e.p99), (a.p99_9, e.p99_9)] {
            let (x, y) = (x.unwrap(), y.unwrap());
            assert!((x - y).abs() <= 0.01 * y, "{x} vs {y}");
        }
        close(a.mean, 500.5);
        close(a.min, 1.0);
        close(a.max, 1000.0);
        assert!((a.std.unwrap() - e.std.unwrap()).abs() < 1e-6);
        let (ci, ce) = (a.p99_ci.unwrap(), e.p99_ci.unwrap());
        for (x, y) in [(ci[0], ce[0]), (ci[1], ce[1])] {
            let (x, y) = (x.unwrap(), y.unwrap());
            assert!((x - y).abs() <= 0.01 * y, "CI bound {x} vs {y}");
        }
    }

    #[test]
    fn below_the_limit_nothing_changes() {
        let mut a = Samples::with_limit(6);
        let mut b = Samples::new();
        for v in [10.0, 20.0, 35.0, 50.0, 100.0, 7.0] {
            a.push(v);
            b.push(v);
        }
        assert!(!a.is_sketched());
        assert_eq!(a.describe(PercentileMethod::Linear), b.describe(PercentileMethod::Linear));
    }

    #[test]
    fn merge_of_samples() {
        let mut a: Samples = [1.0, 2.0].into_iter().collect();
        let b: Samples = [3.0, 4.0].into_iter().collect();
        a.merge(&b);
        close(a.percentile(0.5, PercentileMethod::Linear), 2.5);
        // an exact set merged with a sketched one becomes a sketch of the union
        let mut s = Samples::with_limit(1);
        s.push(5.0);
        s.push(6.0);
        a.merge(&s);
        assert!(a.is_sketched());
        assert_eq!(a.count(), 6);
        close(a.describe(PercentileMethod::Linear).max, 6.0);
    }

    proptest::proptest! {
        #[test]
        fn weighted_matches_expansion(v in proptest::collection::vec((0.0f64..1000.0, 1u64..5), 1..40),
                                      p in 0.0f64..1.0) {
            let mut w = Samples::new();
            let mut e = Samples::new();
            for &(x, k) in &v {
                w.push_weighted(x, k);
                for _ in 0..k { e.push(x); }
            }
            for m in [PercentileMethod::Linear, PercentileMethod::NearestRank] {
                let a = w.percentile(p, m).unwrap();
                let b = e.percentile(p, m).unwrap();
                proptest::prop_assert!((a - b).abs() < 1e-9);
            }
        }
    }
}
