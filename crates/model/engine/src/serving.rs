//! What a driver sees of an engine, one replica or a deployment: the [`ServingEngine`] trait,
//! the request it takes ([`EngineRequest`]), what it hands back ([`Emit`], [`StepOut`]), why it
//! refuses a request ([`Reject`]), and its gauges and statistics.

use serde::{Deserialize, Serialize};

use crate::cost::StepTime;
use crate::kv::CacheCounters;

/// The caller's id for a sequence (unique among live sequences).
pub type SeqId = u64;

/// What to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineRequest {
    /// Prompt length in tokens.
    pub prompt_tokens: u32,
    /// Tokens to generate before the sequence stops (its `max_tokens`, or an earlier stop).
    pub output_tokens: u32,
    /// The `max_tokens` it asked for (what a pre-allocating engine reserves for); 0: as
    /// `output_tokens`.
    pub max_tokens: u32,
    /// The request's own random seed (speculative decoding draws its accepted tokens from it).
    pub seed: u64,
    /// The seed of its front-end latency draw, where the driver has one that names the request
    /// the same however the run is split (a closed-loop user's request is its user and scheduled
    /// time: session ids are dealt in arrival order, which shards do not share); 0: `seed`.
    pub frontend_seed: u64,
    /// Its prompt's KV arrives with it and its first token is already generated (a decode
    /// instance of a disaggregated deployment takes over from a prefill instance).
    pub kv_ready: bool,
    /// Chained hashes of the sequence's full blocks at the engine's block size (prompt, then
    /// output as far as its content is known): equal leading hashes, equal prefixes. Empty when
    /// unknown (nothing is then reused).
    pub block_hashes: Vec<u64>,
}

/// How many tokens a request generates: all of `max_tokens` when it must (`ignore_eos`), else its
/// natural stop, drawn uniformly from `min..=max` from the request's own seed. The real-time
/// server and the simulator both call this, so they stop a request at the same length.
pub fn output_length(seed: u64, min: u32, max: u32, ignore_eos: bool) -> u32 {
    use rand::{Rng, SeedableRng};
    let max = max.max(1);
    if ignore_eos {
        return max;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(0x006e_6174_7572_616c);
    rng.random_range(min.clamp(1, max)..=max)
}

/// A reasoning request's lengths: it thinks `reasoning` tokens (at most `max`), then answers at
/// its natural length within what `max` leaves (`min` counts both, as a server's `min_tokens`
/// does). Returns `(reasoning, total)`; `total − reasoning` is the answer (0: the budget ran out
/// while it was still thinking).
pub fn reasoned_length(seed: u64, min: u32, max: u32, reasoning: u32, ignore_eos: bool) -> (u32, u32) {
    let max = max.max(1);
    let r = reasoning.min(max);
    if r == max {
        return (r, max);
    }
    let answer = output_length(seed, min.saturating_sub(r), max - r, ignore_eos);
    (r, r + answer)
}

/// Tokens delivered to one sequence at the end of an iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emit {
    pub seq: SeqId,
    pub tokens: u32,
    /// The sequence has generated all its tokens and left the engine.
    pub finished: bool,
}

/// Which phases an iteration mixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Prefill,
    Decode,
    Mixed,
}

/// One iteration.
#[derive(Clone, Debug, Default)]
pub struct StepOut {
    /// When it started and ended, seconds.
    pub start: f64,
    pub end: f64,
    pub time: StepTime,
    pub kind: Option<StepKind>,
    pub emitted: Vec<Emit>,
    pub preempted: Vec<SeqId>,
    pub batch_seqs: u32,
    pub batch_tokens: u64,
}

