//! The step-time model: how long one engine iteration takes.
//!
//! [`StepCost`] is the seam: the engine prices each iteration's [`BatchShape`] through it and
//! knows nothing else about time. [`Roofline`] is the model used by default:
//!
//! `time = max(FLOPs / (peak · MFU), bytes / (bandwidth · MBU)) + overhead + TP communication`,
//! per GPU of a tensor-parallel group. FLOPs and bytes are summed over the iteration's batch:
//!
//! - FLOPs: `2 · (N_active − head) · T + 2 · head · S` for the `T` tokens processed and the `S`
//!   sequences that sample a token, plus attention `4 · layers · heads · head_dim` times, for each
//!   decode token, its context, and for each prefill chunk of `s` new tokens on `p` cached ones,
//!   `s·p + s²/2` (causal).
//! - Bytes: the weights once per iteration (a mixture-of-experts reads the expected number of
//!   distinct experts the batch's tokens touch, `E · (1 − (1 − k/E)^T)` per layer), every KV entry
//!   attended (each sequence's context), and the KV written for the new tokens.
//! - Efficiencies: FLOPs at `peak · MFU` (routed experts' grouped GEMMs at `MFU · moe_gemm`),
//!   bytes at `bandwidth · MBU`; FP4 weights have their own MFU and MBU.
//! - Communication: two all-reduces per layer, each moving `2 · (tp − 1)/tp · T · hidden · 2 B`
//!   over the GPU's link, plus a fixed latency each.

use serde::Serialize;

use crate::catalog::Dtype;
use crate::config::{Efficiency, EngineConfig};

/// What one iteration processes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchShape {
    /// Sequences decoding one token each.
    pub decode_seqs: u64,
    /// Σ context (tokens attended) over decoding sequences.
    pub decode_context: u64,
    /// New prompt tokens computed this iteration.
    pub prefill_tokens: u64,
    /// Σ `s·p + s²/2` over prefill chunks (`s` new tokens on `p` already computed).
    pub prefill_attention: f64,
    /// Σ `p` over prefill chunks: cached KV read by the prefills.
    pub prefill_cached: u64,
    /// Sequences that sample a token at the end of the iteration.
    pub sampled: u64,
    /// Sequences computing a prefill chunk.
    pub prefill_seqs: u64,
    /// Sequences verifying drafted tokens (speculative decoding): their positions are counted in
    /// the prefill fields (several tokens on a cached context), but they are decodes.
    pub verify_seqs: u64,
}

impl BatchShape {
    pub fn tokens(&self) -> u64 {
        self.decode_seqs + self.prefill_tokens
    }
    /// Sequences in the batch.
    pub fn seqs(&self) -> u64 {
        self.decode_seqs + self.prefill_seqs + self.verify_seqs
    }
    /// Adds a prefill chunk of `new` tokens on `cached` already computed ones.
    pub fn add_prefill(&mut self, new: u64, cached: u64) {
        self.prefill_seqs += 1;
        self.prefill_tokens += new;
        self.prefill_cached += cached;
        self.prefill_attention += new as f64 * cached as f64 + (new as f64) * (new as f64) / 2.0;
    }
    pub fn add_decode(&mut self, context: u64) {
        self.decode_seqs += 1;
        self.decode_context += context;
        self.sampled += 1;
    }
    /// `n` sequences decoding one token each on `context` tokens: `n` × [`add_decode`](Self::add_decode).
    pub fn decodes(n: u64, context: u64) -> Self {
        BatchShape { decode_seqs: n, decode_context: n.saturating_mul(context), sampled: n, ..Default::default() }
    }
    /// A speculative decoding step's verification: `n` positions (the last token and `n − 1`
    /// drafted ones) on `context` computed tokens, each sampled.
    pub fn add_verify(&mut self, n: u64, context: u64) {
        self.verify_seqs += 1;
        self.prefill_tokens += n;
        self.prefill_cached += context;
        self.prefill_attention += n as f64 * context as f64 + (n as f64) * (n as f64) / 2.0;
        self.sampled += n;
    }
    /// A padded position of a static batch: computed like a decode, its output thrown away.
    pub fn add_padding(&mut self, context: u64) {
        self.decode_seqs += 1;
        self.decode_context += context;
        self.sampled += 1;
    }
}

