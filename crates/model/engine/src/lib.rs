//! goodput's engine model: a deterministic discrete-event model of an LLM serving engine.
//!
//! - [`catalog`]: GPUs and model architectures (data files read at start-up) and derived sizes;
//! - [`config`]: an engine configuration, its validation and memory plan;
//! - [`cost`]: the roofline step-time model;
//! - [`kv`]: the paged KV cache (block pool, block tables, the KV manager and its prefix cache);
//! - [`preset`]: vLLM's, SGLang's and TensorRT-LLM's defaults;
//! - [`sched`]: scheduling policies over the engine's queues;
//! - [`engine`]: one replica: intake, iterations, statistics;
//! - [`fasthash`]: the hasher of the engine's integer-keyed maps;
//! - [`cluster`]: deployments of several engines (replicas behind a router, prefill/decode
//!   disaggregation) behind the same trait;
//! - [`ServingEngine`]: what a driver sees of an engine, one or a deployment ([`build`]).
//!
//! Pure and synchronous: no async, no I/O beyond parsing given text, no wall clock. Two drivers
//! run it: in real time behind an OpenAI-compatible HTTP server (`goodput-server`), and in
//! virtual time (`goodput-sim`).

pub mod catalog;
pub mod cluster;
pub mod config;
pub mod cost;
pub mod engine;
pub mod fasthash;
pub mod kv;
pub mod preset;
pub mod sched;
pub mod spec;

pub use catalog::{Catalog, Dtype, Gpu, ModelArch};
pub use cluster::{Disaggregation, Link, Router, TransferStats, build};
pub use config::{
    Batching, Efficiency, EngineConfig, KvAlloc, MemoryPlan, Named, Prealloc, Scheduling, SpecMethod, Speculative,
};
pub use cost::{BatchShape, Roofline, StepCost, StepTime};
pub use engine::{Emit, Engine, EngineRequest, EngineStats, Gauges, StepOut, output_length};
pub use kv::block_hashes;
pub use preset::{Given, Preset};
pub use spec::EngineSpec;

/// The caller's id for a sequence (unique among live sequences).
pub type SeqId = u64;

/// Asks the CPU to bring `x`'s cache line in ahead of its use: the engine's walks (running
/// sequences in admission order, the prefix cache's least recently used blocks) and its drivers'
/// per-token bookkeeping go where no hardware prefetcher looks. A hint only: nothing is read, and
/// results cannot change.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: prefetching is a hint; it reads nothing and cannot fault
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
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

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("unknown {what} `{name}`; known: {known}")]
    Unknown { what: &'static str, name: String, known: String },
    #[error("{file}: {message}")]
    Spec { file: String, message: String },
    #[error("{0}")]
    Config(String),
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
