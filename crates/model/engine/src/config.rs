//! Engine configuration, its validation, and the memory plan (how many KV blocks fit).

use serde::{Deserialize, Serialize};

use crate::catalog::{Dtype, Gpu, ModelArch};
use crate::error::EngineError;
pub use crate::named::Named;

/// Efficiency factors of the step-time model, calibrated against published serving figures
/// (see `docs/engine.md` and the `calibration` bench).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Efficiency {
    /// Model FLOPs utilization: achieved / peak FLOP/s for the batch's matrix work (with
    /// `mfu_half_params`, what the largest GEMMs reach).
    pub mfu: f64,
    /// Parameters per layer per GPU (the active weights one GPU multiplies in one layer) at
    /// which the GEMMs reach half of `mfu`: a GEMM's efficiency rises with its size (launch, tile
    /// and wave quantization weigh on small ones), so a small model, or a large one split over
    /// many GPUs, runs further below peak than a large model on few (0: every GEMM at `mfu`).
    #[serde(default)]
    pub mfu_half_params: f64,
    /// Model bandwidth utilization: achieved / peak bytes/s for weight and KV reads.
    pub mbu: f64,
    /// Fixed time added to every iteration (kernel launches, synchronization), seconds.
    pub step_overhead_s: f64,
    /// Host time per sequence in the batch per iteration (preparing inputs, sampling,
    /// detokenizing, streaming), seconds.
    pub seq_overhead_s: f64,
    /// Latency of one all-reduce (tensor parallelism), seconds.
    pub allreduce_latency_s: f64,
    /// Latency of one all-to-all (expert parallelism's dispatch or combine), seconds.
    #[serde(default)]
    pub alltoall_latency_s: f64,
    /// The share of the GPU's quoted link bandwidth (`link_gbs`, both directions together) an
    /// all-reduce moves its bytes at: collectives reach about half of it or less.
    #[serde(default = "one_f64")]
    pub allreduce_bw_share: f64,
    /// Intake of one request (the API server parsing, tokenizing and handing it to the
    /// scheduler), seconds: requests are taken in one at a time, so a burst enters the engine
    /// spread out, as it does in a real server.
    pub ingest_s: f64,
    /// Intake time per prompt token (tokenization), seconds.
    pub ingest_per_token_s: f64,
    /// The front end's latency beside the intake, seconds: what passes between the API server
    /// taking a request and the engine scheduling it (the hand-over between processes, queues
    /// polled between steps), which requests pass side by side, each with its own latency.
    #[serde(default)]
    pub frontend_s: f64,
    /// Its standard deviation, seconds (log-normal with mean `frontend_s`: never negative). A
    /// burst of equal requests sent together reaches a real scheduler spread over iterations by
    /// it; without it a simulated burst stays in lockstep for ever.
    #[serde(default)]
    pub frontend_jitter_s: f64,
    /// Routed-expert matmuls of a mixture of experts (grouped GEMMs: many small per-expert
    /// batches) run at this share of the dense MFU.
    pub moe_gemm: f64,
    /// Tokens per expert at which the grouped GEMMs run at half of `moe_gemm`: an iteration of
    /// `T` tokens gives each of `E` experts about `T·top_k/E` rows, and a GEMM of few rows wastes
    /// most of the tensor cores (0: every expert GEMM at `moe_gemm`).
    #[serde(default)]
    pub moe_half_tokens: f64,
    /// With FP4 weights: the MFU at the FP4 peak, and the MBU (dequantizing block-scaled weights
    /// costs kernel time that dense BF16/FP8 kernels do not spend).
    pub fp4_mfu: f64,
    pub fp4_mbu: f64,
}

impl Default for Efficiency {
    fn default() -> Self {
        // A configuration without an engine preset (`EngineConfig::new`) keeps these: the single
        // set once calibrated on ../shared/reference/published-figures.md rows 1–6. A preset's
        // configuration takes the calibrated rules of data/efficiency.toml over them.
        Efficiency {
            mfu: 0.38,
            mfu_half_params: 0.0,
            mbu: 0.8,
            step_overhead_s: 0.002,
            seq_overhead_s: 0.0,
            allreduce_latency_s: 15e-6,
            alltoall_latency_s: 15e-6,
            allreduce_bw_share: 1.0,
            ingest_s: 500e-6,
            ingest_per_token_s: 0.5e-6,
            frontend_s: 2e-3,
            frontend_jitter_s: 2e-3,
            moe_gemm: 0.85,
            moe_half_tokens: 0.0,
            fp4_mfu: 0.34,
            fp4_mbu: 0.65,
        }
    }
}