/// The modelled duration of one iteration and its parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepTime {
    pub total_s: f64,
    pub compute_s: f64,
    pub memory_s: f64,
    pub comm_s: f64,
    pub overhead_s: f64,
    /// Streaming host-offloaded weights over the host link (`--cpu-offload-gb`).
    pub offload_s: f64,
    /// FLOPs / bytes per GPU: above the GPU's ridge point the step is compute-bound.
    pub intensity: f64,
    pub compute_bound: bool,
}

/// Prices one iteration.
pub trait StepCost: Send + Sync {
    fn time(&self, b: &BatchShape) -> StepTime;
}

/// Precomputed constants of the roofline for one configuration.
#[derive(Clone, Debug)]
pub struct Roofline {
    tp: f64,
    peak: f64,
    bandwidth: f64,
    link: f64,
    eff: Efficiency,
    layers: f64,
    hidden: f64,
    /// `2 · (N_active − head params)`
    body_flops_per_token: f64,
    /// The routed experts' share of it: `2 · layers · top_k · expert params`.
    expert_flops_per_token: f64,
    /// MFU (at this configuration's GEMM size) and MBU for this number format.
    mfu: f64,
    /// The active weights one GPU multiplies in one layer (for the GEMMs' size).
    layer_params_per_gpu: f64,
    mbu: f64,
    /// `2 · head params`
    head_flops_per_sample: f64,
    /// `4 · layers · heads · head_dim`
    attn_flops_per_pair: f64,
    /// Bytes of weights every token uses (everything but routed experts), whole model.
    dense_weight_bytes: f64,
    /// Bytes of one routed expert in one layer.
    expert_bytes: f64,
    experts: f64,
    top_k: f64,
    /// KV bytes per token, whole model.
    kv_bytes: f64,
    /// Weights per GPU read from host memory every forward pass, and the host link's bytes/s.
    offload_bytes: f64,
    host_link: f64,
    /// Expert parallelism with data-parallel attention: all-to-alls in place of all-reduces, and
    /// the attention's weight bytes each GPU reads beyond its 1/tp share (it reads them whole).
    expert_parallel: bool,
    attn_extra_bytes: f64,
}

