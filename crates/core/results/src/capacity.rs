//! A capacity search's answer as data: each step's point on the curve ([`CapacityPoint`]), the
//! report the document carries ([`CapacityReport`]), and what the search found as a typed value
//! ([`CapacityFinding`]) from which the renderer writes the report's sentence.

use serde::{Deserialize, Serialize};

/// One step of a capacity search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityPoint {
    pub rate: f64,
    pub attainment: f64,
    pub request_goodput: f64,
    pub token_goodput: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    /// Stopped early with requests piling up, or the queue kept growing through the step.
    pub saturated: bool,
    /// Stopped early (measuring only): more requests in flight than the SLO allows.
    pub stopped_early: bool,
    /// 95% Wilson interval of the attainment.
    pub attainment_ci: Option<[f64; 2]>,
    /// How much longer the step's last request waited for its first token than its first did
    /// (fitted; ms): the queue's growth.
    pub queue_growth_ms: Option<f64>,
    /// The queue's trend over the step, judged against what a run of ten minutes would allow
    /// (`steady`, `growing`, or `unclear` where the step was too short to say and was run again
    /// longer), and the step's length, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_trend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_s: Option<f64>,
    /// Requests sent per second, and whether the load generator kept up with its schedule.
    pub achieved_rate: Option<f64>,
    pub verdict: goodput_metrics::ClientVerdict,
}

/// The answer of `goodput capacity`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    pub rate: Option<f64>,
    pub uncertainty: Option<f64>,
    pub per_gpu: Option<f64>,
    pub attainment_target: f64,
    pub slo: String,
    pub answer: String,
    pub notes: Vec<String>,
    pub curve: Vec<CapacityPoint>,
}

/// What a capacity search found, before it is put into words.
#[derive(Clone, Debug, PartialEq)]
pub enum CapacityFinding {
    /// No request succeeded in the last step: the target could not be used. The failures of that
    /// step by class.
    Unusable { failures: Vec<(String, u64)> },
    /// The highest passing and lowest failing rate tried.
    Bracketed { pass: f64, fail: f64 },
    /// Every rate tried passed, up to `pass`, within `max_steps`.
    AtLeast { pass: f64, max_steps: u32 },
    /// Even the lowest rate tried failed.
    Below { fail: f64 },
    /// No step completed.
    Nothing,
}