fn one_f64() -> f64 {
    1.0
}

impl Efficiency {
    /// The preset's front-end latency for one request drawn with `seed`
    /// ([`crate::frontend::front_end_delay`]).
    pub fn frontend_delay(&self, seed: u64) -> f64 {
        crate::frontend::front_end_delay(self.frontend_s, self.frontend_jitter_s, seed)
    }

    /// A perfect GPU: every FLOP and byte at peak, nothing else (the roofline's floors).
    pub fn peak() -> Self {
        Efficiency {
            mfu: 1.0,
            mfu_half_params: 0.0,
            mbu: 1.0,
            step_overhead_s: 0.0,
            seq_overhead_s: 0.0,
            allreduce_latency_s: 0.0,
            alltoall_latency_s: 0.0,
            allreduce_bw_share: 1.0,
            ingest_s: 0.0,
            ingest_per_token_s: 0.0,
            frontend_s: 0.0,
            frontend_jitter_s: 0.0,
            moe_gemm: 1.0,
            moe_half_tokens: 0.0,
            fp4_mfu: 1.0,
            fp4_mbu: 1.0,
        }
    }
}

/// How batches form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Batching {
    /// Iteration-level: sequences join and leave the batch at every iteration (Orca, vLLM).
    #[default]
    Continuous,
    /// Request-level: a batch forms from the queue, prefills together, and decodes until its
    /// longest sequence finishes (finished sequences are padding); new requests wait for the next.
    Static,
}

/// When waiting prompts are prefilled relative to running decodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduling {
    /// A prefill-only iteration ahead of the running decodes (vLLM's original default).
    #[default]
    PrefillFirst,
    /// Every running sequence decodes each iteration; whole prompts join in the budget left.
    DecodeFirst,
    /// Decodes first, then prompt chunks fill the token budget (chunked prefill).
    Chunked,
}

/// How KV memory is handed to sequences.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvAlloc {
    /// Blocks as the sequence grows (PagedAttention).
    #[default]
    Paged,
    /// A contiguous region reserved at admission for the longest the sequence may grow.
    Prealloc,
}

/// What a pre-allocated sequence reserves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prealloc {
    /// `--max-model-len` tokens (the model's context when not set), as pre-vLLM systems did.
    #[default]
    MaxModelLen,
    /// The request's prompt plus its `max_tokens`.
    Request,
}

/// Speculative decoding: each decode iteration drafts `k` tokens per sequence, then one target
/// pass verifies them; each drafted token is accepted with probability `acceptance` (until the
/// first rejection), and the verification adds one token of its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Speculative {
    pub method: SpecMethod,
    pub k: u32,
    pub acceptance: f64,
}

/// Where drafts come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SpecMethod {
    /// A smaller model, run `k` times per iteration (its own roofline time).
    Draft { model: Box<ModelArch> },
    /// Prompt lookup (n-gram matching): no model, no cost.
    Ngram,
}

impl Speculative {
    /// Parses `draft=MODEL,k=4,acceptance=0.7` or `ngram,k=4,acceptance=0.5`; `model` looks a
    /// draft model up by name.
    pub fn parse(text: &str, model: impl Fn(&str) -> Result<ModelArch, String>) -> Result<Self, String> {
        let expect = "expected draft=MODEL,k=N,acceptance=A or ngram,k=N,acceptance=A";
        let (mut method, mut k, mut acceptance) = (None, None, None);
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                None if part == "ngram" => method = Some(SpecMethod::Ngram),
                Some(("draft", m)) => method = Some(SpecMethod::Draft { model: Box::new(model(m.trim())?) }),
                Some(("k", v)) => {
                    k = Some(v.trim().parse::<u32>().map_err(|_| format!("`{v}`: k is a count of tokens"))?)
                }
                Some(("acceptance", v)) => {
                    acceptance =
                        Some(v.trim().parse::<f64>().map_err(|_| format!("`{v}`: acceptance is a probability"))?)
                }
                _ => return Err(format!("`{part}`: {expect}")),
            }
        }
        let method = method.ok_or_else(|| format!("`{text}`: no draft method; {expect}"))?;
        let k = k.unwrap_or(4);
        let acceptance = acceptance.unwrap_or(match method {
            SpecMethod::Draft { .. } => 0.7,
            SpecMethod::Ngram => 0.5,
        });
        if !(1..=16).contains(&k) {
            return Err(format!("k={k}: between 1 and 16 drafted tokens"));
        }
        if !(acceptance.is_finite() && (0.0..1.0).contains(&acceptance)) {
            return Err(format!("acceptance={acceptance}: a probability in [0, 1)"));
        }
        Ok(Speculative { method, k, acceptance })
    }

    /// Expected tokens per target pass, `(1 − α^(k+1)) / (1 − α)` (Leviathan et al.).
    pub fn expected_tokens(&self) -> f64 {
        let a = self.acceptance;
        (1.0 - a.powi(self.k as i32 + 1)) / (1.0 - a)
    }
}