/// Running counters and time-weighted averages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineStats {
    pub steps: u64,
    pub prefill_steps: u64,
    pub decode_steps: u64,
    pub mixed_steps: u64,
    pub compute_bound_steps: u64,
    pub memory_bound_steps: u64,
    /// Σ step durations, seconds.
    pub busy_s: f64,
    pub prefill_tokens: u64,
    pub decode_tokens: u64,
    pub preemptions: u64,
    pub rejected: u64,
    /// Time-weighted over busy time.
    pub mean_running: f64,
    pub max_running: u32,
    pub mean_waiting: f64,
    pub mean_kv_utilization: f64,
    pub max_kv_utilization: f64,
    /// Share of allocated KV slots not holding a token (internal fragmentation), time-weighted.
    pub mean_kv_fragmentation: f64,
    /// Share of reserved (allocated) KV slots holding token states, time-weighted: paged
    /// allocation wastes only each sequence's last block, pre-allocation the unused reservation.
    #[serde(default)]
    pub mean_kv_used_share: f64,
    /// Time-weighted mean of KV tokens reserved and of KV tokens holding token states.
    #[serde(default)]
    pub mean_kv_reserved_tokens: f64,
    #[serde(default)]
    pub mean_kv_stored_tokens: f64,
    /// Sequences the KV cache holds at once when each reserves its most (pre-allocation by
    /// `max_model_len`); `None` when it depends on the lengths (paged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_seq_capacity: Option<u64>,
    /// Speculative decoding: verified steps (one per sequence per iteration), tokens drafted and
    /// accepted, and the time the draft model took.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spec_drafts: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spec_draft_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spec_accepted_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub spec_draft_s: f64,
    /// Iterations the real-time driver started more than 5 ms late (the host was busy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_steps: u64,
    /// Prefix-cache lookups, hits and evictions (blocks), when prefix caching is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<CacheCounters>,
    /// Downsampled state over time, one row per sample: `[t_s, running, waiting,
    /// kv_utilization, kv_used_share, preemptions, prefix_queried_tokens, prefix_hit_tokens,
    /// spec_verified_steps, spec_drafted_tokens, spec_accepted_tokens, generated_tokens]`; the
    /// last seven are cumulative counters since the start (rates are their differences).
    /// Documents written before the counters existed have the first five columns only.
    pub series: Vec<Vec<f64>>,
    /// A deployment of several engines: each engine's own statistics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<EngineStats>,
    /// What this engine is in its deployment (`replica 0`, `prefill 1`, `decode 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Share of the run this engine was busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// KV hand-overs of a disaggregated deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfers: Option<crate::topology::TransferStats>,
    #[serde(skip)]
    pub(crate) series_every: u64,
    /// Output tokens emitted so far (the series' `generated_tokens` column).
    #[serde(skip)]
    pub(crate) generated: u64,
    #[serde(skip)]
    pub(crate) sums: [f64; 7],
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f(x: &f64) -> bool {
    *x == 0.0
}

impl EngineStats {
    /// Speculative decoding: tokens per verified step (accepted drafts plus the one sampled).
    pub fn mean_accepted_length(&self) -> Option<f64> {
        (self.spec_drafts > 0).then(|| 1.0 + self.spec_accepted_tokens as f64 / self.spec_drafts as f64)
    }

    /// Speculative decoding: the share of drafted tokens accepted.
    pub fn acceptance_rate(&self) -> Option<f64> {
        (self.spec_draft_tokens > 0).then(|| self.spec_accepted_tokens as f64 / self.spec_draft_tokens as f64)
    }

    /// Share of steps that were compute-bound.
    pub fn compute_bound_share(&self) -> f64 {
        if self.steps == 0 { 0.0 } else { self.compute_bound_steps as f64 / self.steps as f64 }
    }

    pub(crate) fn finish_averages(&mut self) {
        if self.busy_s > 0.0 {
            self.mean_running = self.sums[0] / self.busy_s;
            self.mean_waiting = self.sums[1] / self.busy_s;
            self.mean_kv_utilization = self.sums[2] / self.busy_s;
            self.mean_kv_fragmentation = self.sums[3] / self.busy_s;
            self.mean_kv_used_share = self.sums[4] / self.busy_s;
            self.mean_kv_reserved_tokens = self.sums[5] / self.busy_s;
            self.mean_kv_stored_tokens = self.sums[6] / self.busy_s;
        }
    }
}

