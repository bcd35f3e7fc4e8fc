//! goodput's engine model: a deterministic discrete-event model of an LLM serving engine.
//!
//! - [`catalog`]: GPUs and model architectures (data files read at start-up) and derived sizes;
//! - [`config`]: an engine configuration, its validation and memory plan;
//! - [`cost`]: the roofline step-time model;
//! - [`efficiency`]: its efficiencies by GPU family, engine and number format;
//! - [`kv`]: the paged KV cache (block pool, block tables, the KV manager and its prefix cache)
//!   and the allocation rules it applies (paged, or reserved at admission: one file each);
//! - [`preset`]: vLLM's, SGLang's and TensorRT-LLM's defaults;
//! - [`sched`]: scheduling policies over the engine's queues;
//! - [`speculate`]: speculative decoding as a step strategy (none, draft model, prompt lookup);
//! - [`engine`]: one replica: intake, iterations, statistics;
//! - [`fasthash`]: the hasher of the engine's integer-keyed maps;
//! - [`cluster`]: deployments of several engines (replicas behind a router, prefill/decode
//!   disaggregation) behind the same trait;
//! - [`topology`]: how a deployment is put together, as data (router, link, disaggregation);
//! - [`serving`]: what a driver sees of an engine, one or a deployment ([`ServingEngine`],
//!   [`build`]).
//!
//! Pure and synchronous: no async, no I/O beyond parsing given text, no wall clock. Two drivers
//! run it: in real time behind an OpenAI-compatible HTTP server (`goodput-server`), and in
//! virtual time (`goodput-sim`).

pub mod catalog;
pub mod cluster;
pub mod config;
pub mod cost;
pub mod efficiency;
pub mod engine;
pub mod error;
pub mod fasthash;
pub mod fitted;
pub mod frontend;
pub mod hint;
pub mod kv;
pub mod named;
pub mod preset;
pub mod sched;
pub mod serving;
pub mod spec;
pub mod speculate;
pub mod topology;

pub use catalog::{Catalog, Dtype, Gpu, ModelArch};
pub use cluster::build;
pub use config::Preset;
pub use config::{
    Batching, Efficiency, EngineConfig, KvAlloc, MemoryPlan, Named, Prealloc, Scheduling, SpecMethod, Speculative,
};
pub use cost::{BatchShape, Roofline, StepCost, StepTime};
pub use efficiency::EfficiencyTable;
pub use engine::Engine;
pub use error::EngineError;
pub use fitted::{Fitted, FittedStep};
pub use hint::prefetch;
pub use kv::block_hashes;
pub use preset::Given;
pub use serving::{
    Emit, EngineRequest, EngineStats, Gauges, Reject, SeqId, ServingEngine, StepOut, output_length, reasoned_length,
};
pub use spec::EngineSpec;
pub use topology::{Disaggregation, Link, Router, TransferStats};