impl Roofline {
    pub fn new(cfg: &EngineConfig) -> Self {
        let m = &cfg.model;
        let wb = cfg.dtype.bytes();
        // The output head is the (untied) embedding-sized matrix; only sampling positions use it.
        let head = m.embedding_params() as f64;
        let routed = (m.layers * m.experts * m.expert_params()) as f64;
        // input embeddings are a lookup: no FLOPs, and only the looked-up rows are read
        let dense_params =
            m.total_params() as f64 - routed - m.embedding_params() as f64 * f64::from(!m.tied_embeddings);
        // the weights one token multiplies in one layer (attention, dense or shared MLP, its
        // top-k experts)
        let body_params_per_layer =
            (m.active_params() as f64 - m.embed_and_head_params() as f64) / m.layers.max(1) as f64;
        let mut r = Roofline {
            tp: cfg.tp as f64,
            peak: cfg.gpu.peak_flops(if cfg.dtype == Dtype::Bf16 { Dtype::Bf16 } else { cfg.dtype }),
            bandwidth: cfg.gpu.bandwidth(),
            link: cfg.gpu.link_gbs * 1e9,
            eff: cfg.efficiency,
            layers: m.layers as f64,
            hidden: m.hidden as f64,
            body_flops_per_token: 2.0
                * (m.active_params() as f64 - head - m.embedding_params() as f64 * f64::from(!m.tied_embeddings)),
            head_flops_per_sample: 2.0 * head,
            expert_flops_per_token: 2.0 * (m.layers * m.top_k * m.expert_params()) as f64,
            mfu: if cfg.dtype == Dtype::Fp4 { cfg.efficiency.fp4_mfu } else { cfg.efficiency.mfu },
            // with expert parallelism a GPU multiplies whole experts and the whole attention
            layer_params_per_gpu: body_params_per_layer / if cfg.expert_parallel { 1.0 } else { cfg.tp.max(1) as f64 },
            mbu: if cfg.dtype == Dtype::Fp4 { cfg.efficiency.fp4_mbu } else { cfg.efficiency.mbu },
            attn_flops_per_pair: 4.0 * (m.layers * m.heads * m.head_dim()) as f64,
            dense_weight_bytes: dense_params * wb,
            expert_bytes: m.expert_params() as f64 * wb,
            experts: m.experts as f64,
            top_k: m.top_k as f64,
            kv_bytes: m.kv_bytes_per_token(cfg.kv_dtype),
            offload_bytes: cfg.cpu_offload_gb * 1e9,
            host_link: cfg.gpu.host_link(),
            expert_parallel: cfg.expert_parallel,
            attn_extra_bytes: if cfg.expert_parallel {
                m.attn_weight_bytes(cfg.dtype) * (1.0 - 1.0 / cfg.tp.max(1) as f64)
            } else {
                0.0
            },
        };
        // the GEMMs' size is the configuration's: the MFU they reach is fixed once, here
        r.mfu *= r.gemm_size_share();
        r
    }

    /// Expected distinct experts per layer touched by `tokens` tokens under uniform routing.
    pub fn distinct_experts(&self, tokens: f64) -> f64 {
        if self.experts == 0.0 {
            return 0.0;
        }
        self.experts * (1.0 - (1.0 - self.top_k / self.experts).powf(tokens))
    }

    /// Bytes of weights an iteration of `tokens` tokens reads, whole model: every weight but the
    /// input embedding (a lookup) and the routed experts, plus the experts the tokens touch.
    pub fn weight_bytes_read(&self, tokens: f64) -> f64 {
        self.dense_weight_bytes + self.layers * self.distinct_experts(tokens) * self.expert_bytes
    }

    /// The share of the MFU this configuration's GEMMs reach for their size:
    /// `S / (S + mfu_half_params)` for `S` active weights per layer per GPU (1 where
    /// `mfu_half_params` is 0). It does not depend on the batch: a prefill's GEMMs and a decode
    /// step's of hundreds of sequences fill the tiles alike, and a small batch is memory-bound.
    pub fn gemm_size_share(&self) -> f64 {
        let half = self.eff.mfu_half_params;
        if half <= 0.0 {
            return 1.0;
        }
        self.layer_params_per_gpu / (self.layer_params_per_gpu + half)
    }

    /// The routed experts' GEMMs' share of the dense MFU for an iteration of `tokens` tokens:
    /// `moe_gemm`, scaled by `m / (m + moe_half_tokens)` for `m = tokens · top_k / experts` rows
    /// per expert.
    pub fn moe_gemm(&self, tokens: f64) -> f64 {
        let half = self.eff.moe_half_tokens;
        if half <= 0.0 || self.experts == 0.0 {
            return self.eff.moe_gemm;
        }
        let m = tokens * self.top_k / self.experts;
        self.eff.moe_gemm * m / (m + half)
    }

    /// The MFU (at this configuration's GEMM size) and MBU its number format runs at.
    pub fn efficiencies(&self) -> (f64, f64) {
        (self.mfu, self.mbu)
    }

