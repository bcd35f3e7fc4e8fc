//! The answer of `goodput plan`: every candidate deployment (GPU, tensor parallelism, weight
//! format, engine, mechanisms) with its simulated capacity under the SLO, its cost per million
//! tokens at an hourly price, and why it ranked where it did. Part of the result document
//! (the document's `plan`) so reports can draw it.

use goodput_engine::Dtype;
use goodput_workload::Shard;
use serde::{Deserialize, Serialize};

/// A ranked plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub model: String,
    /// The workload preset (`chat`, `enterprise`, `summarize`, `batch`), when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The workload in words (lengths, shared prefixes).
    pub workload: String,
    /// The SLO every candidate's capacity is searched under.
    pub slo: String,
    pub attainment_target: f64,
    /// Requests per second the deployment must serve (`--target-rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Most dollars per hour the deployment serving the target rate may cost (`--budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_per_hour: Option<f64>,
    /// The seed of every candidate's simulation (`--seed`).
    #[serde(default)]
    pub seed: u64,
    /// Candidates in the whole search grid (`--gpus × --tp × --dtype × --engines × --mechanisms`),
    /// whether this report holds them all or one shard's share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_size: Option<u32>,
    /// This report is shard I of N of the search (`--shard I/N`): it holds only the candidates
    /// whose grid index `k` has `k mod N = I`. Absent on a whole or merged search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Grid indices of the candidates a partial merge (`goodput merge --allow-partial`) lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_candidates: Vec<u32>,
    /// Ranked: the best first (cheapest per million output tokens that meets the SLO; without
    /// prices, the most goodput per GPU); candidates that cannot serve last.
    pub candidates: Vec<PlanCandidate>,
    /// Indices into `candidates` of the cost-vs-p99-latency Pareto front (cheaper or faster
    /// than every other), cheapest first.
    pub pareto: Vec<usize>,
    /// Seconds the search took (wall).
    pub elapsed_s: f64,
}

/// One candidate deployment and what the simulation said of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanCandidate {
    /// Its position in the search grid (the order `--gpus × --tp × --dtype × --engines ×
    /// --mechanisms` enumerates): the key by which shards deal out and merges put back candidates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_index: Option<u32>,
    pub gpu: String,
    pub tp: u32,
    pub dtype: Dtype,
    /// The engine whose defaults apply (`vllm`, `sglang`, `trtllm`).
    pub engine: String,
    /// The mechanism set (`baseline`, `spec`, `ngram`, `disagg`, …).
    pub mechanisms: String,
    /// GPUs one deployment of it takes.
    pub gpus: u32,
    /// It fits in memory (weights and at least some KV).
    pub fits: bool,
    /// Highest Poisson rate meeting the SLO at the attainment target, req/s; `None` when it does
    /// not fit or meets the SLO at no rate tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_per_gpu: Option<f64>,
    /// Requests completed per second in the step at capacity: what the deployment served. Below
    /// the capacity only where arrivals outran it (a loose SLO, such as the `batch` preset's),
    /// and the capacity is then this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_requests_per_s: Option<f64>,
    /// Output and total (input + output) tokens per second at that rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens_per_s: Option<f64>,
    /// Output tokens per second per GPU at that rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_s_per_gpu: Option<f64>,
    /// Share of the prompt tokens the prefix cache served at that rate (counted in the total
    /// tokens, not computed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_share: Option<f64>,
    /// p99 TTFT and TPOT at capacity, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p99_ms: Option<f64>,
    /// The SLO predicate that failed first above capacity (lowest pass rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// Which roofline bound most iterations hit at capacity: `compute` or `memory`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// Hourly price per GPU used, $; `None`: unknown (pass --price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_gpu_hour: Option<f64>,
    /// $ per million output tokens, and per million tokens in and out, at capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_m_output: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_m_total: Option<f64>,
    /// Deployments of it needed for the target rate, their GPUs, and their cost per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas_for_target: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_for_target: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour_for_target: Option<f64>,
    /// Hours of use after which buying a GPU costs less than renting it: purchase ÷ (hourly
    /// rent − own running cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub break_even_hours: Option<f64>,
    /// Why it ranked where it did, in a line.
    pub reason: String,
    /// The capacity search's steps (rate, attainment, p99 TTFT and TPOT, queue trend): the
    /// latency-vs-rate curve the plan page draws for the top candidates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<crate::capacity::CapacityPoint>,
}
