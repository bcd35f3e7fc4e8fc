//! goodput's measuring shell: drive load at an OpenAI-compatible streaming endpoint and record
//! every request with the time each content event's bytes arrived.
//!
//! - [`sse`]: our incremental Server-Sent Events decoder;
//! - [`openai`]: request bodies and chunk classification;
//! - [`http`]: the pooled client, the run's monotonic clock, cancellation;
//! - [`url`]: a server's address (base, API root, query) and each request's URI;
//! - [`tls`]: the connector, TCP and TLS together under the connect timeout;
//! - [`conn`]: connections that count the requests they carried;
//! - [`arrival`]: when a response's bytes arrived, from the kernel's receive stamps;
//! - [`closing`]: whether the server took a request that failed before any response;
//! - [`exchange`]: one request, measured and classified;
//! - [`reasoning`]: a reasoning stream's thinking told from its answer (fields or `<think>` tags);
//! - [`bookkeeping`]: token counting and record finishing, off the load loop;
//! - [`lag`]: the runtime-lag probe (how late the async runtime runs what is ready);
//! - [`limits`]: the client's own limits (open files), raised and checked before a run;
//! - [`runner`]: drives the load state machine on the wall clock;
//! - [`prometheus`]: the Prometheus text exposition read, engines' names mapped to common series;
//! - [`scrape`]: the server's Prometheus metrics, scraped beside the load (`--scrape-metrics`).

pub mod arrival;
pub mod bookkeeping;
pub mod closing;
pub mod conn;
pub mod error;
pub mod exchange;
pub mod http;
pub mod lag;
pub mod limits;
pub mod openai;
pub mod priority;
pub mod prometheus;
pub mod reasoning;
pub mod runner;
pub mod scrape;
pub mod sse;
pub mod tls;
pub mod url;

pub use error::{ClientError, UrlError};
pub use exchange::{Endpoint, Exchange, execute};
pub use goodput_metrics::StopReason;
pub use goodput_workload::Load;
pub use http::{Cancel, CancelHandle, Clock, HttpClient, Timeouts, cancel_pair};
pub use openai::Api;
pub use runner::{Counters, Observer, RecordSink, RunConfig, RunOutcome, run, run_into};
pub use scrape::{ScrapeConfig, Scraper};