impl Named for Batching {
    const NAMES: &'static [(Self, &'static str)] =
        &[(Batching::Continuous, "continuous"), (Batching::Static, "static")];
}

impl Named for Scheduling {
    const NAMES: &'static [(Self, &'static str)] = &[
        (Scheduling::PrefillFirst, "prefill-first"),
        (Scheduling::DecodeFirst, "decode-first"),
        (Scheduling::Chunked, "chunked"),
    ];
}

impl Named for KvAlloc {
    const NAMES: &'static [(Self, &'static str)] = &[(KvAlloc::Paged, "paged"), (KvAlloc::Prealloc, "prealloc")];
}

impl Named for Prealloc {
    const NAMES: &'static [(Self, &'static str)] =
        &[(Prealloc::MaxModelLen, "max-model-len"), (Prealloc::Request, "request")];
}

/// Everything that defines a modelled engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Whose defaults it started from (`--engine`); the fields hold the resolved values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<crate::config::Preset>,
    pub model: ModelArch,
    pub gpu: Gpu,
    /// Tensor-parallel degree (GPUs per replica).
    pub tp: u32,
    /// Weight (and matmul) number format.
    pub dtype: Dtype,
    pub kv_dtype: Dtype,
    /// Most sequences in the running batch.
    pub max_num_seqs: u32,
    /// Most tokens one iteration may process (prefill tokens plus one per decode).
    pub max_batched_tokens: u32,
    pub gpu_memory_utilization: f64,
    /// KV cache block size in tokens.
    pub block_size: u32,
    /// Split long prefills into chunks that share iterations with decodes (decodes first).
    /// Off: vLLM's classic policy, a whole prefill step ahead of the running decodes.
    pub chunked_prefill: bool,
    /// Most requests waiting for admission; beyond it new requests are refused (HTTP 429).
    pub max_waiting: usize,
    /// Keep computed KV blocks by content hash and reuse them for requests that share a prefix.
    #[serde(default)]
    pub prefix_caching: bool,
    pub efficiency: Efficiency,
    /// When prompts are prefilled (`chunked_prefill` is kept in step with it).
    #[serde(default)]
    pub scheduling: Scheduling,
    #[serde(default)]
    pub batching: Batching,
    /// Static batching: the longest a batch waits to fill before it starts, seconds.
    #[serde(default)]
    pub batch_timeout_s: f64,
    #[serde(default)]
    pub kv_alloc: KvAlloc,
    #[serde(default)]
    pub prealloc: Prealloc,
    /// The longest sequence (prompt plus output) served; `None`: the model's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// Replicas of this engine behind a router (each with `tp` GPUs).
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default)]
    pub router: crate::topology::Router,
    /// Prefill and decode pools instead of replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation: Option<crate::topology::Disaggregation>,
    /// A digital twin's fitted step cost, KV, context and front end (`--twin`): when set, it
    /// prices iterations instead of the roofline and sizes the KV cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted: Option<crate::fitted::Fitted>,
    /// Weights kept in host memory per GPU, GB (vLLM's `--cpu-offload-gb`): every forward pass
    /// streams them over the host link.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cpu_offload_gb: f64,
    /// Expert parallelism with data-parallel attention (TensorRT-LLM's `--ep` with
    /// `enable_attention_dp`, SGLang's `--enable-dp-attention --ep-size`): each GPU holds whole
    /// experts, a share of them, and the whole attention for its own share of the sequences;
    /// tokens travel to their experts and back over the link (two all-to-alls per layer)
    /// instead of two all-reduces.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expert_parallel: bool,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn one() -> u32 {
    1
}

