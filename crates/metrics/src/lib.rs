//! goodput's metrics core: the per-request [`record::RequestRecord`], every metric derived from
//! it (per request, per run), and the result document written to disk.
//!
//! Pure and synchronous: no I/O, no clock. Every definition here is spelled out, with its formula,
//! in `docs/metrics.md`, and each has a unit test on values computed by hand.

pub mod confidence;
pub mod record;
pub mod request;
pub mod result;
pub mod slo;
pub mod stats;
pub mod summary;
pub mod tokens;
pub mod trend;
pub mod units;

pub use record::{Attempt, ErrorClass, RequestError, RequestRecord, StopReason, TokenSource};
pub use request::RequestMetrics;
pub use result::{ResultDoc, Run, Target};
pub use slo::{Slo, SloSummary, Smoothing};
pub use stats::{Distribution, PercentileMethod, Samples};
pub use summary::{Edge, Summary, SummaryOptions, Verdict, Window, summarize};
