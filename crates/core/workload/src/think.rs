//! Distributions of pauses (think time between a user's requests), in seconds.
//!
//! Syntax: a duration (`2s`, `500ms`, `1.5` = seconds), `uniform:A..B`, `exp:MEAN` (exponential),
//! `normal:MEAN,STD` (clipped at 0); every value may carry `ms` or `s`.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_distr::{Distribution, Exp, Normal};
use serde::{Serialize, Serializer};

#[derive(Clone, Debug, PartialEq)]
pub enum ThinkTime {
    Fixed(f64),
    Uniform { lo: f64, hi: f64 },
    Exponential { mean: f64 },
    Normal { mean: f64, std: f64 },
}

impl Default for ThinkTime {
    fn default() -> Self {
        ThinkTime::Fixed(0.0)
    }
}

impl ThinkTime {
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match *self {
            ThinkTime::Fixed(s) => s,
            ThinkTime::Uniform { lo, hi } => {
                if hi > lo {
                    rng.random_range(lo..=hi)
                } else {
                    lo
                }
            }
            ThinkTime::Exponential { mean } => {
                if mean > 0.0 {
                    Exp::new(1.0 / mean).map(|d| d.sample(rng)).unwrap_or(0.0)
                } else {
                    0.0
                }
            }
            ThinkTime::Normal { mean, std } => Normal::new(mean, std).map(|d| d.sample(rng)).unwrap_or(mean).max(0.0),
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == ThinkTime::Fixed(0.0)
    }
}

fn seconds(s: &str) -> Option<f64> {
    goodput_metrics::units::seconds(s, 1.0)
}

impl FromStr for ThinkTime {
    type Err = goodput_metrics::ParseError;

    fn from_str(s: &str) -> Result<Self, goodput_metrics::ParseError> {
        Self::parse_text(s).map_err(|m| goodput_metrics::ParseError::new(s, m))
    }
}

impl ThinkTime {
    fn parse_text(s: &str) -> Result<Self, String> {
        let expect = "expected a duration (2s, 500ms), uniform:A..B, exp:MEAN or normal:MEAN,STD";
        if let Some(v) = seconds(s) {
            return Ok(ThinkTime::Fixed(v));
        }
        let (kind, args) = s.split_once(':').ok_or_else(|| format!("`{s}`: {expect}"))?;
        let bad = || format!("`{s}`: {expect}");
        match kind.trim() {
            "uniform" => {
                let (a, b) = args.split_once("..").ok_or_else(bad)?;
                match (seconds(a), seconds(b)) {
                    (Some(lo), Some(hi)) if lo <= hi => Ok(ThinkTime::Uniform { lo, hi }),
                    _ => Err(bad()),
                }
            }
            "exp" => seconds(args).map(|mean| ThinkTime::Exponential { mean }).ok_or_else(bad),
            "normal" => {
                let (m, d) = args.split_once(',').ok_or_else(bad)?;
                match (seconds(m), seconds(d)) {
                    (Some(mean), Some(std)) => Ok(ThinkTime::Normal { mean, std }),
                    _ => Err(bad()),
                }
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThinkTime::Fixed(s) => write!(f, "{s}s"),
            ThinkTime::Uniform { lo, hi } => write!(f, "uniform:{lo}s..{hi}s"),
            ThinkTime::Exponential { mean } => write!(f, "exp:{mean}s"),
            ThinkTime::Normal { mean, std } => write!(f, "normal:{mean}s,{std}s"),
        }
    }
}

impl Serialize for ThinkTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ThinkTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::error::from_text(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses() {
        assert_eq!("2s".parse::<ThinkTime>(), Ok(ThinkTime::Fixed(2.0)));
        assert_eq!("500ms".parse::<ThinkTime>(), Ok(ThinkTime::Fixed(0.5)));
        assert_eq!("uniform:1..3".parse::<ThinkTime>(), Ok(ThinkTime::Uniform { lo: 1.0, hi: 3.0 }));
        assert_eq!("exp:200ms".parse::<ThinkTime>(), Ok(ThinkTime::Exponential { mean: 0.2 }));
        assert_eq!("normal:1s,500ms".parse::<ThinkTime>(), Ok(ThinkTime::Normal { mean: 1.0, std: 0.5 }));
        for bad in ["soon", "uniform:3..1", "exp:-1", "gamma:1,2"] {
            assert!(bad.parse::<ThinkTime>().is_err(), "{bad}");
        }
    }

    #[test]
    fn samples() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let e = ThinkTime::Exponential { mean: 2.0 };
        let m = (0..20000).map(|_| e.sample(&mut r)).sum::<f64>() / 20000.0;
        assert!((m - 2.0).abs() < 0.06, "{m}");
        assert!((0..1000).all(|_| ThinkTime::Normal { mean: 0.1, std: 1.0 }.sample(&mut r) >= 0.0));
    }
}
