//! Token-length distributions for `--input-tokens` and `--output-tokens`.
//!
//! Syntax: `N` (fixed), `uniform:A..B` (inclusive), `normal:MEAN,STD` and `lognormal:MEAN,STD`
//! (MEAN and STD of the lengths themselves, clipped at 1), `file:PATH` (an empirical list: one
//! length per line, or a JSON array; sampled uniformly).

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Normal};
use serde::{Serialize, Serializer};

use crate::WorkloadError;

/// The longest prompt or output accepted, in tokens (the longest context of any model in the
/// catalog, Llama-4-Scout's 10M): a larger value in a flag or a file is a typo, not a workload.
pub const MAX_LENGTH: u32 = 10_000_000;

/// A distribution of token lengths (always in `1..=MAX_LENGTH`).
#[derive(Clone, Debug, PartialEq)]
pub enum LengthDist {
    Fixed(u32),
    Uniform { lo: u32, hi: u32 },
    Normal { mean: f64, std: f64 },
    LogNormal { mean: f64, std: f64 },
    Empirical { path: String, values: Vec<u32> },
}

impl LengthDist {
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let clip = |x: f64| x.round().clamp(1.0, MAX_LENGTH as f64) as u32;
        match self {
            LengthDist::Fixed(n) => *n,
            LengthDist::Uniform { lo, hi } => rng.random_range(*lo..=*hi),
            LengthDist::Normal { mean, std } => clip(Normal::new(*mean, *std).map(|d| d.sample(rng)).unwrap_or(*mean)),
            LengthDist::LogNormal { mean, std } => {
                // parameters of the underlying normal from the lengths' own mean and std
                let sigma2 = (1.0 + (std / mean).powi(2)).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                clip(LogNormal::new(mu, sigma2.sqrt()).map(|d| d.sample(rng)).unwrap_or(*mean))
            }
            LengthDist::Empirical { values, .. } => values[rng.random_range(0..values.len())],
        }
    }

    /// The distribution's mean (for planning and display).
    pub fn mean(&self) -> f64 {
        match self {
            LengthDist::Fixed(n) => *n as f64,
            LengthDist::Uniform { lo, hi } => (*lo as f64 + *hi as f64) / 2.0,
            LengthDist::Normal { mean, .. } | LengthDist::LogNormal { mean, .. } => *mean,
            LengthDist::Empirical { values, .. } => values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64,
        }
    }

    /// The smallest value it can produce.
    pub fn min(&self) -> u32 {
        match self {
            LengthDist::Fixed(n) => *n,
            LengthDist::Uniform { lo, .. } => *lo,
            LengthDist::Empirical { values, .. } => values.iter().copied().min().unwrap_or(1),
            LengthDist::Normal { .. } | LengthDist::LogNormal { .. } => 1,
        }
    }

    /// The largest value it can produce (`None` when unbounded).
    pub fn max(&self) -> Option<u32> {
        match self {
            LengthDist::Fixed(n) => Some(*n),
            LengthDist::Uniform { hi, .. } => Some(*hi),
            LengthDist::Empirical { values, .. } => values.iter().copied().max(),
            _ => None,
        }
    }

    /// Reads a `file:PATH` distribution's values (one integer per line, or a JSON array).
    pub fn parse_values(path: &str, text: &str) -> Result<Vec<u32>, WorkloadError> {
        let bad = |line: usize, msg: String| WorkloadError::Data {
            file: path.into(),
            line,
            field: "length".into(),
            message: msg,
        };
        let trimmed = text.trim_start();
        let values: Vec<u32> = if trimmed.starts_with('[') {
            serde_json::from_str::<Vec<u32>>(trimmed)
                .map_err(|e| bad(e.line(), format!("expected a JSON array of positive integers: {e}")))?
        } else {
            let mut v = Vec::new();
            for (i, l) in text.lines().enumerate() {
                let l = l.trim();
                if l.is_empty() || l.starts_with('#') {
                    continue;
                }
                v.push(l.parse::<u32>().map_err(|_| bad(i + 1, format!("`{l}` is not a positive integer")))?);
            }
            v
        };
        if values.is_empty() {
            return Err(bad(0, "no lengths in file".into()));
        }
        if let Some(i) = values.iter().position(|&v| v == 0 || v > MAX_LENGTH) {
            return Err(bad(i + 1, format!("lengths must be between 1 and {MAX_LENGTH}")));
        }
        Ok(values)
    }
}

impl FromStr for LengthDist {
    type Err = goodput_metrics::ParseError;

    fn from_str(s: &str) -> Result<Self, goodput_metrics::ParseError> {
        Self::parse_text(s).map_err(|m| goodput_metrics::ParseError::new(s, m))
    }
}