    /// Whole-model FLOPs and bytes of an iteration (before dividing across the TP group).
    pub fn work(&self, b: &BatchShape) -> (f64, f64) {
        let t = b.tokens() as f64;
        let flops = self.body_flops_per_token * t
            + self.head_flops_per_sample * b.sampled as f64
            + self.attn_flops_per_pair * (b.decode_context as f64 + b.prefill_attention);
        let weights = self.weight_bytes_read(t);
        let kv = self.kv_bytes * (b.decode_context + b.prefill_cached + b.tokens()) as f64;
        (flops, weights + kv)
    }
}

impl StepCost for Roofline {
    fn time(&self, b: &BatchShape) -> StepTime {
        if b.tokens() == 0 {
            return StepTime::default();
        }
        let (flops, bytes) = self.work(b);
        // with expert parallelism every GPU reads the whole attention, not a 1/tp share of it
        let (f, by) = (flops / self.tp, bytes / self.tp + self.attn_extra_bytes);
        // routed experts' FLOPs at the grouped GEMMs' lower efficiency
        let expert = self.expert_flops_per_token * b.tokens() as f64 / self.tp;
        let tokens = b.tokens() as f64;
        let compute_s = (f + expert * (1.0 / self.moe_gemm(tokens) - 1.0)) / (self.peak * self.mfu);
        // offloaded weights come over the host link (no overlap with the GPU's own reads), not
        // from device memory
        let memory_s = (by - self.offload_bytes).max(0.0) / (self.bandwidth * self.mbu);
        let offload_s = self.offload_bytes / self.host_link;
        let link = self.link * self.eff.allreduce_bw_share;
        let activations = b.tokens() as f64 * self.hidden * 2.0;
        let comm_s = if self.tp <= 1.0 {
            0.0
        } else if self.expert_parallel {
            // dispatch and combine: each GPU sends its tokens' top-k copies to the GPUs holding
            // those experts, (tp − 1)/tp of them elsewhere
            let per = activations / self.tp * self.top_k * (self.tp - 1.0) / self.tp / link;
            2.0 * self.layers * (per + self.eff.alltoall_latency_s)
        } else {
            // two ring all-reduces per layer
            let per = 2.0 * (self.tp - 1.0) / self.tp * activations / link;
            2.0 * self.layers * (per + self.eff.allreduce_latency_s)
        };
        let overhead_s = self.eff.step_overhead_s + self.eff.seq_overhead_s * b.seqs() as f64;
        StepTime {
            total_s: compute_s.max(memory_s) + comm_s + overhead_s + offload_s,
            compute_s,
            memory_s,
            comm_s,
            overhead_s,
            offload_s,
            intensity: f / by,
            compute_bound: compute_s > memory_s,
        }
    }
}

