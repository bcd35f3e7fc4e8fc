//! A mergeable quantile sketch with a bounded relative error: log-linear buckets, as in HDR
//! histograms (and DDSketch's fast mappings).
//!
//! A value `x > 0` with binary exponent `e` falls in one of `2^p` equal-width buckets that split
//! `[2^e, 2^(e+1))`: its bucket index is simply the top `11 + p` bits of its IEEE-754
//! representation (no logarithm). A bucket `[lo, lo + 2^e/2^p)` stands for its midpoint, which
//! is within `2^−(p+1)` of every value it holds, relative to that value. `p` is the smallest
//! that meets the relative error asked for (1% → `p = 6`, a bound of 1/128 ≈ 0.78%). So every
//! quantile (and every order statistic, hence every confidence-interval bound) read off the
//! sketch is within that bound of the exact one. Negative values get their own mirrored buckets;
//! values with `|x| <` [`MIN_MAGNITUDE`] count as zero. Count, min, max, mean and standard
//! deviation are kept exactly (up to floating-point summation).
//!
//! Two sketches of the same precision merge by adding their buckets: the merge of two sketches
//! is the sketch of the union of their samples (bucket for bucket).

/// Relative error asked of the sketches the summaries switch to (the bound met is 1/128).
pub const DEFAULT_RELATIVE_ERROR: f64 = 0.01;

/// Smaller magnitudes count as zero (ms: a femtosecond).
pub const MIN_MAGNITUDE: f64 = 1e-12;

/// Buckets of one sign: dense counts from index `offset`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Store {
    offset: i32,
    counts: Vec<u64>,
}

impl Store {
    #[inline]
    fn add(&mut self, i: i32, w: u64) {
        // the common case: a bucket inside the range already held
        let k = i.wrapping_sub(self.offset) as u32 as usize;
        if i >= self.offset && k < self.counts.len() {
            self.counts[k] += w;
            return;
        }
        self.add_outside(i, w);
    }

    /// [`Store::add`] for a bucket the store does not span yet (or an empty store).
    #[cold]
    #[inline(never)]
    fn add_outside(&mut self, i: i32, w: u64) {
        if self.counts.is_empty() {
            self.offset = i;
            self.counts.push(0);
        } else if i < self.offset {
            let grow = (self.offset - i) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.offset = i;
        } else if (i - self.offset) as usize >= self.counts.len() {
            self.counts.resize((i - self.offset) as usize + 1, 0);
        }
        self.counts[(i - self.offset) as usize] += w;
    }

    fn merge(&mut self, o: &Store) {
        for (k, &c) in o.counts.iter().enumerate() {
            if c > 0 {
                self.add(o.offset + k as i32, c);
            }
        }
    }

    #[cfg(test)]
    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// (index, count) pairs in increasing index order, non-empty buckets only.
    fn buckets(&self) -> impl DoubleEndedIterator<Item = (i32, u64)> + '_ {
        self.counts.iter().enumerate().filter(|(_, c)| **c > 0).map(|(k, &c)| (self.offset + k as i32, c))
    }
}

/// A log-linear quantile sketch over weighted samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Sketch {
    /// Mantissa bits kept: `2^p` buckets per power of two.
    p: u32,
    pos: Store,
    neg: Store,
    zeros: u64,
    n: u64,
    min: f64,
    max: f64,
    /// Weighted sums of `x − shift` and `(x − shift)²` (shifted by the first value, for a stable
    /// variance).
    shift: f64,
    sum: f64,
    sum_sq: f64,
}

impl Sketch {
    /// An empty sketch whose quantiles are within `relative_error` (in `(0, 0.5]`) of the exact
    /// ones; [`Sketch::relative_error`] says the bound met (at most the one asked for).
    pub fn new(relative_error: f64) -> Self {
        let a = relative_error.clamp(1e-6, 0.5);
        // smallest p with 2^−(p+1) ≤ a
        let p = ((1.0 / a).log2().ceil() as i64 - 1).clamp(0, 20) as u32;
        Sketch {
            p,
            pos: Store::default(),
            neg: Store::default(),
            zeros: 0,
            n: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            shift: 0.0,
            sum: 0.0,
            sum_sq: 0.0,
        }
    }

    /// The relative error bound met: `2^−(p+1)`.
    pub fn relative_error(&self) -> f64 {
        0.5f64.powi(self.p as i32 + 1)
    }

    /// Total weight added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The bucket of a positive normal magnitude: its exponent and top `p` mantissa bits.
    fn index(&self, m: f64) -> i32 {
        (m.to_bits() >> (52 - self.p)) as i32
    }

    /// The midpoint of bucket `i`.
    fn value_of(&self, i: i32) -> f64 {
        let lo = f64::from_bits((i as u64) << (52 - self.p));
        let hi = f64::from_bits(((i as u64) + 1) << (52 - self.p));
        lo + (hi - lo) / 2.0
    }

