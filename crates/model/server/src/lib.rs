//! The engine model behind an OpenAI-compatible HTTP server, in real time.
//!
//! `goodput serve` runs it on a port; `goodput bench` with no `--url` starts it in-process on an
//! ephemeral loopback port and measures it like any other server. The HTTP layer talks to the
//! engine only through [`driver::EngineHandle`] (submit, abort, gauges); request validation
//! ([`openai`]) is separate from scheduling (the engine crate).
//!
//! Streams are shaped like vLLM's: a chunk per token (the role first for chat), the finish reason
//! on the last token, a usage chunk when asked, then `[DONE]`. The generated text is made of the
//! tokenizer's own single-token words, so a client counting with the same tokenizer agrees with
//! `usage` exactly.

pub mod app;
pub mod driver;
pub mod embedded;
pub mod metrics;
pub mod openai;
mod priority;
pub mod state;
mod stream;

pub use app::{app, serve};
pub use driver::{EngineHandle, TokenEvent};
pub use embedded::{EmbedError, Embedded};
pub use state::{AppState, ServerConfig, Trace};