impl EngineConfig {
    /// Defaults as vLLM sets them, for a model on a GPU.
    pub fn new(model: ModelArch, gpu: Gpu) -> Self {
        EngineConfig {
            preset: None,
            model,
            gpu,
            tp: 1,
            dtype: Dtype::Bf16,
            kv_dtype: Dtype::Bf16,
            max_num_seqs: 256,
            max_batched_tokens: 8192,
            gpu_memory_utilization: 0.9,
            block_size: 16,
            chunked_prefill: false,
            max_waiting: 100_000,
            prefix_caching: false,
            efficiency: Efficiency::default(),
            scheduling: Scheduling::PrefillFirst,
            batching: Batching::Continuous,
            batch_timeout_s: 0.0,
            kv_alloc: KvAlloc::Paged,
            prealloc: Prealloc::MaxModelLen,
            max_model_len: None,
            speculative: None,
            replicas: 1,
            router: crate::topology::Router::RoundRobin,
            disaggregation: None,
            fitted: None,
            cpu_offload_gb: 0.0,
            expert_parallel: false,
        }
    }

    /// The prefill policy in force (a configuration that only says `chunked_prefill` is chunked).
    pub fn scheduling(&self) -> Scheduling {
        if self.chunked_prefill { Scheduling::Chunked } else { self.scheduling }
    }

    /// Sets the prefill policy (and `chunked_prefill` with it).
    pub fn set_scheduling(&mut self, s: Scheduling) {
        self.scheduling = s;
        self.chunked_prefill = s == Scheduling::Chunked;
    }

    /// How it serves, in words: the preset, then each mechanism's setting (batching, prefill
    /// scheduling, KV allocation, prefix caching, speculative decoding, the deployment).
    pub fn mechanisms(&self) -> Vec<String> {
        let mut m = Vec::new();
        if let Some(p) = self.preset {
            m.push(format!("{} defaults", p.name()));
        }
        m.push(format!("max {} seqs, {} tokens per iteration", self.max_num_seqs, self.max_batched_tokens));
        match self.batching {
            Batching::Static => m.push("static batching".into()),
            Batching::Continuous => m.push(format!("{} scheduling", self.scheduling().name())),
        }
        if self.kv_alloc == KvAlloc::Prealloc {
            m.push(format!("pre-allocated KV ({})", self.prealloc.name()));
        }
        if self.cpu_offload_gb > 0.0 {
            m.push(format!(
                "{} GB of weights per GPU in host memory ({} GB/s link)",
                self.cpu_offload_gb,
                self.gpu.host_link() / 1e9
            ));
        }
        if self.expert_parallel {
            m.push(format!("expert parallel ×{} with data-parallel attention", self.tp));
        }
        if self.prefix_caching {
            m.push("prefix caching".into());
        }
        if let Some(sp) = &self.speculative {
            let how = match &sp.method {
                SpecMethod::Draft { model } => format!("draft {}", model.name),
                SpecMethod::Ngram => "n-gram".into(),
            };
            m.push(format!("speculative {how}, k={}, acceptance {}", sp.k, sp.acceptance));
        }
        if let Some(d) = &self.disaggregation {
            m.push(format!(
                "disaggregated {} prefill + {} decode over {}{}",
                d.prefill,
                d.decode,
                d.link.name,
                if d.ppd { " with append-prefill" } else { "" }
            ));
        } else if self.replicas > 1 {
            m.push(format!("{} replicas, {} routing", self.replicas, self.router.name()));
        }
        m
    }

    /// GPUs the deployment uses: `tp` per engine, times replicas or prefill plus decode
    /// instances.
    pub fn gpus(&self) -> u32 {
        let engines = match &self.disaggregation {
            Some(d) => d.prefill + d.decode,
            None => self.replicas.max(1),
        };
        self.tp * engines
    }

    /// The longest sequence served: `max_model_len`, at most the model's context.
    pub fn context(&self) -> u64 {
        let model = self.fitted.map_or(self.model.max_context, |f| f.context_tokens);
        self.max_model_len.map_or(model, |m| m.min(model))
    }
}

/// How the GPU memory of one tensor-parallel shard is spent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// Memory the engine may use per GPU (`memory × utilization`), GB.
    pub usable_gb: f64,
    /// Weights on the GPU, GB.
    pub weights_gb: f64,
    /// Weights in host memory (`--cpu-offload-gb`), GB.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offloaded_gb: f64,
    /// Activations and workspace kept free for the largest iteration, GB.
    pub activation_reserve_gb: f64,
    pub kv_gb: f64,
    /// KV bytes per token on one GPU.
    pub kv_bytes_per_token: f64,
    pub kv_blocks: u32,
    /// `kv_blocks × block_size`.
    pub kv_tokens: u64,
}