    /// Adds `weight` observations of `value`; non-finite values and zero weights add nothing.
    #[inline]
    pub fn add(&mut self, value: f64, weight: u64) {
        self.extend(std::iter::once((value, weight)));
    }

    /// [`Sketch::add`] of each `(value, weight)` in turn, with the running statistics held in
    /// registers for the whole batch (a stream's gaps go in as one call, cheaper per sample than
    /// one call each). The same sketch as adding them one by one.
    #[inline]
    pub fn extend(&mut self, pairs: impl IntoIterator<Item = (f64, u64)>) {
        let (mut n, mut min, mut max, mut sum, mut sum_sq) = (self.n, self.min, self.max, self.sum, self.sum_sq);
        let mut shift = self.shift;
        for (value, weight) in pairs {
            if weight == 0 || !value.is_finite() {
                continue;
            }
            if n == 0 {
                shift = value;
            }
            n += weight;
            min = min.min(value);
            max = max.max(value);
            let d = value - shift;
            sum += d * weight as f64;
            sum_sq += d * d * weight as f64;
            if value.abs() < MIN_MAGNITUDE {
                self.zeros += weight;
            } else if value > 0.0 {
                let i = self.index(value);
                self.pos.add(i, weight);
            } else {
                let i = self.index(-value);
                self.neg.add(i, weight);
            }
        }
        (self.n, self.min, self.max, self.sum, self.sum_sq, self.shift) = (n, min, max, sum, sum_sq, shift);
    }