/// A point-in-time view for gauges (`/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Gauges {
    pub running: u32,
    pub waiting: u32,
    pub kv_utilization: f64,
    pub preemptions: u64,
    /// Prefix-cache tokens looked up and found (counters; whole blocks).
    pub prefix_queried_tokens: u64,
    pub prefix_hit_tokens: u64,
    /// Speculative decoding counters: verified steps, drafted and accepted tokens.
    pub spec_drafts: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted_tokens: u64,
}

/// What a driver sees of an engine: requests in, tokens out, and when to look again. Time is
/// the driver's (seconds on any clock that only moves forward).
///
/// A driver's loop: at time `t`, [`complete`](ServingEngine::complete) (tokens of iterations that
/// ended), deliver them, [`submit`](ServingEngine::submit) what arrived,
/// [`start`](ServingEngine::start), then wait until [`next_event`](ServingEngine::next_event)
/// or the next arrival.
pub trait ServingEngine: Send {
    /// Takes a request in at `now`. `id` must not be live already.
    fn submit(&mut self, id: SeqId, r: EngineRequest, now: f64) -> Result<(), Reject>;
    /// Drops a sequence (its client went away), freeing its blocks. Unknown ids are ignored.
    fn abort(&mut self, id: SeqId);
    /// Appends to `out` the tokens of every iteration that has ended by `now`.
    fn complete(&mut self, now: f64, out: &mut Vec<Emit>);
    /// Starts what can start at `now` (an idle engine with work begins an iteration).
    fn start(&mut self, now: f64);
    /// When something next happens without outside input (an iteration ends, a request's
    /// intake finishes); `None` when nothing will.
    fn next_event(&self) -> Option<f64>;
    /// Anything taken in and not finished.
    fn has_work(&self) -> bool;
    /// The block size its prefix cache hashes requests at, when it reuses prefixes (requests
    /// then carry [`EngineRequest::block_hashes`]).
    fn prefix_block_size(&self) -> Option<u32>;
    fn gauges(&self) -> Gauges;
    /// Statistics so far (averages over busy time).
    fn stats(&self) -> EngineStats;
}

/// Why the engine refused a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    #[error("the prompt and max_tokens must both be at least 1 token")]
    Empty,
    #[error("prompt plus max_tokens is {tokens} tokens, over the model's context of {limit}")]
    OverContext { tokens: u64, limit: u64 },
    #[error(
        "the prompt has {tokens} tokens, over --max-batched-tokens {limit} (without chunked prefill a prompt must fit in one iteration)"
    )]
    OverBudget { tokens: u64, limit: u64 },
    #[error("the request needs {tokens} tokens of KV cache but the engine holds only {limit}")]
    OverCapacity { tokens: u64, limit: u64 },
    #[error("the waiting queue is full ({limit} requests waiting; --max-waiting raises the bound)")]
    QueueFull { limit: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_then_the_answer_within_max_tokens() {
        // forced lengths: 512 reasoning and a 64-token answer in a budget of 576
        assert_eq!(reasoned_length(1, 576, 576, 512, true), (512, 576));
        // the budget runs out while thinking: no answer
        assert_eq!(reasoned_length(1, 0, 300, 512, true), (300, 300));
        // no reasoning: the plain output length
        assert_eq!(reasoned_length(7, 1, 40, 0, false), (0, output_length(7, 1, 40, false)));
        // a natural stop: the answer is drawn within what is left, after all the reasoning
        for seed in 0..50 {
            let (r, total) = reasoned_length(seed, 1, 100, 60, false);
            assert_eq!(r, 60);
            assert!((61..=100).contains(&total), "{total}");
        }
    }
}
