//! An engine fitted to a measured server (the digital twin, `goodput fit`): its step cost as a
//! linear function of what an iteration holds, the KV and context it was seen to take, and the
//! latency its front end (HTTP, tokenization, detokenization) adds to each request, with its
//! jitter. An engine configuration carrying one prices iterations with [`FittedStep`] (its
//! `StepCost` is in the `cost` module) instead of the roofline, and takes its memory plan from
//! `kv_tokens`.

use serde::{Deserialize, Serialize};

/// Seconds per iteration: its kind's fixed cost (`overhead` when it only decodes,
/// `prefill_overhead` when it prefills) `+ per_prefill_token × prompt tokens computed +
/// per_decode_seq × sequences decoding + per_context_token × context they attend to`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FittedStep {
    pub overhead_s: f64,
    pub prefill_overhead_s: f64,
    pub per_prefill_token_s: f64,
    pub per_decode_seq_s: f64,
    pub per_context_token_s: f64,
}

/// What a twin replaces in an engine configuration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fitted {
    pub step: FittedStep,
    /// KV the server holds, tokens.
    pub kv_tokens: u64,
    /// The longest prompt plus output it accepts, tokens.
    pub context_tokens: u64,
    /// Latency the front end adds before a request reaches the scheduler: mean and standard
    /// deviation, seconds.
    pub frontend_s: f64,
    #[serde(default)]
    pub frontend_per_token_s: f64,
    pub frontend_jitter_s: f64,
}

impl Fitted {
    /// The front-end latency of a request of `prompt` tokens drawn with `seed`: log-normal with
    /// the fitted mean (fixed part plus per-token part) and standard deviation, so that it is
    /// never negative and its mean is the fitted one however large the jitter.
    pub fn frontend_delay(&self, prompt: u64, seed: u64) -> f64 {
        let mean = self.frontend_s + self.frontend_per_token_s * prompt as f64;
        crate::frontend::front_end_delay(mean, self.frontend_jitter_s, seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{BatchShape, StepCost};

    #[test]
    fn step_time_by_hand() {
        let f = FittedStep {
            overhead_s: 5e-3,
            prefill_overhead_s: 1e-3,
            per_prefill_token_s: 1e-5,
            per_decode_seq_s: 2e-4,
            per_context_token_s: 1e-7,
        };
        let b = BatchShape { decode_seqs: 3, decode_context: 1000, prefill_tokens: 200, ..BatchShape::default() };
        // a prefilling iteration: 1 ms + 2 ms + 0.6 ms + 0.1 ms
        assert!((f.time(&b).total_s - 3.7e-3).abs() < 1e-15);
        // decode only: 5 ms + 0.6 ms + 0.1 ms
        let d = BatchShape { prefill_tokens: 0, ..b };
        assert!((f.time(&d).total_s - 5.7e-3).abs() < 1e-15);
    }

    #[test]
    fn front_end_jitter_has_the_fitted_mean_and_spread() {
        let f = Fitted {
            step: FittedStep {
                overhead_s: 0.0,
                prefill_overhead_s: 0.0,
                per_prefill_token_s: 0.0,
                per_decode_seq_s: 0.0,
                per_context_token_s: 0.0,
            },
            kv_tokens: 1,
            context_tokens: 1,
            frontend_s: 4e-3,
            frontend_per_token_s: 1e-5,
            frontend_jitter_s: 1e-3,
        };
        // 4 ms + 100 tokens × 10 µs = 5 ms
        let d: Vec<f64> = (0..20_000).map(|s| f.frontend_delay(100, s)).collect();
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
        assert!((mean - 5e-3).abs() < 3e-5 && (sd - 1e-3).abs() < 5e-5, "{mean} {sd}");
        assert!(d.iter().all(|&x| x > 0.0));
        assert_eq!(f.frontend_delay(100, 3), f.frontend_delay(100, 3), "deterministic per seed");
    }
}