    /// Adds every sample of `other` (same relative error): the result is the sketch of the union.
    ///
    /// # Panics
    /// When the relative errors differ (their buckets do not line up).
    pub fn merge(&mut self, other: &Sketch) {
        assert!(self.p == other.p, "merging sketches of different precision");
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = other.clone();
            return;
        }
        // re-shift the other's sums onto ours
        let (n, delta) = (other.n as f64, other.shift - self.shift);
        self.sum_sq += other.sum_sq + 2.0 * delta * other.sum + delta * delta * n;
        self.sum += other.sum + delta * n;
        self.n += other.n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.zeros += other.zeros;
        self.pos.merge(&other.pos);
        self.neg.merge(&other.neg);
    }

    pub fn min(&self) -> Option<f64> {
        (self.n > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<f64> {
        (self.n > 0).then_some(self.max)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.shift + self.sum / self.n as f64)
    }

    /// Population standard deviation.
    pub fn std(&self) -> Option<f64> {
        (self.n > 0).then(|| {
            let m = self.sum / self.n as f64;
            (self.sum_sq / self.n as f64 - m * m).max(0.0).sqrt()
        })
    }

    /// The value at 0-based rank `r` of the sorted expanded samples, within the relative error
    /// (clamped to the exact min and max). `None` when empty or `r ≥ count`.
    pub fn value_at_rank(&self, r: u64) -> Option<f64> {
        if r >= self.n {
            return None;
        }
        if r == 0 {
            return Some(self.min);
        }
        if r == self.n - 1 {
            return Some(self.max);
        }
        let mut acc = 0u64;
        // negatives, most negative first (largest magnitude index first)
        for (i, c) in self.neg.buckets().rev() {
            acc += c;
            if r < acc {
                return Some((-self.value_of(i)).clamp(self.min, self.max));
            }
        }
        acc += self.zeros;
        if r < acc {
            return Some(0.0f64.clamp(self.min, self.max));
        }
        for (i, c) in self.pos.buckets() {
            acc += c;
            if r < acc {
                return Some(self.value_of(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Buckets held (a measure of the sketch's memory).
    pub fn buckets(&self) -> usize {
        self.pos.counts.len() + self.neg.counts.len() + 1
    }

    /// Consistency check used by tests: the buckets hold every observation.
    #[cfg(test)]
    fn total_in_buckets(&self) -> u64 {
        self.pos.total() + self.neg.total() + self.zeros
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extend_is_add_one_by_one() {
        let pairs = [(3.5, 1), (f64::NAN, 1), (0.0, 2), (-2.0, 3), (7.25, 0), (1e-13, 1), (1e6, 4), (3.5, 1)];
        let (mut one, mut batch) = (Sketch::new(0.01), Sketch::new(0.01));
        for &(v, w) in &pairs {
            one.add(v, w);
        }
        batch.extend(pairs);
        assert_eq!(one, batch);
        // onto a sketch that already holds samples (its shift is kept)
        one.add(10.0, 2);
        batch.extend([(10.0, 2)]);
        assert_eq!(one, batch);
        assert_eq!(batch.count(), 14);
        // by hand: 3.5 + 2·0 − 3·2 + 1e−13 + 4·1e6 + 3.5 + 2·10 over 14; 2 zeros and 1e−13 as zero
        let mean = (3.5 - 6.0 + 1e-13 + 4e6 + 3.5 + 20.0) / 14.0;
        assert!((batch.mean().unwrap() - mean).abs() < 1e-6, "{:?}", batch.mean());
        assert_eq!((batch.min(), batch.max(), batch.zeros), (Some(-2.0), Some(1e6), 3));
    }

    fn exact_at_rank(sorted: &[f64], r: u64) -> f64 {
        sorted[r as usize]
    }

    fn check_ranks(values: &mut [f64], alpha: f64) {
        let mut s = Sketch::new(alpha);
        for &v in values.iter() {
            s.add(v, 1);
        }
        values.sort_by(f64::total_cmp);
        assert_eq!(s.count(), values.len() as u64);
        assert_eq!(s.total_in_buckets(), values.len() as u64);
        for r in (0..values.len() as u64).step_by(7) {
            let (a, e) = (s.value_at_rank(r).unwrap(), exact_at_rank(values, r));
            assert!((a - e).abs() <= alpha * e.abs() + 1e-12, "rank {r}: {a} vs {e}");
        }
    }

    #[test]
    fn relative_error_on_uniform_and_heavy_tailed() {
        // uniform 1..=10000 ms
        let mut u: Vec<f64> = (1..=10_000).map(|k| k as f64).collect();
        check_ranks(&mut u, 0.01);
        // a Pareto-like tail: 1/(1 − q)² over a grid of q, spanning 1 to 1e8
        let mut p: Vec<f64> = (0..10_000).map(|k| 1.0 / (1.0 - k as f64 / 10_000.0).powi(2)).collect();
        check_ranks(&mut p, 0.01);
        // sub-millisecond, with negatives and zeros (schedule lag can be both)
        let mut m: Vec<f64> = (-500..500).map(|k| k as f64 * 1e-3).collect();
        check_ranks(&mut m, 0.02);
    }

    #[test]
    fn bucket_value_by_hand() {
        // asked 1/3: p = 1 (bound 1/4), two buckets per power of two: [2, 3) and [3, 4) stand
        // for 2.5 and 3.5
        let mut s = Sketch::new(1.0 / 3.0);
        assert_eq!(s.relative_error(), 0.25);
        assert_eq!(Sketch::new(0.01).relative_error(), 1.0 / 128.0);
        for v in [1.5, 3.0, 3.5, 100.0] {
            s.add(v, 1);
        }
        // ranks 1 and 2 (3.0 and 3.5) share [3, 4)
        assert_eq!(s.value_at_rank(1), Some(3.5));
        assert_eq!(s.value_at_rank(2), Some(3.5));
        // extremes are exact
        assert_eq!(s.value_at_rank(0), Some(1.5));
        assert_eq!(s.value_at_rank(3), Some(100.0));
        assert_eq!(s.value_at_rank(4), None);
        // mean 27, population std sqrt(mean of squares − 27²)
        assert!((s.mean().unwrap() - 27.0).abs() < 1e-9);
        let ms = (1.5f64 * 1.5 + 9.0 + 12.25 + 10_000.0) / 4.0;
        assert!((s.std().unwrap() - (ms - 27.0 * 27.0).sqrt()).abs() < 1e-9);
    }

    #[test]
    fn weights_count_as_repeats() {
        let mut a = Sketch::new(0.01);
        let mut b = Sketch::new(0.01);
        for (v, w) in [(2.0, 3u64), (7.0, 1), (0.5, 2)] {
            a.add(v, w);
            for _ in 0..w {
                b.add(v, 1);
            }
        }
        assert_eq!(a.count(), 6);
        for r in 0..6 {
            assert_eq!(a.value_at_rank(r), b.value_at_rank(r));
        }
        assert_eq!(a.mean(), b.mean());
    }

    #[test]
    fn merge_is_union() {
        let xs: Vec<f64> = (1..=3000).map(|k| (k as f64).sqrt() * 3.0).collect();
        let mut whole = Sketch::new(0.01);
        let (mut left, mut right) = (Sketch::new(0.01), Sketch::new(0.01));
        for (k, &x) in xs.iter().enumerate() {
            whole.add(x, 1);
            if k % 3 == 0 { left.add(x, 1) } else { right.add(x, 1) }
        }
        left.merge(&right);
        assert_eq!(left.count(), whole.count());
        assert_eq!(left.pos, whole.pos);
        for r in 0..whole.count() {
            assert_eq!(left.value_at_rank(r), whole.value_at_rank(r));
        }
        assert!((left.mean().unwrap() - whole.mean().unwrap()).abs() < 1e-9);
        assert!((left.std().unwrap() - whole.std().unwrap()).abs() < 1e-9);
        // merging into an empty sketch copies
        let mut e = Sketch::new(0.01);
        e.merge(&whole);
        assert_eq!(e.value_at_rank(1500), whole.value_at_rank(1500));
    }

    #[test]
    fn memory_does_not_grow_with_samples() {
        let mut s = Sketch::new(0.01);
        for k in 0..1_000_000u64 {
            s.add(1.0 + (k % 1000) as f64, 1);
        }
        // 1 to 1000: 10 powers of two, 64 buckets each
        assert!(s.buckets() <= 641, "{} buckets", s.buckets());
    }
}