impl LengthDist {
    fn parse_text(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let num = |x: &str| x.trim().parse::<f64>().ok().filter(|v| v.is_finite());
        let expect = "expected N, uniform:A..B, normal:MEAN,STD, lognormal:MEAN,STD or file:PATH";
        if let Ok(n) = s.parse::<u32>() {
            return if (1..=MAX_LENGTH).contains(&n) {
                Ok(LengthDist::Fixed(n))
            } else {
                Err(format!("a length must be between 1 and {MAX_LENGTH} tokens"))
            };
        }
        let (kind, args) = s.split_once(':').ok_or_else(|| format!("`{s}`: {expect}"))?;
        match kind {
            "uniform" => {
                let (a, b) = args.split_once("..").ok_or_else(|| format!("`{s}`: expected uniform:A..B"))?;
                let (lo, hi) = (a.trim().parse::<u32>(), b.trim().parse::<u32>());
                match (lo, hi) {
                    (Ok(lo), Ok(hi)) if lo >= 1 && lo <= hi && hi <= MAX_LENGTH => Ok(LengthDist::Uniform { lo, hi }),
                    _ => Err(format!("`{s}`: expected uniform:A..B with 1 ≤ A ≤ B ≤ {MAX_LENGTH}")),
                }
            }
            "normal" | "lognormal" => {
                let (m, d) = args.split_once(',').ok_or_else(|| format!("`{s}`: expected {kind}:MEAN,STD"))?;
                match (num(m), num(d)) {
                    (Some(mean), Some(std)) if (1.0..=MAX_LENGTH as f64).contains(&mean) && std >= 0.0 => {
                        Ok(if kind == "normal" {
                            LengthDist::Normal { mean, std }
                        } else {
                            LengthDist::LogNormal { mean, std }
                        })
                    }
                    _ => Err(format!("`{s}`: expected {kind}:MEAN,STD with 1 ≤ MEAN ≤ {MAX_LENGTH} and STD ≥ 0")),
                }
            }
            "file" if !args.is_empty() => Ok(LengthDist::Empirical { path: args.to_string(), values: Vec::new() }),
            _ => Err(format!("`{s}`: {expect}")),
        }
    }
}

impl fmt::Display for LengthDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LengthDist::Fixed(n) => write!(f, "{n}"),
            LengthDist::Uniform { lo, hi } => write!(f, "uniform:{lo}..{hi}"),
            LengthDist::Normal { mean, std } => write!(f, "normal:{mean},{std}"),
            LengthDist::LogNormal { mean, std } => write!(f, "lognormal:{mean},{std}"),
            LengthDist::Empirical { path, .. } => write!(f, "file:{path}"),
        }
    }
}

impl Serialize for LengthDist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// From its text form; a `file:PATH` distribution comes back without its values (read the file
/// to use it).
impl<'de> serde::Deserialize<'de> for LengthDist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::error::from_text(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_every_form() {
        assert_eq!("512".parse::<LengthDist>(), Ok(LengthDist::Fixed(512)));
        assert_eq!("uniform:10..20".parse::<LengthDist>(), Ok(LengthDist::Uniform { lo: 10, hi: 20 }));
        assert_eq!("normal:100,10".parse::<LengthDist>(), Ok(LengthDist::Normal { mean: 100.0, std: 10.0 }));
        assert_eq!("lognormal:100,50".parse::<LengthDist>(), Ok(LengthDist::LogNormal { mean: 100.0, std: 50.0 }));
        assert!(matches!("file:x.txt".parse::<LengthDist>(), Ok(LengthDist::Empirical { .. })));
        for bad in ["0", "uniform:20..10", "normal:abc", "gauss:1,2", "", "-3", "uniform:0..4"] {
            assert!(bad.parse::<LengthDist>().is_err(), "{bad}");
        }
        assert_eq!(LengthDist::Uniform { lo: 1, hi: 9 }.to_string(), "uniform:1..9");
    }

    #[test]
    fn samples_stay_in_range_and_match_moments() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let u = LengthDist::Uniform { lo: 5, hi: 7 };
        assert!((0..1000).map(|_| u.sample(&mut rng)).all(|x| (5..=7).contains(&x)));
        let ln = LengthDist::LogNormal { mean: 200.0, std: 100.0 };
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| ln.sample(&mut rng) as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let std = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean - 200.0).abs() < 3.0, "{mean}");
        assert!((std - 100.0).abs() < 4.0, "{std}");
        let nz = LengthDist::Normal { mean: 2.0, std: 10.0 };
        assert!((0..1000).all(|_| nz.sample(&mut rng) >= 1));
    }

    #[test]
    fn empirical_file_values() {
        assert_eq!(LengthDist::parse_values("f", "3\n# c\n\n5\n").unwrap(), vec![3, 5]);
        assert_eq!(LengthDist::parse_values("f", "[1, 2]").unwrap(), vec![1, 2]);
        let e = LengthDist::parse_values("lens.txt", "3\nx\n").unwrap_err().to_string();
        assert!(e.contains("lens.txt") && e.contains("line 2"), "{e}");
        assert!(LengthDist::parse_values("f", "0\n").is_err());
    }
}
