//! Open-loop arrival processes: when each request (or session) is scheduled to start.
//!
//! Each process yields absolute offsets in seconds from the run start, from a seeded generator,
//! so a schedule is reproducible from `--seed` alone.

use rand::Rng;
use rand_distr::{Distribution, Exp, Gamma};
use serde::{Deserialize, Serialize};

/// An arrival process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrivals {
    /// Evenly spaced at `rate` req/s.
    Constant { rate: f64 },
    /// Exponential inter-arrival times at `rate` req/s.
    Poisson { rate: f64 },
    /// Gamma inter-arrival times with mean `1/rate` and shape `burstiness` (vLLM's
    /// `--burstiness`): coefficient of variation `1/√burstiness`; 1 is Poisson, below 1 burstier.
    Gamma { rate: f64, burstiness: f64 },
    /// Rate rising linearly from `from` to `to` req/s over `over_s` seconds (deterministic spacing:
    /// the n-th arrival is where the integrated rate reaches n), then staying at `to`.
    Ramp { from: f64, to: f64, over_s: f64 },
    /// Everything at t = 0 (offline throughput).
    AllAtOnce,
    /// Given times (trace replay), scaled by `time_scale` (2 = twice as slow).
    Replay { time_scale: f64 },
}

impl Arrivals {
    /// The nominal offered rate, when it has one.
    pub fn rate(&self) -> Option<f64> {
        match self {
            Arrivals::Constant { rate } | Arrivals::Poisson { rate } | Arrivals::Gamma { rate, .. } => Some(*rate),
            _ => None,
        }
    }
}

/// Generates the arrival times of one process.
pub struct ArrivalClock {
    kind: Arrivals,
    t: f64,
    n: u64,
}

impl ArrivalClock {
    pub fn new(kind: Arrivals) -> Self {
        ArrivalClock { kind, t: 0.0, n: 0 }
    }

    /// The next arrival offset in seconds. For `Replay`, pass the trace's own time (`given`).
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, given: Option<f64>) -> f64 {
        let first = self.n == 0;
        self.n += 1;
        self.t = match self.kind {
            Arrivals::AllAtOnce => 0.0,
            Arrivals::Replay { time_scale } => given.unwrap_or(self.t) * time_scale,
            Arrivals::Constant { rate } => {
                if first {
                    0.0
                } else {
                    self.t + 1.0 / rate
                }
            }
            Arrivals::Poisson { rate } => self.t + Exp::new(rate).map(|d| d.sample(rng)).unwrap_or(0.0),
            Arrivals::Gamma { rate, burstiness } => {
                let theta = 1.0 / (rate * burstiness);
                self.t + Gamma::new(burstiness, theta).map(|d| d.sample(rng)).unwrap_or(0.0)
            }
            Arrivals::Ramp { from, to, over_s } => ramp_time((self.n - 1) as f64, from, to, over_s),
        };
        self.t
    }
}

/// Time at which the integrated rate `Λ(t) = from·t + (to − from)·t²/(2T)` (for t ≤ T; then
/// linear at `to`) reaches `n`.
fn ramp_time(n: f64, from: f64, to: f64, t_max: f64) -> f64 {
    let area = (from + to) / 2.0 * t_max;
    if n >= area {
        return t_max + (n - area) / to.max(1e-9);
    }
    let a = (to - from) / (2.0 * t_max);
    if a.abs() < 1e-12 {
        return n / from.max(1e-9);
    }
    // a t² + from t − n = 0
    (-from + (from * from + 4.0 * a * n).sqrt()) / (2.0 * a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn times(a: Arrivals, n: usize) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let mut c = ArrivalClock::new(a);
        (0..n).map(|_| c.next(&mut rng, None)).collect()
    }

    #[test]
    fn constant_is_evenly_spaced() {
        assert_eq!(times(Arrivals::Constant { rate: 4.0 }, 4), vec![0.0, 0.25, 0.5, 0.75]);
    }

    #[test]
    fn poisson_and_gamma_have_the_right_mean_and_cv() {
        for (a, cv) in [
            (Arrivals::Poisson { rate: 10.0 }, 1.0),
            (Arrivals::Gamma { rate: 10.0, burstiness: 0.25 }, 2.0),
            (Arrivals::Gamma { rate: 10.0, burstiness: 4.0 }, 0.5),
        ] {
            let t = times(a, 50_001);
            let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
            let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let sd = (gaps.iter().map(|g| (g - m).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
            assert!((m - 0.1).abs() < 0.003, "mean gap {m}");
            assert!((sd / m - cv).abs() < 0.06 * cv, "cv {} want {cv}", sd / m);
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        assert_eq!(times(Arrivals::Poisson { rate: 3.0 }, 50), times(Arrivals::Poisson { rate: 3.0 }, 50));
    }

    #[test]
    fn ramp_integrates_the_rate() {
        // from 0 to 10 req/s over 10 s: Λ(t) = t²/2, so the 50th arrival (n = 50) is at t = 10,
        // the 8th (n = 8) at t = 4; after T the spacing is 1/10 s.
        let t = times(Arrivals::Ramp { from: 0.0, to: 10.0, over_s: 10.0 }, 52);
        assert!((t[8] - 4.0).abs() < 1e-9);
        assert!((t[50] - 10.0).abs() < 1e-9);
        assert!((t[51] - 10.1).abs() < 1e-9);
    }

    #[test]
    fn replay_scales_given_times() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let mut c = ArrivalClock::new(Arrivals::Replay { time_scale: 2.0 });
        assert_eq!(c.next(&mut rng, Some(1.5)), 3.0);
    }
}