/// A twin's memory: only its KV, as fitted (its GPU and weights are the measured server's own).
fn fitted_memory(f: &crate::fitted::Fitted, block_size: u32) -> MemoryPlan {
    let blocks = f.kv_tokens.div_ceil(block_size.max(1) as u64).min(u32::MAX as u64) as u32;
    MemoryPlan {
        usable_gb: 0.0,
        weights_gb: 0.0,
        offloaded_gb: 0.0,
        activation_reserve_gb: 0.0,
        kv_gb: 0.0,
        kv_bytes_per_token: 0.0,
        kv_blocks: blocks,
        kv_tokens: blocks as u64 * block_size as u64,
    }
}

/// GPUs that hold a share of the KV heads: KV heads are split across ranks, and replicated when
/// there are fewer KV heads than ranks.
fn kv_shards(c: &EngineConfig) -> f64 {
    if c.expert_parallel {
        // data-parallel attention: each GPU keeps whole KV for its own sequences
        return c.tp as f64;
    }
    (c.tp as u64).min(c.model.kv_heads.max(1)) as f64
}

impl EngineConfig {
    /// Validates the configuration and computes the memory plan. Errors say what to change.
    pub fn plan(&self) -> Result<MemoryPlan, EngineError> {
        let bad = |m: String| Err(EngineError::Config(m));
        let m = &self.model;
        self.check_parallelism_and_batching()?;
        self.check_pools_and_caching()?;
        if let Some(f) = &self.fitted {
            return Ok(fitted_memory(f, self.block_size));
        }
        let usable = self.gpu.memory_bytes() * self.gpu_memory_utilization;
        let (weights, offload) = self.weights_on_gpu(usable)?;
        // Activations for the largest iteration (hidden states and the MLP's intermediate, in
        // the compute format) plus a fixed workspace for kernels and graphs.
        let act_bytes = 2.0;
        let width = (m.ffn.max(m.expert_ffn) * 2 / self.tp as u64 + 4 * m.hidden) as f64;
        let reserve = self.max_batched_tokens as f64 * width * act_bytes + 0.5e9;
        let kv_bytes_per_token = m.kv_bytes_per_token(self.kv_dtype) / kv_shards(self);
        let kv = usable - weights - reserve;
        let block_bytes = kv_bytes_per_token * self.block_size as f64;
        let blocks = if kv > 0.0 { (kv / block_bytes).floor() as u64 } else { 0 };
        if blocks == 0 {
            let narrower = [Dtype::Fp8, Dtype::Fp4]
                .into_iter()
                .find(|d| d.bytes() < self.dtype.bytes() && self.gpu.runs(*d))
                .map_or(String::new(), |d| format!(", or use --dtype {}", d.name()));
            return bad(format!(
                "{} on {} at --tp {}: {:.1} GB of weights and {:.1} GB of activations leave no room for the KV cache \
                 in {:.1} GB: raise --tp or lower --max-batched-tokens{narrower}",
                m.name,
                self.gpu.name,
                self.tp,
                weights / 1e9,
                reserve / 1e9,
                usable / 1e9
            ));
        }
        let blocks = blocks.min(u32::MAX as u64) as u32;
        Ok(MemoryPlan {
            usable_gb: usable / 1e9,
            weights_gb: weights / 1e9,
            offloaded_gb: offload / 1e9,
            activation_reserve_gb: reserve / 1e9,
            kv_gb: blocks as f64 * block_bytes / 1e9,
            kv_bytes_per_token,
            kv_blocks: blocks,
            kv_tokens: blocks as u64 * self.block_size as u64,
        })
    }

