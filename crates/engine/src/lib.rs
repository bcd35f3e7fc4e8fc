//! goodput's engine model: a deterministic discrete-event model of an LLM serving engine.
//!
//! - [`catalog`]: GPUs and model architectures (data files read at start-up) and derived sizes;
//! - [`config`]: an engine configuration, its validation and memory plan;
//! - [`cost`]: the roofline step-time model;
//! - [`kv`]: the paged KV block allocator;
//! - [`engine`]: continuous batching (scheduler, preemption, statistics).
//!
//! Pure and synchronous: no async, no I/O beyond parsing given text, no wall clock. Two drivers
//! run it: in real time behind an OpenAI-compatible HTTP server (`goodput-server`), and in
//! virtual time (`goodput-sim`).

pub mod catalog;
pub mod config;
pub mod cost;
pub mod engine;
pub mod kv;

pub use catalog::{Catalog, Dtype, Gpu, ModelArch};
pub use config::{Efficiency, EngineConfig, MemoryPlan};
pub use engine::{Emit, Engine, EngineRequest, EngineStats, Gauges, SeqId, StepOut, output_length};

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
    #[error("the waiting queue is full ({limit} requests)")]
    QueueFull { limit: usize },
}
