//! Engine presets: the defaults vLLM, SGLang and TensorRT-LLM use, so that a prediction for
//! "TensorRT-LLM on H200" does not need the user to know its settings. Sources and versions are
//! in docs/engine.md ("Engine presets").
//!
//! A preset is applied in two steps around the user's flags: [`Preset::apply`] sets the engine's
//! defaults first (flags override them), then [`Preset::derive`] computes the settings that
//! depend on the others (the memory share, SGLang's request pool) for those the user did not
//! give.

use crate::catalog::Dtype;
use crate::config::{EngineConfig, Preset, Scheduling};

/// Which settings the user gave explicitly (a preset derives only the others).
#[derive(Clone, Copy, Debug, Default)]
pub struct Given {
    pub memory_utilization: bool,
    pub max_num_seqs: bool,
    pub kv_dtype: bool,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

impl Preset {
    /// Sets the engine's defaults for the configuration's model and GPU.
    pub fn apply(self, c: &mut EngineConfig) {
        let mem_gb = c.gpu.memory_gb;
        match self {
            Preset::Vllm => {
                // vLLM raises its limits on large GPUs other than the A100 (arg_utils.py)
                let large = c.gpu.memory_bytes() >= 70.0 * GIB && !c.gpu.name.to_ascii_lowercase().contains("a100");
                c.max_batched_tokens = if large { 8192 } else { 2048 };
                c.max_num_seqs = (if large { 1024 } else { 256 }).min(c.max_batched_tokens);
                c.set_scheduling(Scheduling::Chunked);
                c.prefix_caching = true;
                c.block_size = 16;
                c.gpu_memory_utilization = 0.9;
            }
            Preset::Sglang => {
                // chunked_prefill_size by GPU memory (server_args.py)
                c.max_batched_tokens = match mem_gb {
                    m if m < 35.0 => 2048,
                    m if m < 60.0 => 4096,
                    m if m < 160.0 => 8192,
                    _ => 16384,
                };
                c.set_scheduling(Scheduling::Chunked);
                c.prefix_caching = true;
                c.block_size = 1;
            }
            Preset::Trtllm => {
                c.max_num_seqs = 2048;
                c.max_batched_tokens = 8192;
                // in-flight batching: context and generation requests share each iteration within
                // max_num_tokens; without chunked prefill a prompt joins whole in the budget left
                c.set_scheduling(Scheduling::DecodeFirst);
                c.prefix_caching = true;
                c.block_size = 32;
            }
        }
    }

    /// Settings that depend on the others, for those not in `given`.
    pub fn derive(self, c: &mut EngineConfig, given: Given) {
        match self {
            Preset::Vllm => {
                if !given.max_num_seqs {
                    // vLLM caps its default by the token budget
                    c.max_num_seqs = c.max_num_seqs.min(c.max_batched_tokens);
                }
            }
            Preset::Sglang => {
                if !given.memory_utilization {
                    c.gpu_memory_utilization = sglang_mem_fraction(c);
                }
                if !given.max_num_seqs {
                    // the request pool: max_total_tokens / context × 512, within [2048, 4096]
                    if let Ok(p) = c.plan() {
                        let pool = (p.kv_tokens as f64 / c.context().max(1) as f64 * 512.0) as u32;
                        c.max_num_seqs = pool.clamp(2048, 4096);
                    }
                }
            }
            Preset::Trtllm => {
                if !given.kv_dtype && matches!(c.dtype, Dtype::Fp8 | Dtype::Fp4) {
                    // quantized checkpoints carry an FP8 KV cache
                    c.kv_dtype = Dtype::Fp8;
                }
                if !given.memory_utilization {
                    // 90% of the memory left after weights and buffers goes to the KV cache
                    let mut probe = c.clone();
                    probe.gpu_memory_utilization = 1.0;
                    if let Ok(p) = probe.plan() {
                        let fixed = p.weights_gb + p.activation_reserve_gb;
                        let total = c.gpu.memory_gb;
                        c.gpu_memory_utilization = ((fixed + 0.9 * (total - fixed)) / total).clamp(0.05, 1.0);
                    }
                }
            }
        }
    }
}

/// SGLang's `mem_fraction_static`: the memory left after a reserve for activations (by chunk
/// size), CUDA graphs and tensor-parallel buffers, at least 10 GB on GPUs over 60 GB.
fn sglang_mem_fraction(c: &EngineConfig) -> f64 {
    let mem_gb = c.gpu.memory_gb;
    let graph_bs = match mem_gb {
        m if m >= 160.0 => 512.0,
        m if m >= 60.0 => {
            if c.tp < 4 {
                256.0
            } else {
                512.0
            }
        }
        _ => 160.0,
    };
    let mut reserved_mb =
        512.0 + 1.5 * (c.max_batched_tokens.max(2048) as f64) + 2.0 * graph_bs + c.tp as f64 / 8.0 * 1024.0;
    if mem_gb > 60.0 {
        reserved_mb = reserved_mb.max(10.0 * 1024.0);
    }
    let total_mb = mem_gb * 1e9 / (1024.0 * 1024.0);
    ((total_mb - reserved_mb) / total_mb).clamp(0.05, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::cfg;

    #[test]
    fn vllm_raises_its_limits_on_large_gpus_but_not_the_a100() {
        let mut h = cfg("llama-3.1-8b", "h100");
        Preset::Vllm.apply(&mut h);
        assert_eq!((h.max_num_seqs, h.max_batched_tokens), (1024, 8192));
        assert_eq!(h.scheduling(), Scheduling::Chunked);
        assert!(h.prefix_caching);
        let mut a = cfg("llama-3.1-8b", "a100");
        Preset::Vllm.apply(&mut a);
        assert_eq!((a.max_num_seqs, a.max_batched_tokens), (256, 2048));
    }

    #[test]
    fn sglang_reserves_by_chunk_size() {
        let mut c = cfg("llama-3.1-8b", "h100");
        Preset::Sglang.apply(&mut c);
        assert_eq!((c.max_batched_tokens, c.block_size), (8192, 1));
        Preset::Sglang.derive(&mut c, Given::default());
        // 512 + 1.5 × 8192 + 2 × 256 + 1/8 × 1024 = 13,440 MB of 80 GB (76,294 MiB)
        let total = 80e9 / 1048576.0;
        assert!((c.gpu_memory_utilization - (total - 13440.0) / total).abs() < 1e-9);
        assert!((2048..=4096).contains(&c.max_num_seqs));
    }

    #[test]
    fn trtllm_gives_ninety_percent_of_free_memory_to_kv() {
        let mut c = cfg("llama-3.1-8b", "h100");
        Preset::Trtllm.apply(&mut c);
        c.dtype = Dtype::Fp8;
        Preset::Trtllm.derive(&mut c, Given::default());
        assert_eq!(c.kv_dtype, Dtype::Fp8);
        assert_eq!((c.max_num_seqs, c.block_size), (2048, 32));
        let p = c.plan().unwrap();
        let free = 80.0 - p.weights_gb - p.activation_reserve_gb;
        assert!((p.kv_gb - 0.9 * free).abs() < 0.05, "{} vs {}", p.kv_gb, 0.9 * free);
        // an explicit KV format stays
        let mut d = cfg("llama-3.1-8b", "h100");
        d.dtype = Dtype::Fp8;
        Preset::Trtllm.derive(&mut d, Given { kv_dtype: true, ..Given::default() });
        assert_eq!(d.kv_dtype, Dtype::Bf16);
    }
}
