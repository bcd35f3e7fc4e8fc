//! The twin file (`goodput fit --out twin.json`): an engine model of one measured server, every
//! fitted parameter with its uncertainty and whether the training runs identify it, the runs
//! it was fitted to with its error on each, and the ranges they covered. JSON with a
//! `schema_version` (checked in at `schema/twin.schema.json`).

use goodput_engine::Scheduling;
use serde::{Deserialize, Serialize};

/// The twin file's format version: readers refuse a larger one.
pub const TWIN_SCHEMA_VERSION: u32 = 1;

/// KV a twin's server is assumed to hold when no run filled it (tokens): large enough never to
/// bind, and named as not identified.
pub const UNSEEN_KV_TOKENS: u64 = 1 << 24;

/// A fitted number: its value, its standard error (bootstrap), and whether the training runs
/// identify it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub value: f64,
    pub stderr: f64,
    pub identified: bool,
}

/// A whole-number setting the runs show, and whether they pin it (`false`: at least `value`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub value: u64,
    pub identified: bool,
}

/// The step cost: seconds per iteration as its kind's fixed cost (decode-only or prefilling) +
/// per prompt token prefilled + per sequence decoding + per token of context those sequences
/// attend to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepParams {
    /// The fixed cost of an iteration that only decodes.
    pub step_overhead_s: Param,
    /// The fixed cost of an iteration that prefills (bound by compute where a decode is bound
    /// by reading the weights: the two do not add up).
    pub prefill_overhead_s: Param,
    pub per_prefill_token_s: Param,
    pub per_decode_seq_s: Param,
    pub per_context_token_s: Param,
    /// Root-mean-square error of the fitted iteration times, seconds, over `iterations`.
    pub rmse_s: f64,
    pub iterations: usize,
}

/// The latency the server adds outside its engine (HTTP, tokenization, detokenization): a fixed
/// part and a part per prompt token, and the spread around them, from `requests` that found it
/// idle.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrontEnd {
    pub latency_s: Param,
    /// Latency per prompt token (tokenization), seconds.
    #[serde(default)]
    pub per_prompt_token_s: f64,
    pub jitter_s: f64,
    pub requests: usize,
}

/// How the server schedules.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchedulerParams {
    /// The most sequences it runs at once.
    pub max_num_seqs: Limit,
    /// `prefill-first` (prefills stall decodes) or `chunked` (they share iterations).
    pub scheduling: Scheduling,
    pub scheduling_identified: bool,
    /// The most prompt tokens one iteration computes.
    pub max_batched_tokens: Limit,
    /// Tokens per streamed event.
    pub tokens_per_event: f64,
}

/// The ranges the training runs covered: predictions outside them extrapolate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ranges {
    /// Closed-loop users, lowest and highest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<[u64; 2]>,
    /// Open-loop rates, req/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<[f64; 2]>,
    pub prompt_tokens: [u64; 2],
    pub output_tokens: [u64; 2],
    /// The most sequences seen generating together.
    pub running: u64,
}

/// A training run and how well the twin reproduces it (predicted ÷ measured).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingRun {
    pub file: String,
    pub run_id: String,
    /// Its load, in words.
    pub load: String,
    pub requests: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_mean_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_mean_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_ratio: Option<f64>,
}

/// The twin file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Twin {
    pub schema_version: u32,
    /// Always `goodput-twin`.
    pub kind: String,
    /// The goodput version that fitted it, and when (RFC 3339 UTC).
    pub tool_version: String,
    pub created_at: String,
    /// The server the runs measured: its URL (or target) and the model requested.
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub step: StepParams,
    pub front_end: FrontEnd,
    pub scheduler: SchedulerParams,
    /// KV the server holds, tokens (not identified unless a run filled it).
    pub kv_tokens: Limit,
    /// The longest prompt plus output seen, tokens: the context the twin accepts.
    pub context_tokens: u64,
    pub training: Vec<TrainingRun>,
    pub ranges: Ranges,
    /// What the training runs could not pin down, in words.
    pub unidentified: Vec<String>,
    /// What makes the twin doubtful, in words: training runs it misses by more than
    /// [`TRAINING_DISAGREES`] (the runs disagree with each other: the server's speed changed
    /// between them, or it does what the twin does not model).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A twin that misses one of its own training runs' mean TTFT, mean TPOT or output throughput by
/// more than this fraction warns.
pub const TRAINING_DISAGREES: f64 = 0.25;

/// A twin file that cannot be used: the file, and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TwinFileError {
    pub path: String,
    pub message: String,
}

impl Twin {
    /// Reads and checks a twin file.
    pub fn parse(path: &str, text: &str) -> Result<Twin, TwinFileError> {
        let err = |message: String| TwinFileError { path: path.into(), message };
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        if v.get("kind").and_then(|k| k.as_str()) != Some("goodput-twin") {
            return Err(err("not a goodput twin file (write one with goodput fit RUN.json --out twin.json)".into()));
        }
        match v.get("schema_version").and_then(|s| s.as_u64()) {
            Some(n) if n > TWIN_SCHEMA_VERSION as u64 => {
                return Err(err(format!(
                    "written by a newer goodput (twin schema version {n}; this one reads {TWIN_SCHEMA_VERSION}): upgrade goodput"
                )));
            }
            None => return Err(err("no schema_version".into())),
            _ => {}
        }
        serde_json::from_value(v).map_err(|e| err(format!("not a valid twin: {e}")))
    }
}
