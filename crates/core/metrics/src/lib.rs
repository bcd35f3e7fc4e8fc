//! goodput's metrics core: the per-request [`record::RequestRecord`] and every metric derived from
//! it (per request, per run). The result document that holds them is `goodput-results`.
//!
//! Pure and synchronous: no I/O, no clock. Every definition here is spelled out, with its formula,
//! in `docs/metrics.md`, and each has a unit test on values computed by hand.

pub mod confidence;
pub mod error;
pub mod events;
pub mod plausible;
pub mod record;
pub mod records;
pub mod redact;
pub mod request;
pub mod selfcheck;
pub mod sends;
pub mod sessions;
pub mod sketch;
pub mod slo;
pub mod stats;
pub mod steady;
pub mod stream;
pub mod summary;
pub mod tokens;
pub mod trend;
pub mod units;

pub use error::ParseError;
pub use record::{Attempt, ErrorClass, RequestError, RequestRecord, StopReason, TokenSource};
pub use records::{DEFAULT_RECORD_CAP, RecordsKept, RecordsMode};
pub use request::RequestMetrics;
pub use selfcheck::{AfterDone, Bookkeeping, RUNTIME_LAG_LIMIT_MS, RuntimeLag};
pub use sends::{ConnectionReuse, Sends};
pub use slo::{Slo, SloSummary, SloVerdict, Smoothing};
pub use stats::{DEFAULT_EXACT_LIMIT, Distribution, Estimate, EstimateMethod, PercentileMethod, Samples};
pub use stream::Collector;
pub use summary::{
    ClientVerdict, ClosedLoop, Edge, LoadCheck, Summary, SummaryOptions, Warning, WarningCode, Window, summarize,
};
