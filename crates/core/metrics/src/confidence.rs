//! Distribution-free confidence intervals for percentiles, from order statistics.
//!
//! With `n` samples, the number of them below the true `p`-quantile is Binomial(n, p). The
//! interval `[x(l), x(u)]` (1-based order statistics) with `l` the largest rank such that
//! `P(B ≤ l − 1) ≤ α/2` and `u` the smallest rank such that `P(B ≤ u − 1) ≥ 1 − α/2` covers
//! the quantile with probability at least `1 − α`. When `n` is too small for a side, that side is
//! unbounded (`None`).

/// 95% Wilson score interval for a proportion `k / n` (an SLO attainment): `[lo, hi]`, `None`
/// when `n = 0`. Unlike the normal approximation it stays inside [0, 1] and is sound for
/// proportions near 0 or 1, where attainments live.
pub fn proportion_ci(k: u64, n: u64) -> Option<[f64; 2]> {
    if n == 0 {
        return None;
    }
    let (z, n_f) = (1.959_963_984_540_054, n as f64);
    let p = k.min(n) as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let center = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    Some([(center - half).max(0.0), (center + half).min(1.0)])
}

/// `P(B ≤ k)` for `B ~ Binomial(n, p)`: exact (log-space sum) up to 200,000 samples, normal
/// approximation with continuity correction beyond.
pub fn binomial_cdf(k: i64, n: u64, p: f64) -> f64 {
    if k < 0 {
        return 0.0;
    }
    if k as u64 >= n {
        return 1.0;
    }
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    if n > 200_000 {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        return normal_cdf((k as f64 + 0.5 - mean) / sd);
    }
    // pmf(i) = C(n, i) p^i (1-p)^(n-i), accumulated from the mode outward would be more exact;
    // a forward log-space recurrence is plenty for the ranks used here.
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut log_pmf = n as f64 * lq; // i = 0
    let mut sum = 0.0f64;
    let mut max_log = f64::NEG_INFINITY;
    // two passes: find the largest term, then sum relative to it (avoids underflow)
    let mut logs = Vec::with_capacity(k as usize + 1);
    for i in 0..=k as u64 {
        if i > 0 {
            log_pmf += ((n - i + 1) as f64).ln() - (i as f64).ln() + lp - lq;
        }
        logs.push(log_pmf);
        max_log = max_log.max(log_pmf);
    }
    for l in logs {
        sum += (l - max_log).exp();
    }
    (max_log + sum.ln()).exp().min(1.0)
}

fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' erfcc, |error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// 1-based ranks `(l, u)` of the order statistics bounding the `p`-quantile of `n` samples at
/// confidence `1 − alpha`; `None` where the sample is too small for that side. Exact up to 20,000
/// samples (one pass over the binomial distribution); normal quantiles beyond.
pub fn quantile_ranks(n: u64, p: f64, alpha: f64) -> (Option<u64>, Option<u64>) {
    if n == 0 {
        return (None, None);
    }
    if n > 20_000 {
        let z = normal_quantile(1.0 - alpha / 2.0);
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        let l = (mean - z * sd).floor();
        let u = (mean + z * sd).ceil() + 1.0;
        return ((l >= 1.0).then_some(l as u64), (u <= n as f64).then_some(u as u64));
    }
    // cdf[k] = P(B ≤ k), built with the pmf recurrence relative to the largest term
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut logs = Vec::with_capacity(n as usize + 1);
    let mut lpmf = n as f64 * lq;
    for i in 0..=n {
        if i > 0 {
            lpmf += ((n - i + 1) as f64).ln() - (i as f64).ln() + lp - lq;
        }
        logs.push(lpmf);
    }
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = logs.iter().map(|l| (l - max).exp()).sum();
    let mut cdf = Vec::with_capacity(logs.len());
    let mut acc = 0.0;
    for l in &logs {
        acc += (l - max).exp() / total;
        cdf.push(acc);
    }
    // lower: the largest l ≥ 1 with P(B ≤ l − 1) ≤ α/2
    let lower = (1..=n).take_while(|&l| cdf[(l - 1) as usize] <= alpha / 2.0).last();
    // upper: the smallest u ≤ n with P(B ≤ u − 1) ≥ 1 − α/2
    let upper = (1..=n).find(|&u| cdf[(u - 1) as usize] >= 1.0 - alpha / 2.0);
    (lower, upper)
}

/// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
fn normal_quantile(q: f64) -> f64 {
    let a = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    let b =
        [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    let c = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    let d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let plow = 0.02425;
    if q < plow {
        let r = (-2.0 * q.ln()).sqrt();
        (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5])
            / ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1.0)
    } else if q <= 1.0 - plow {
        let r = q - 0.5;
        let t = r * r;
        (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + a[5]) * r
            / (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1.0)
    } else {
        let r = (-2.0 * (1.0 - q).ln()).sqrt();
        -(((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5])
            / ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1.0)
    }
}

/// Fewest samples for a `p`-quantile to rest on at least ten samples beyond it: `10 / (1 − p)`.
pub fn min_samples(p: f64) -> u64 {
    // less a hair, so that 1 − 0.9 = 0.0999…98 in floating point still gives 100, not 101
    (10.0 / (1.0 - p) - 1e-9).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_by_hand() {
        // Bin(4, 0.5): P(B ≤ 1) = (1 + 4) / 16
        assert!((binomial_cdf(1, 4, 0.5) - 5.0 / 16.0).abs() < 1e-12);
        assert!((binomial_cdf(3, 4, 0.5) - 15.0 / 16.0).abs() < 1e-12);
        // Bin(10, 0.99): P(B ≤ 9) = 1 − 0.99^10
        assert!((binomial_cdf(9, 10, 0.99) - (1.0 - 0.99f64.powi(10))).abs() < 1e-12);
        assert_eq!(binomial_cdf(-1, 5, 0.3), 0.0);
        assert_eq!(binomial_cdf(5, 5, 0.3), 1.0);
        // normal branch agrees with the exact sum at the boundary
        let exact = binomial_cdf(100_050, 200_000, 0.5);
        let approx = {
            let sd = (200_000.0f64 * 0.25).sqrt();
            normal_cdf((100_050.0 + 0.5 - 100_000.0) / sd)
        };
        assert!((exact - approx).abs() < 1e-3, "{exact} vs {approx}");
    }

    #[test]
    fn ranks_for_the_median_of_ten() {
        // Bin(10, 0.5): P(B ≤ 1) = 11/1024 ≈ 0.0107 ≤ 0.025 and P(B ≤ 2) = 56/1024 ≈ 0.055 > 0.025
        // → l = 2; P(B ≤ 7) = 968/1024 ≈ 0.945 < 0.975, P(B ≤ 8) = 1013/1024 ≈ 0.989 → u = 9
        assert_eq!(quantile_ranks(10, 0.5, 0.05), (Some(2), Some(9)));
    }

    #[test]
    fn normal_quantile_known_values() {
        assert!((normal_quantile(0.975) - 1.959964).abs() < 1e-6);
        assert!(normal_quantile(0.5).abs() < 1e-12);
        // the normal branch continues the exact one
        let (l1, u1) = quantile_ranks(20_000, 0.99, 0.05);
        let (l2, u2) = quantile_ranks(20_001, 0.99, 0.05);
        assert!(l1.unwrap().abs_diff(l2.unwrap()) <= 2 && u1.unwrap().abs_diff(u2.unwrap()) <= 2);
    }

    #[test]
    fn p99_needs_enough_samples() {
        // with 100 samples, P(B ≤ 99) = 1 − 0.99^100 ≈ 0.634 < 0.975: no upper bound
        assert_eq!(quantile_ranks(100, 0.99, 0.05).1, None);
        let (l, u) = quantile_ranks(2000, 0.99, 0.05);
        let (l, u) = (l.unwrap(), u.unwrap());
        assert!(l < 1980 && u > 1980 && u <= 2000, "{l} {u}");
        assert_eq!(min_samples(0.99), 1000);
        assert_eq!(min_samples(0.5), 20);
    }

    #[test]
    fn wilson_interval_by_hand() {
        // 8 of 10: center (0.8 + 1.9208/10) / 1.38415 = 0.71673, half 0.22658
        let [lo, hi] = proportion_ci(8, 10).unwrap();
        assert!((lo - 0.49016).abs() < 1e-4 && (hi - 0.94331).abs() < 1e-4, "{lo} {hi}");
        // all good: the upper side is 1, the lower n / (n + z²) = 100 / 103.8415
        let [lo, hi] = proportion_ci(100, 100).unwrap();
        assert!((lo - 0.963006).abs() < 1e-5 && hi == 1.0, "{lo} {hi}");
        assert_eq!(proportion_ci(0, 0), None);
        assert_eq!(min_samples(0.9), 100);
        assert_eq!(min_samples(0.95), 200);
    }
}
