//! The roofline report as data (`goodput roofline --out`): where a model's prefill and decode
//! steps sit against a GPU's ridge point, and the latency floors that follow. The analysis that
//! fills it is `goodput_decide::roofline`.

use goodput_engine::{Dtype, MemoryPlan};
use serde::{Deserialize, Serialize};

/// The largest decode batch searched for a crossover (sequences).
pub const MAX_BATCH: u64 = 1 << 24;

/// The seed article's "60–80 operations per byte at typical batch sizes".
pub const SEED_BAND: (f64, f64) = (60.0, 80.0);

/// What to place on the roofline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineSpec {
    /// Tokens of the prompt whose prefill is placed.
    pub prompt: u64,
    /// Tokens each decoding sequence attends (its prompt plus the output so far).
    pub context: u64,
    /// Decode batch sizes placed (sequences per step).
    pub batches: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Prefill,
    Decode,
}

/// Which roof limits an iteration at peak: its intensity above the ridge point is compute-bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Compute,
    Memory,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Compute => "compute",
            Bound::Memory => "memory",
        }
    }
}

/// One iteration on the roofline. FLOPs and bytes are the whole model's (all GPUs of the
/// tensor-parallel group together); each GPU does `1/tp` of both, so the intensity is the same.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflinePoint {
    /// `prefill 4096` or `decode b=8`.
    pub label: String,
    pub phase: Phase,
    /// Sequences in the iteration.
    pub batch: u64,
    /// Prefill: the prompt's tokens; decode: the tokens each sequence attends.
    pub context: u64,
    /// Tokens computed (the prompt, or one per decoding sequence).
    pub tokens: u64,
    pub flops: f64,
    /// Weights plus KV read and written, bytes.
    pub bytes: f64,
    /// The weights' share of `bytes` (the input embedding is a lookup and is not read whole).
    pub weight_bytes: f64,
    pub kv_bytes: f64,
    /// FLOP per byte.
    pub intensity: f64,
    pub bound: Bound,
    /// FLOP/s per GPU the roof allows at this intensity: `min(peak, intensity × bandwidth)`.
    pub attainable_flops: f64,
    /// At peak, no overheads: `max(FLOPs / peak, bytes / bandwidth)` per GPU, seconds (the TTFT
    /// floor for a prefill, the TPOT floor for a decode step).
    pub floor_s: f64,
    /// At the calibrated efficiencies, with the step overhead and tensor-parallel all-reduces:
    /// the engine model's step time, seconds.
    pub calibrated_s: f64,
    /// Decode: whether the batch's KV fits in the KV cache (`None` when the weights do not fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fits: Option<bool>,
}

/// Where memory goes on one GPU of the group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineMemory {
    /// All weights in the weight format, whole model and per GPU, bytes.
    pub weight_bytes: f64,
    pub weight_bytes_per_gpu: f64,
    /// KV of one token, whole model, bytes.
    pub kv_bytes_per_token: f64,
    pub gpu_memory_utilization: f64,
    /// The engine's memory plan (vLLM's defaults), when the weights fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<MemoryPlan>,
    /// Tokens the KV cache holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_capacity_tokens: Option<u64>,
    /// The most sequences of `context` tokens whose KV fits at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u64>,
    /// Why nothing fits, in the engine's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub does_not_fit: Option<String>,
}

/// Batch sizes at which decode intensity lies within a band.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntensityBand {
    pub low: f64,
    pub high: f64,
    /// The smallest and largest batch whose decode step is within `[low, high]` FLOP/byte, at
    /// the spec's context; `None` when none is.
    pub batches: Option<[u64; 2]>,
}

/// The roofline of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineReport {
    pub model: String,
    pub gpu: String,
    pub tp: u32,
    pub dtype: Dtype,
    pub kv_dtype: Dtype,
    pub spec: RooflineSpec,
    pub total_params: u64,
    pub active_params: u64,
    pub memory: RooflineMemory,
    /// Per GPU, in the weight format's compute: FLOP/s and bytes/s.
    pub peak_flops: f64,
    pub bandwidth: f64,
    /// `peak_flops / bandwidth`, FLOP per byte.
    pub ridge_point: f64,
    /// The MFU and MBU of the calibrated times.
    pub mfu: f64,
    pub mbu: f64,
    /// `prompt²`: attention scores of the prompt per head per layer (causal kernels compute
    /// about half, which is what the FLOPs count).
    pub attention_scores_per_head_per_layer: u64,
    pub prefill: RooflinePoint,
    pub decode: Vec<RooflinePoint>,
    /// The smallest decode batch that is compute-bound at peak (`None`: none up to
    /// [`MAX_BATCH`]), and at the calibrated efficiencies.
    pub compute_bound_batch: Option<u64>,
    pub compute_bound_batch_calibrated: Option<u64>,
    /// Decode intensity as the batch grows without bound (KV reads grow with the batch while the
    /// weights are read once), FLOP per byte.
    pub decode_intensity_limit: f64,
    /// The seed's "60–80 operations per byte at typical batch sizes": which batches.
    pub seed_band: IntensityBand,
}