    /// Checks tensor parallelism, memory utilization, block size, batching, speculation and replicas.
    fn check_parallelism_and_batching(&self) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::Config(m));
        let m = &self.model;
        if self.tp == 0 || !self.tp.is_power_of_two() || self.tp > 64 {
            return bad(format!("--tp {} must be a power of two between 1 and 64", self.tp));
        }
        if self.expert_parallel && (!m.is_moe() || m.experts < self.tp as u64) {
            return bad(format!(
                "--expert-parallel spreads the experts of a mixture of experts over the GPUs, and {} has {}: use \
                 tensor parallelism alone",
                m.name,
                if m.is_moe() { format!("{} experts for {} GPUs", m.experts, self.tp) } else { "none".into() }
            ));
        }
        if !m.heads.is_multiple_of(self.tp as u64) {
            return bad(format!("--tp {} must divide the {} attention heads of {}", self.tp, m.heads, m.name));
        }
        if self.preset == Some(Preset::Trtllm)
            && !self.gpu.full_name.is_empty()
            && !self.gpu.full_name.starts_with("NVIDIA")
        {
            return bad(format!(
                "TensorRT-LLM runs on NVIDIA GPUs only, and {} is not one: use --engine vllm or sglang",
                self.gpu.full_name
            ));
        }
        if !self.gpu.runs(self.dtype) {
            return bad(format!(
                "{} has no FP4 tensor cores (NVIDIA Blackwell has them; Hopper, Ampere and MI300 do not): use --dtype fp8 \
                 or bf16",
                self.gpu.name
            ));
        }
        if !(0.05..=1.0).contains(&self.gpu_memory_utilization) {
            return bad(format!("--gpu-memory-utilization {} must be in (0.05, 1]", self.gpu_memory_utilization));
        }
        if self.block_size == 0 || !self.block_size.is_power_of_two() || self.block_size > 256 {
            return bad(format!("--block-size {} must be a power of two up to 256", self.block_size));
        }
        if self.max_num_seqs == 0 {
            return bad("--max-num-seqs must be at least 1".into());
        }
        if self.max_model_len == Some(0) {
            return bad("--max-model-len must be at least 1".into());
        }
        if !(self.batch_timeout_s.is_finite() && self.batch_timeout_s >= 0.0) {
            return bad("--batch-timeout must be zero or positive".into());
        }
        if self.batching == Batching::Static && self.scheduling() != Scheduling::PrefillFirst {
            return bad(format!(
                "--batching static prefills each batch whole before it decodes: --scheduling {} does not apply (drop it)",
                self.scheduling().name()
            ));
        }
        if self.speculative.is_some() && self.batching == Batching::Static {
            return bad("--speculative drafts per iteration of a continuous batch: not with --batching static".into());
        }
        if let Some(Speculative { method: SpecMethod::Draft { model: d }, .. }) = &self.speculative
            && d.vocab != self.model.vocab
        {
            return bad(format!(
                "--speculative: the draft model {} has a vocabulary of {} tokens and {} one of {}: a draft must share the target's tokenizer",
                d.name, d.vocab, self.model.name, self.model.vocab
            ));
        }
        if self.replicas == 0 {
            return bad("--replicas must be at least 1".into());
        }
        Ok(())
    }

    /// Checks disaggregated pools, prefix caching against the KV allocation, and the tokens per iteration.
    fn check_pools_and_caching(&self) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::Config(m));
        if let Some(d) = &self.disaggregation {
            if d.prefill == 0 || d.decode == 0 {
                return bad("--disaggregate needs at least one prefill and one decode instance".into());
            }
            if self.batching == Batching::Static {
                return bad(
                    "--disaggregate hands each request from a prefill to a decode instance mid-batch: not with --batching static"
                        .into(),
                );
            }
            if self.replicas > 1 {
                return bad("--replicas and --disaggregate: give the instances as prefill=P,decode=D".into());
            }
            if d.ppd && self.kv_alloc == KvAlloc::Prealloc {
                return bad(
                    "--ppd keeps each conversation's KV on its decode instance to prefill its next turn there, which \
                     contiguous pre-allocation cannot share: use --kv-alloc paged"
                        .into(),
                );
            }
        }
        if self.prefix_caching && self.kv_alloc == KvAlloc::Prealloc {
            return bad(
                "--prefix-caching shares KV blocks between sequences, which contiguous pre-allocation cannot: use --kv-alloc paged"
                    .into(),
            );
        }
        if self.max_batched_tokens < self.max_num_seqs.min(1024) {
            return bad(format!(
                "--max-batched-tokens {} must be at least min(--max-num-seqs, 1024) = {}",
                self.max_batched_tokens,
                self.max_num_seqs.min(1024)
            ));
        }
        Ok(())
    }

    /// Weights each GPU holds: a 1/tp share, but with expert parallelism every GPU holds the
    /// whole attention (data-parallel attention) and a 1/tp share of the rest.
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        let m = &self.model;
        let all = m.weight_bytes(self.dtype);
        if !self.expert_parallel {
            return all / self.tp as f64;
        }
        let attn = m.attn_weight_bytes(self.dtype);
        attn + (all - attn) / self.tp as f64
    }

    /// The bytes of weights per GPU kept on it and offloaded to host memory; an error when they do not fit `usable`.
    fn weights_on_gpu(&self, usable: f64) -> Result<(f64, f64), EngineError> {
        let bad = |m: String| Err(EngineError::Config(m));
        let all_weights = self.weight_bytes_per_gpu();
        if !(self.cpu_offload_gb.is_finite() && self.cpu_offload_gb >= 0.0) {
            return bad("--cpu-offload-gb must be zero or more".into());
        }
        let offload = self.cpu_offload_gb * 1e9;
        if offload > all_weights {
            return bad(format!(
                "--cpu-offload-gb {} is more than the {:.1} GB of weights per GPU",
                self.cpu_offload_gb,
                all_weights / 1e9
            ));
        }
        // what stays on the GPU
        let weights = all_weights - offload;
        if weights >= usable {
            return Err(self.weights_do_not_fit(usable, all_weights, weights));
        }
        Ok((weights, offload))
    }

    /// The error for weights that do not fit in `usable` bytes per GPU, naming the changes that would fit them.
    fn weights_do_not_fit(&self, usable: f64, all_weights: f64, weights: f64) -> EngineError {
        let m = &self.model;
        let total = m.weight_bytes(self.dtype);
        let mut tp_fit = self.tp.max(1);
        while tp_fit <= 64 && total / tp_fit as f64 >= usable {
            tp_fit *= 2;
        }
        let mut fixes = Vec::new();
        if tp_fit <= 64 {
            fixes.push(format!("use --tp {tp_fit} or more"));
        }
        for d in [Dtype::Fp8, Dtype::Fp4] {
            if d.bytes() < self.dtype.bytes() && self.gpu.runs(d) && m.weight_bytes(d) / (self.tp as f64) < usable {
                fixes.push(format!("--dtype {}", d.name()));
                break;
            }
        }
        if fixes.is_empty() {
            fixes.push(format!(
                "use a larger GPU, or --cpu-offload-gb {:.0} (weights streamed from host memory every step)",
                (all_weights - usable * 0.8).max(1e9) / 1e9
            ));
        }
        let per =
            if self.tp > 1 { format!(" ({:.0} GB per GPU at --tp {})", weights / 1e9, self.tp) } else { String::new() };
        EngineError::Config(format!(
            "{} in {} needs {:.0} GB of weights{per}; one {} offers {:.0} GB at {} utilization: {}",
            m.name,
            self.dtype.name(),
            total / 1e9,
            self.gpu.name,
            usable / 1e9,
            self.gpu_memory_utilization,
            fixes.join(", or ")
        ))
    }
}

