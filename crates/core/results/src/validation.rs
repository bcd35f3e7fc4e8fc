//! A twin's validation (`goodput fit --validate`): for each held-out measured run, the same plan
//! and seed simulated with the twin, measured against predicted metric by metric. Part of the
//! result document (its `validation` section) so reports can draw it.

use serde::{Deserialize, Serialize};

/// How close a prediction came.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within ±10% of the measured value.
    Within10,
    /// Within ±25%.
    Within25,
    Outside,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Within10 => "within ±10%",
            Verdict::Within25 => "within ±25%",
            Verdict::Outside => "outside ±25%",
        }
    }
}

/// One metric statistic, measured and predicted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricCheck {
    /// `ttft_ms`, `tpot_ms`, `itl_ms`, `output_tokens_per_s`, `requests_per_s`.
    pub metric: String,
    /// `mean`, `p50`, `p90`, `p99`, or `value`.
    pub stat: String,
    pub measured: f64,
    pub predicted: f64,
    /// predicted ÷ measured (`None` when nothing was measured).
    pub ratio: Option<f64>,
    pub verdict: Verdict,
}

/// One held-out run against its prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunCheck {
    pub file: String,
    pub run_id: String,
    pub target: String,
    /// The load, in words.
    pub load: String,
    /// What the prediction extrapolated beyond the training runs (empty: nothing).
    pub extrapolated: Vec<String>,
    pub metrics: Vec<MetricCheck>,
}

/// A twin's validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TwinValidation {
    /// The twin file (or "fitted" when validated right after the fit).
    pub twin: String,
    pub runs: Vec<RunCheck>,
}
