//! The result document (`--out results.json`): one typed format for measured and simulated runs,
//! and everything that reads one back.
//!
//! - [`plan`]: a run's plan as data;
//! - [`import`]: other tools' results (vLLM, GuideLLM, AIPerf) read into runs;
//! - [`ResultDoc`], [`Run`], [`Target`], [`CapacityReport`]: the document;
//! - [`ResultDoc::read`] checks `schema_version` (a newer major is refused with a clear error;
//!   files written before run ids and start times existed still read), [`ResultDoc::write`]
//!   writes atomically;
//! - [`Run::merge`]: runs of one plan (shards of one schedule) combined exactly: records
//!   concatenated on one clock with new ids (and, across separate runs, disjoint user and
//!   session ids), every distribution recomputed from all samples.
//!
//! Its JSON Schema is checked in at `schema/results.schema.json`; tests validate every document
//! the tool writes against it. Bump [`SCHEMA_VERSION`] on any incompatible change.

pub mod capacity;
pub mod comparison;
pub mod doc;
pub mod error;
pub mod import;
pub mod plan;
pub mod planning;
pub mod roofline;
pub mod run;
/// Engine types the document holds (a run's engine statistics, a plan's number formats), so that
/// readers of the document need not name the engine crate.
pub use goodput_engine::{Dtype, EngineStats, Scheduling};
pub use goodput_wire::server_metrics;
pub mod shards;
pub mod source;
pub mod time;
pub mod twin;
pub mod validation;

pub use capacity::{CapacityFinding, CapacityPoint, CapacityReport};
pub use doc::{COMPACT_ABOVE_RECORDS, ResultDoc, SCHEMA_VERSION, Tool};
pub use error::ResultError;
pub use plan::{Api, EnginePlan, RunPlan, TargetPlan, Timeouts};
pub use run::{Run, Target, summaries, summary_options};
pub use time::{format_rfc3339_ns, new_run_id, now_rfc3339, parse_rfc3339_ns, rfc3339_utc, unix_ns};
