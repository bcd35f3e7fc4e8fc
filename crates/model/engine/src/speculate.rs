//! Speculative decoding as a step strategy: how many tokens an iteration drafts per decoding
//! sequence, how many of them the target accepts, and what drafting adds to the iteration's
//! time. Each method is one type here; [`strategy`] is where a configuration picks one. The
//! engine asks its strategy and never branches on the method.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::{EngineConfig, SpecMethod};
use crate::cost::{BatchShape, Roofline, StepCost};

/// How an iteration speculates.
pub trait Speculation: Send {
    /// Tokens drafted per decoding sequence per iteration (0: no speculation).
    fn k(&self) -> u32;

    /// How many of `drafted` tokens the target accepts, drawing from the sequence's `rng`.
    fn accepted(&self, rng: &mut ChaCha8Rng, drafted: u32) -> u32;

    /// Seconds drafting adds to an iteration whose drafting sequences form `draft` (one decode
    /// position each).
    fn draft_time(&self, draft: &BatchShape) -> f64;
}

/// The strategy of `cfg` (`--speculative`).
pub fn strategy(cfg: &EngineConfig) -> Box<dyn Speculation> {
    match &cfg.speculative {
        None => Box::new(NoSpeculation),
        Some(s) => match &s.method {
            SpecMethod::Ngram => Box::new(Lookup { k: s.k, acceptance: s.acceptance, cost: None }),
            SpecMethod::Draft { model } => {
                let mut d = cfg.clone();
                d.model = (**model).clone();
                d.speculative = None;
                Box::new(Lookup { k: s.k, acceptance: s.acceptance, cost: Some(Box::new(Roofline::new(&d))) })
            }
        },
    }
}

/// Each iteration computes one token per decoding sequence.
pub struct NoSpeculation;

impl Speculation for NoSpeculation {
    fn k(&self) -> u32 {
        0
    }

    fn accepted(&self, _rng: &mut ChaCha8Rng, _drafted: u32) -> u32 {
        0
    }

    fn draft_time(&self, _draft: &BatchShape) -> f64 {
        0.0
    }
}

/// `k` tokens drafted per sequence, each accepted with probability `acceptance` until the first
/// rejection; drafted by a smaller model (its own roofline time, once per drafted token over
/// every drafting sequence) or by prompt lookup (no model, no time: `cost` is `None`).
pub struct Lookup {
    k: u32,
    acceptance: f64,
    cost: Option<Box<dyn StepCost>>,
}

impl Speculation for Lookup {
    fn k(&self) -> u32 {
        self.k
    }

    fn accepted(&self, rng: &mut ChaCha8Rng, drafted: u32) -> u32 {
        (0..drafted).take_while(|_| rng.random::<f64>() < self.acceptance).count() as u32
    }

    fn draft_time(&self, draft: &BatchShape) -> f64 {
        match &self.cost {
            Some(c) if draft.decode_seqs > 0 => c.time(draft).total_s * self.k as f64,
            _ => 0.0,
        }
    }
}