/// The serving engine whose defaults a configuration starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// vLLM's V1 engine.
    #[default]
    Vllm,
    Sglang,
    /// TensorRT-LLM's LLM API / `trtllm-serve` (PyTorch backend).
    Trtllm,
}

impl Named for Preset {
    const NAMES: &'static [(Self, &'static str)] =
        &[(Preset::Vllm, "vllm"), (Preset::Sglang, "sglang"), (Preset::Trtllm, "trtllm")];
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalog::Catalog;

    /// A catalog model on a catalog GPU with `EngineConfig::new`'s defaults (tests of this crate).
    pub(crate) fn cfg(model: &str, gpu: &str) -> EngineConfig {
        let c = Catalog::builtin();
        EngineConfig::new(c.model(model).unwrap().clone(), c.gpu(gpu).unwrap().clone())
    }

    #[test]
    fn expert_parallelism_is_for_a_mixture_of_experts_and_keeps_one_kv_copy() {
        let mut dense = cfg("llama-3.1-70b", "h100");
        dense.tp = 4;
        dense.expert_parallel = true;
        let e = dense.plan().unwrap_err().to_string();
        assert!(e.contains("--expert-parallel") && e.contains("has none"), "{e}");
        let mut few = cfg("mixtral-8x7b", "h100");
        few.tp = 16;
        few.expert_parallel = true;
        assert!(few.plan().unwrap_err().to_string().contains("8 experts for 16 GPUs"));
        // Qwen3-235B has 4 KV heads: at TP 8 tensor parallelism keeps each head twice; data-parallel
        // attention keeps one copy of each sequence's KV
        let mut tp = cfg("qwen3-235b-a22b", "h200");
        tp.tp = 8;
        tp.dtype = Dtype::Fp8;
        let mut ep = tp.clone();
        ep.expert_parallel = true;
        let (pt, pe) = (tp.plan().unwrap(), ep.plan().unwrap());
        assert!((pt.kv_bytes_per_token / pe.kv_bytes_per_token - 2.0).abs() < 1e-9, "{pt:?} {pe:?}");
        assert!(pe.weights_gb > pt.weights_gb, "the attention's weights are on every GPU");
    }

    #[test]
    fn seventy_b_does_not_fit_one_h100() {
        let e = cfg("llama-2-70b", "h100").plan().unwrap_err().to_string();
        assert_eq!(
            e,
            "llama-2-70b in bf16 needs 138 GB of weights; one h100 offers 72 GB at 0.9 utilization: \
             use --tp 2 or more, or --dtype fp8"
        );
        let mut c = cfg("llama-2-70b", "h100");
        c.tp = 2;
        let p = c.plan().unwrap();
        assert!((p.weights_gb - 69.0).abs() < 0.1);
        assert!(p.kv_blocks > 0);
    }

    #[test]
    fn eight_b_memory_plan_by_hand() {
        let p = cfg("llama-3.1-8b", "h100").plan().unwrap();
        // 72 GB usable − 16.06 GB weights − reserve (8192 · (2·14336 + 4·4096) · 2 B + 0.5 GB = 1.24 GB)
        assert!((p.weights_gb - 16.06).abs() < 0.01, "{}", p.weights_gb);
        assert!((p.activation_reserve_gb - 1.2382).abs() < 0.001, "{}", p.activation_reserve_gb);
        assert_eq!(p.kv_bytes_per_token, 131072.0);
        let expected_blocks: f64 = ((72e9f64 - 16.06e9 - 1.2382e9) / (131072.0 * 16.0)).floor();
        assert!((p.kv_blocks as f64 - expected_blocks).abs() <= 30.0, "{} vs {expected_blocks}", p.kv_blocks);
        assert_eq!(p.kv_tokens, p.kv_blocks as u64 * 16);
    }

    #[test]
    fn invalid_settings_are_refused() {
        let mut c = cfg("llama-3.1-8b", "h100");
        c.tp = 3;
        assert!(c.plan().unwrap_err().to_string().contains("--tp 3"));
        let mut c = cfg("llama-3.1-8b", "h100");
        c.block_size = 10;
        assert!(c.plan().unwrap_err().to_string().contains("--block-size"));
        let mut c = cfg("llama-3.1-405b", "l40s");
        c.tp = 8;
        let e = c.plan().unwrap_err().to_string();
        assert!(e.contains("405b") && e.contains("--tp 32"), "{e}");
    }

    #[test]
    fn a_format_the_gpu_cannot_compute_is_refused_with_the_reason() {
        for gpu in ["h100", "a100", "mi300x"] {
            let mut c = cfg("llama-3.1-8b", gpu);
            c.dtype = Dtype::Fp4;
            let e = c.plan().unwrap_err().to_string();
            assert!(e.contains(&format!("{gpu} has no FP4 tensor cores")) && e.contains("--dtype fp8"), "{e}");
        }
        // Blackwell computes FP4; a local machine runs 4-bit weights by dequantizing them
        for gpu in ["b200", "m2-ultra"] {
            let mut c = cfg("llama-3.1-8b", gpu);
            c.dtype = Dtype::Fp4;
            assert!(c.plan().is_ok(), "{gpu}");
        }
        // FP8 weights on a GPU without FP8 tensor cores run weight-only, computed at BF16
        let mut c = cfg("llama-3.1-8b", "a100");
        c.dtype = Dtype::Fp8;
        assert!(c.plan().is_ok());
        // an fp8 configuration that does not fit is not told to use fp8, nor fp4 on a GPU without it
        let mut c = cfg("llama-3.1-70b", "h100");
        c.dtype = Dtype::Fp8;
        let e = c.plan().unwrap_err().to_string();
        assert!(e.contains("raise --tp") && !e.contains("--dtype"), "{e}");
        // TensorRT-LLM runs on NVIDIA GPUs only
        let mut c = cfg("llama-3.1-8b", "mi300x");
        c.preset = Some(Preset::Trtllm);
        let e = c.plan().unwrap_err().to_string();
        assert!(e.contains("TensorRT-LLM runs on NVIDIA GPUs only"), "{e}");
    }
}