/// A digital twin's fitted step cost (`crate::fitted`).
impl StepCost for crate::fitted::FittedStep {
    fn time(&self, b: &BatchShape) -> StepTime {
        let prefill = self.per_prefill_token_s * b.prefill_tokens as f64;
        let decode = self.per_decode_seq_s * (b.decode_seqs + b.verify_seqs) as f64
            + self.per_context_token_s * (b.decode_context + b.prefill_cached) as f64;
        let fixed = if b.prefill_tokens > 0 { self.prefill_overhead_s } else { self.overhead_s };
        StepTime {
            total_s: fixed + prefill + decode,
            compute_s: prefill,
            memory_s: decode,
            overhead_s: fixed,
            compute_bound: prefill > decode,
            ..StepTime::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn model(name: &str, gpu: &str) -> (EngineConfig, Roofline) {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model(name).unwrap().clone(), c.gpu(gpu).unwrap().clone());
        cfg.efficiency = Efficiency::peak();
        let m = Roofline::new(&cfg);
        (cfg, m)
    }

    #[test]
    fn batch_one_decode_is_memory_bound_at_weights_over_bandwidth() {
        // Llama-3.1-8B BF16 on one H100 at batch 1: ~16 GB of weights / 3.35 TB/s ≈ 4.8 ms
        let (_, m) = model("llama-3.1-8b", "h100");
        let mut b = BatchShape::default();
        b.add_decode(100);
        let t = m.time(&b);
        assert!(!t.compute_bound);
        // the back-of-envelope "16 GB / 3.35 TB/s ≈ 4.8 ms" counts the input embedding,
        // which a decode step only looks up: 15.01 GB / 3.35 TB/s ≈ 4.48 ms, within 7% of it
        assert!((t.memory_s * 1e3 - 4.48).abs() < 0.02, "{} ms", t.memory_s * 1e3);
        assert!((t.memory_s * 1e3 / 4.8 - 1.0).abs() < 0.08);
        // 15.01 GB dense weights (the input embedding is a lookup) + 101 · 128 KiB of KV
        let expect = (m.dense_weight_bytes + 101.0 * 131072.0) / 3.35e12;
        assert!((t.memory_s - expect).abs() < 1e-12);
        // arithmetic intensity ≈ 1 FLOP/byte, far below the ridge point 295
        assert!(t.intensity < 2.0, "{}", t.intensity);
    }

    #[test]
    fn long_prefill_is_compute_bound() {
        let (cfg, m) = model("llama-3.1-8b", "h100");
        let mut b = BatchShape::default();
        b.add_prefill(1024, 0);
        b.sampled = 1;
        let t = m.time(&b);
        assert!(t.compute_bound);
        assert!(t.intensity > cfg.gpu.ridge_point(Dtype::Bf16), "{} vs 295", t.intensity);
        // FLOPs by hand: 2 · (8.03e9 − 2 · 0.525e9) · 1024 + 2 · 0.525e9 + 4 · 32 · 4096 · 1024²/2
        let body = 2.0 * (cfg.model.active_params() as f64 - 2.0 * 128256.0 * 4096.0) * 1024.0;
        let flops = body + 2.0 * 128256.0 * 4096.0 + 4.0 * 32.0 * 4096.0 * 1024.0 * 1024.0 / 2.0;
        assert!((t.compute_s - flops / 989.4e12).abs() < 1e-9);
        assert!((t.compute_s * 1e3 - 14.6).abs() < 0.3, "{} ms", t.compute_s * 1e3);
    }

    #[test]
    fn tensor_parallel_splits_work_and_adds_allreduces() {
        let (mut cfg, m1) = model("llama-3.1-70b", "h100");
        cfg.tp = 4;
        cfg.efficiency.allreduce_latency_s = 10e-6;
        let m4 = Roofline::new(&cfg);
        let mut b = BatchShape::default();
        for _ in 0..8 {
            b.add_decode(500);
        }
        let (t1, t4) = (m1.time(&b), m4.time(&b));
        assert!((t4.memory_s - t1.memory_s / 4.0).abs() < 1e-12);
        // 2 all-reduces × 80 layers × (1.5 · 8 · 8192 · 2 B / 900 GB/s + 10 µs)
        let per = 1.5 * 8.0 * 8192.0 * 2.0 / 900e9 + 10e-6;
        assert!((t4.comm_s - 160.0 * per).abs() < 1e-12);
    }

    #[test]
    fn collectives_run_at_their_share_of_the_link() {
        let (mut cfg, _) = model("llama-3.1-70b", "h100");
        cfg.tp = 4;
        cfg.efficiency.allreduce_bw_share = 0.25;
        let m = Roofline::new(&cfg);
        let mut b = BatchShape::default();
        for _ in 0..8 {
            b.add_decode(500);
        }
        // 2 all-reduces × 80 layers × 1.5 · 8 · 8192 · 2 B / (0.25 · 900 GB/s)
        let per = 1.5 * 8.0 * 8192.0 * 2.0 / 225e9;
        assert!((m.time(&b).comm_s - 160.0 * per).abs() < 1e-12);
    }

    #[test]
    fn small_gemms_run_below_the_mfu_by_their_size() {
        let (mut cfg, at_peak) = model("llama-3.1-8b", "h100");
        let per_layer = (cfg.model.active_params() - cfg.model.embed_and_head_params()) as f64 / 32.0;
        cfg.efficiency.mfu_half_params = per_layer;
        // the whole layer on one GPU is the half point: half the MFU, so a prefill takes twice
        // its time at peak
        let m = Roofline::new(&cfg);
        assert!((m.gemm_size_share() - 0.5).abs() < 1e-12);
        let mut p = BatchShape::default();
        p.add_prefill(1024, 0);
        assert!((m.time(&p).compute_s / at_peak.time(&p).compute_s - 2.0).abs() < 1e-9);
        // split over 4 GPUs each GEMM is a quarter the size: 1/4 ÷ (1/4 + 1) of the MFU
        cfg.tp = 4;
        assert!((Roofline::new(&cfg).gemm_size_share() - 0.2).abs() < 1e-12);
        // batch-1 decode stays memory-bound
        let mut d = BatchShape::default();
        d.add_decode(100);
        assert!(!Roofline::new(&cfg).time(&d).compute_bound);
    }

    #[test]
    fn expert_parallelism_trades_all_reduces_for_all_to_alls_and_reads_attention_whole() {
        let (mut tp, _) = model("mixtral-8x7b", "h100");
        tp.tp = 4;
        tp.efficiency.alltoall_latency_s = 20e-6;
        let mut ep = tp.clone();
        ep.expert_parallel = true;
        let (mt, me) = (Roofline::new(&tp), Roofline::new(&ep));
        let mut b = BatchShape::default();
        for _ in 0..64 {
            b.add_decode(100);
        }
        let (t, e) = (mt.time(&b), me.time(&b));
        // 2 all-to-alls × 32 layers × (64 tokens / 4 · top-2 · 4096 · 2 B · 3/4 / 900 GB/s + 20 µs)
        let per = 64.0 / 4.0 * 2.0 * 4096.0 * 2.0 * 0.75 / 900e9 + 20e-6;
        assert!((e.comm_s - 64.0 * per).abs() < 1e-12, "{} vs {}", e.comm_s, 64.0 * per);
        // every GPU reads the whole attention: 3/4 of it more than under tensor parallelism
        let attn = (32 * tp.model.attn_params()) as f64 * 2.0;
        assert!((e.memory_s - t.memory_s - 0.75 * attn / 3.35e12).abs() < 1e-12);
        // memory: the attention on every GPU
        assert!((ep.weight_bytes_per_gpu() - tp.weight_bytes_per_gpu() - 0.75 * attn).abs() < 1.0);
    }

    #[test]
    fn moe_reads_expected_distinct_experts() {
        let (_, m) = model("mixtral-8x7b", "h100");
        // one token touches 2 of 8; many tokens touch all 8
        assert!((m.distinct_experts(1.0) - 2.0).abs() < 1e-12);
        assert!((m.distinct_experts(2.0) - 8.0 * (1.0 - 0.75f64.powi(2))).abs() < 1e-12);
        assert!(m.distinct_experts(200.0) > 7.99);
        let mut small = BatchShape::default();
        small.add_decode(10);
        let mut big = BatchShape::default();
        for _ in 0..64 {
            big.add_decode(10);
        }
        let (_, b1) = m.work(&small);
        let (_, b64) = m.work(&big);
        assert!(b64 > b1 * 2.5, "a big batch reads nearly all experts");
    }

    #[test]
    fn routed_experts_compute_at_the_grouped_gemm_efficiency() {
        let (mut cfg, full) = model("mixtral-8x7b", "h100");
        cfg.efficiency.moe_gemm = 0.5;
        let half = Roofline::new(&cfg);
        let mut b = BatchShape::default();
        b.add_prefill(1000, 0);
        // per token: 2 · 32 layers · top-2 · (3 · 4096 · 14336) expert parameters = 45.1 GFLOP,
        // at half efficiency they take twice as long: the difference is their time once more
        let expert = 2.0 * 32.0 * 2.0 * 3.0 * 4096.0 * 14336.0 * 1000.0;
        let extra = half.time(&b).compute_s - full.time(&b).compute_s;
        assert!((extra - expert / 989.4e12).abs() < 1e-9, "{extra}");
        // a dense model has no routed experts: unchanged
        let (mut d, dense) = model("llama-3.1-8b", "h100");
        d.efficiency.moe_gemm = 0.5;
        assert_eq!(Roofline::new(&d).time(&b).compute_s, dense.time(&b).compute_s);
    }

    #[test]
    fn fp4_weights_use_their_own_efficiency() {
        let (mut cfg, _) = model("llama-3.1-70b", "b200");
        cfg.dtype = Dtype::Fp4;
        cfg.efficiency.fp4_mfu = 0.5;
        cfg.efficiency.fp4_mbu = 0.25;
        let m = Roofline::new(&cfg);
        let mut b = BatchShape::default();
        b.add_decode(1000);
        let (flops, bytes) = m.work(&b);
        let t = m.time(&b);
        // FP4 peak 9000 TFLOP/s at 50%, 8 TB/s at 25%
        assert!((t.compute_s - flops / (9000e12 * 0.5)).abs() < 1e-12);
        assert!((t.memory_s - bytes / (8e12 * 0.25)).abs() < 1e-12);
    }

    #[test]
    fn offloaded_weights_stream_over_the_host_link() {
        // Llama-3.1-70B in FP8 (70.6 GB) on one 32 GB RTX 5090: 46 GB stay in host memory
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model("llama-3.1-70b").unwrap().clone(), c.gpu("rtx5090").unwrap().clone());
        cfg.dtype = Dtype::Fp8;
        assert!(cfg.plan().unwrap_err().to_string().contains("--tp 4 or more"));
        cfg.cpu_offload_gb = 46.0;
        let plan = cfg.plan().unwrap();
        assert!((plan.offloaded_gb - 46.0).abs() < 1e-9 && plan.weights_gb < 25.0, "{plan:?}");
        let r = Roofline::new(&cfg);
        let mut b = BatchShape::default();
        b.add_decode(1024);
        let t = r.time(&b);
        // PCIe 5.0 x16: 46 GB at 63 GB/s every step, on top of the GPU's own reads of the rest
        assert!((t.offload_s - 46e9 / 63e9).abs() < 1e-12);
        let (_, bytes) = r.work(&b);
        let device = (bytes - 46e9) / (1.792e12 * 0.8);
        assert!((t.memory_s - device).abs() < 1e-12);
        assert!((t.total_s - (t.compute_s.max(device) + 0.002 + 46e9 / 63e9)).abs() < 1e-12);
        // about 1.3 tokens/s: the host link, not the GPU, decides
        assert!((1.2..1.45).contains(&(1.0 / t.total_s)), "{}", 1.0 / t.total_s);
        // more offload than weights is refused
        cfg.cpu_offload_gb = 100.0;
        assert!(cfg.plan().unwrap_err().to_string().contains("more than the 70.6 GB"));
    }

    #[test]
    fn a_unified_memory_workstation_reads_every_weight_per_token() {
        // Llama-70B in 16-bit on an M2 Ultra (192 GB at 800 GB/s): a batch-1 decode step reads
        // ~139 GB at 0.8 × 800 GB/s ≈ 0.22 s, 4.6 tokens/s; llama.cpp measured 4.8 (F16, research
        // notes planner-data §2d)
        let c = Catalog::builtin();
        let cfg = EngineConfig::new(c.model("llama-3.1-70b").unwrap().clone(), c.gpu("m2-ultra").unwrap().clone());
        cfg.plan().unwrap();
        let mut b = BatchShape::default();
        b.add_decode(512);
        let tps = 1.0 / Roofline::new(&cfg).time(&b).total_s;
        assert!((tps / 4.8 - 1.0).abs() < 0.15, "{tps}");
    }
}
