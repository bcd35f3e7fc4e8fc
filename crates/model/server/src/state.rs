//! The server's shared state: settings, the engine thread's handle, the tokenizer, metrics and
//! traces.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use goodput_engine::{EngineConfig, EngineError};
use goodput_tokenizer::Tokenizer;
use serde::Serialize;

use crate::driver::EngineHandle;
use crate::metrics;

/// HTTP-side settings.
#[derive(Clone, Debug, Serialize)]
pub struct ServerConfig {
    /// The model id served (`GET /v1/models`); requests for any other model get 404.
    pub model_name: String,
    /// Bodies larger than this are refused with 413.
    pub max_body_bytes: usize,
    /// Seeds the output lengths of requests without `ignore_eos` and the generated words.
    pub seed: u64,
    /// Keep every token's emit time per request (for tests that hold clients against the truth).
    #[serde(skip)]
    pub trace: bool,
    /// Nice value of the embedded server's threads (its runtime and engine thread), so that a load
    /// generator on the same machine keeps precedence (0: unchanged).
    #[serde(skip)]
    pub nice: i32,
    /// A connection that has begun a request but not sent all of its header within this long is
    /// closed (slowloris).
    #[serde(skip)]
    pub header_timeout: std::time::Duration,
    /// How long the served model thinks before it answers, per request (`serve
    /// --reasoning-tokens`; drawn from each request's seed) when the request does not say
    /// (`reasoning_tokens`). `None`: it answers at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<goodput_workload::LengthDist>,
}

/// The default of [`ServerConfig::header_timeout`].
pub const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl ServerConfig {
    pub fn new(model_name: impl Into<String>) -> Self {
        ServerConfig {
            model_name: model_name.into(),
            max_body_bytes: 16 << 20,
            seed: 0,
            trace: false,
            nice: 0,
            header_timeout: HEADER_TIMEOUT,
            reasoning_tokens: None,
        }
    }
}

/// When a request arrived and when each of its tokens was handed to the connection.
#[derive(Clone, Debug)]
pub struct Trace {
    pub id: u64,
    pub arrived: Instant,
    pub prompt_tokens: u64,
    /// One entry per chunk written, with the tokens it carried.
    pub emits: Vec<(Instant, u32)>,
    /// For each entry of `emits`: when the engine released its tokens (the end of the iteration
    /// they came from, as paced by the driver); `emits[k].0 − released[k]` is the emit-time error.
    pub released: Vec<Instant>,
}

pub(crate) struct Inner {
    pub(crate) engine: EngineHandle,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) cfg: ServerConfig,
    pub(crate) max_context: u64,
    pub(crate) metrics: metrics::ServerMetrics,
    pub(crate) next_id: AtomicU64,
    pub(crate) created: u64,
    pub(crate) traces: Mutex<Vec<Trace>>,
}

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

impl AppState {
    /// Builds the deployment `engine` describes (one engine, replicas, or prefill and decode
    /// pools), starts its thread and wraps it for the handlers.
    pub fn new(engine: &EngineConfig, tokenizer: Tokenizer, cfg: ServerConfig) -> Result<Self, EngineError> {
        let max_context = engine.context();
        Ok(AppState(Arc::new(Inner {
            engine: EngineHandle::start(goodput_engine::build(engine)?),
            tokenizer,
            cfg,
            max_context,
            metrics: metrics::ServerMetrics::default(),
            next_id: AtomicU64::new(0),
            created: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            traces: Mutex::new(Vec::new()),
        })))
    }

    pub fn engine(&self) -> &EngineHandle {
        &self.0.engine
    }

    /// Per-request emit times (when `ServerConfig::trace` is on).
    pub fn traces(&self) -> Vec<Trace> {
        self.0.traces.lock().expect("traces").clone()
    }
}
