//! goodput's measuring shell: drive load at an OpenAI-compatible streaming endpoint and record
//! every request with the time each content event's bytes arrived.
//!
//! - [`sse`]: our incremental Server-Sent Events decoder;
//! - [`openai`]: request bodies and chunk classification;
//! - [`http`]: the pooled client, the run's monotonic clock, cancellation;
//! - [`exchange`]: one request, measured and classified;
//! - [`bookkeeping`]: token counting and record finishing, off the load loop;
//! - [`runner`]: drives the load state machine on the wall clock.

pub mod bookkeeping;
pub mod exchange;
pub mod http;
pub mod openai;
pub mod priority;
pub mod runner;
pub mod sse;

pub use exchange::{Endpoint, Exchange, execute};
pub use goodput_metrics::StopReason;
pub use goodput_workload::Load;
pub use http::{Cancel, CancelHandle, Clock, HttpClient, Timeouts, cancel_pair};
pub use openai::Api;
pub use runner::{Counters, Observer, RunConfig, RunOutcome, run};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Url(String),
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("TLS: {0}")]
    Tls(String),
}
