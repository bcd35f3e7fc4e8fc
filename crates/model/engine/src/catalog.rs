//! The hardware and model catalog: GPUs (dense peaks) and model architectures, read at start-up
//! from the data files in `crates/engine/data/`, plus quantities derived from an architecture:
//! parameter counts, weight bytes, KV bytes per token, FLOPs per token.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// Number formats for weights and the KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    #[default]
    Bf16,
    Fp8,
    Fp4,
}

impl Dtype {
    pub fn bytes(self) -> f64 {
        match self {
            Dtype::Bf16 => 2.0,
            Dtype::Fp8 => 1.0,
            Dtype::Fp4 => 0.5,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp8 => "fp8",
            Dtype::Fp4 => "fp4",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" | "fp16" | "bfloat16" | "float16" => Some(Dtype::Bf16),
            "fp8" | "float8" => Some(Dtype::Fp8),
            "fp4" | "nvfp4" => Some(Dtype::Fp4),
            _ => None,
        }
    }
}

/// One accelerator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub name: String,
    #[serde(default)]
    pub full_name: String,
    /// Dense peak TFLOPS for each compute format (fp8/fp4 absent where unsupported).
    pub tflops_bf16: f64,
    #[serde(default)]
    pub tflops_fp8: Option<f64>,
    #[serde(default)]
    pub tflops_fp4: Option<f64>,
    /// Memory in GB (1e9 bytes).
    pub memory_gb: f64,
    /// Memory bandwidth in TB/s (1e12 bytes/s).
    pub bandwidth_tbs: f64,
    #[serde(default)]
    pub link: String,
    /// Per-GPU scale-up link bandwidth, GB/s.
    pub link_gbs: f64,
    /// Optional rental price, $ per GPU-hour (for cost per million tokens).
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    /// Bandwidth to host memory, GB/s per direction (PCIe), for weights offloaded to the host
    /// (`--cpu-offload-gb`); [`DEFAULT_HOST_LINK_GBS`] when not given.
    #[serde(default)]
    pub host_link_gbs: Option<f64>,
    /// Runs quantized weights of any width by dequantizing them as it reads them (llama.cpp's
    /// kernels on local machines), computing at its BF16 rate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dequantizes: bool,
}

/// PCIe 4.0 x16, one direction: the host link assumed when a GPU does not name its own.
pub const DEFAULT_HOST_LINK_GBS: f64 = 31.5;

impl Gpu {
    /// Peak FLOP/s when computing in `d` (falls back to the next wider format the GPU supports).
    pub fn peak_flops(&self, d: Dtype) -> f64 {
        let t = match d {
            Dtype::Fp4 => self.tflops_fp4.or(self.tflops_fp8).unwrap_or(self.tflops_bf16),
            Dtype::Fp8 => self.tflops_fp8.unwrap_or(self.tflops_bf16),
            Dtype::Bf16 => self.tflops_bf16,
        };
        t * 1e12
    }
    /// Whether a deployment can serve `d` weights on it: FP4 needs FP4 tensor cores (a GPU
    /// without them is refused rather than priced as if it had them) unless the machine runs
    /// quantized weights by dequantizing them as they are read (`dequantizes`); FP8 runs
    /// everywhere (weight-only on GPUs without FP8 tensor cores, computed at BF16, as vLLM's
    /// Marlin kernels do).
    pub fn runs(&self, d: Dtype) -> bool {
        d != Dtype::Fp4 || self.tflops_fp4.is_some() || self.dequantizes
    }
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth_tbs * 1e12
    }
    /// Bytes per second to host memory.
    pub fn host_link(&self) -> f64 {
        self.host_link_gbs.unwrap_or(DEFAULT_HOST_LINK_GBS) * 1e9
    }

    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * 1e9
    }
    /// Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound.
    pub fn ridge_point(&self, d: Dtype) -> f64 {
        self.peak_flops(d) / self.bandwidth()
    }
}

/// A transformer's architecture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelArch {
    pub name: String,
    #[serde(default)]
    pub hf_id: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    /// Defaults to `hidden / heads`.
    #[serde(default)]
    pub head_dim: Option<u64>,
    /// Dense MLP width (0 for a pure mixture-of-experts MLP).
    #[serde(default)]
    pub ffn: u64,
    pub vocab: u64,
    pub max_context: u64,
    #[serde(default)]
    pub tied_embeddings: bool,
    #[serde(default)]
    pub qkv_bias: bool,
    /// Routed experts per MoE layer (0: dense model), experts per token, always-on shared experts.
    #[serde(default)]
    pub experts: u64,
    #[serde(default)]
    pub top_k: u64,
    #[serde(default)]
    pub shared_experts: u64,
    /// Width of one expert's MLP.
    #[serde(default)]
    pub expert_ffn: u64,
}

impl ModelArch {
    pub fn head_dim(&self) -> u64 {
        self.head_dim.unwrap_or(self.hidden / self.heads.max(1))
    }
    pub fn is_moe(&self) -> bool {
        self.experts > 0
    }
    /// Attention parameters per layer (Q, K, V, O projections, optional QKV bias).
    pub fn attn_params(&self) -> u64 {
        let q = self.heads * self.head_dim();
        let kv = self.kv_heads * self.head_dim();
        let bias = if self.qkv_bias { q + 2 * kv } else { 0 };
        self.hidden * q + 2 * self.hidden * kv + q * self.hidden + bias
    }
    /// One SwiGLU MLP of width `w`: gate, up and down projections.
    fn mlp(&self, w: u64) -> u64 {
        3 * self.hidden * w
    }
    /// Parameters of one routed expert.
    pub fn expert_params(&self) -> u64 {
        self.mlp(self.expert_ffn)
    }
    /// Per-layer parameters that every token uses (attention, dense MLP, shared experts, router, norms).
    pub fn dense_layer_params(&self) -> u64 {
        let router = if self.is_moe() { self.hidden * self.experts } else { 0 };
        self.attn_params() + self.mlp(self.ffn) + self.shared_experts * self.expert_params() + router + 2 * self.hidden
    }
    pub fn embedding_params(&self) -> u64 {
        self.vocab * self.hidden
    }
    /// Input embedding plus (unless tied) the output head.
    pub fn embed_and_head_params(&self) -> u64 {
        self.embedding_params() * if self.tied_embeddings { 1 } else { 2 }
    }
    pub fn total_params(&self) -> u64 {
        self.layers * (self.dense_layer_params() + self.experts * self.expert_params())
            + self.embed_and_head_params()
            + self.hidden
    }
    /// Parameters one token touches: dense parts plus `top_k` routed experts per layer.
    pub fn active_params(&self) -> u64 {
        self.layers * (self.dense_layer_params() + self.top_k * self.expert_params())
            + self.embed_and_head_params()
            + self.hidden
    }
    /// Bytes of all weights in `d`.
    pub fn weight_bytes(&self, d: Dtype) -> f64 {
        self.total_params() as f64 * d.bytes()
    }
    /// The attention's weights, every layer's.
    pub fn attn_weight_bytes(&self, d: Dtype) -> f64 {
        (self.layers * self.attn_params()) as f64 * d.bytes()
    }
    /// `2 · layers · kv_heads · head_dim · bytes`.
    pub fn kv_bytes_per_token(&self, d: Dtype) -> f64 {
        (2 * self.layers * self.kv_heads * self.head_dim()) as f64 * d.bytes()
    }
    /// Forward FLOPs for one token attending to `context` earlier tokens:
    /// `2 · N_active + 4 · layers · context · heads · head_dim`.
    pub fn flops_per_token(&self, context: u64) -> f64 {
        2.0 * self.active_params() as f64 + 4.0 * (self.layers * context * self.heads * self.head_dim()) as f64
    }
}

#[derive(Deserialize)]
struct GpuFile {
    #[serde(default)]
    gpu: Vec<Gpu>,
}

#[derive(Deserialize)]
struct ModelFile {
    #[serde(default)]
    model: Vec<ModelArch>,
}

const GPUS: &str = include_str!("../data/gpus.toml");
const MODELS: &str = include_str!("../data/models.toml");

/// Every known GPU and model, by command-line name.
#[derive(Clone, Debug)]
pub struct Catalog {
    pub gpus: BTreeMap<String, Gpu>,
    pub models: BTreeMap<String, ModelArch>,
}

impl Catalog {
    /// The built-in catalog (the data files are compiled in and parsed here).
    pub fn builtin() -> Self {
        let gpus: GpuFile = toml::from_str(GPUS).expect("built-in gpus.toml parses");
        let models: ModelFile = toml::from_str(MODELS).expect("built-in models.toml parses");
        Catalog {
            gpus: gpus.gpu.into_iter().map(|g| (g.name.clone(), g)).collect(),
            models: models.model.into_iter().map(|m| (m.name.clone(), m)).collect(),
        }
    }

    /// Adds the GPUs of a `--gpu-spec` TOML file (same format as `data/gpus.toml`).
    pub fn add_gpu_file(&mut self, path: &str, text: &str) -> Result<Vec<String>, EngineError> {
        let f: GpuFile =
            toml::from_str(text).map_err(|e| EngineError::Spec { file: path.into(), message: e.to_string() })?;
        if f.gpu.is_empty() {
            return Err(EngineError::Spec { file: path.into(), message: "no [[gpu]] tables".into() });
        }
        let mut names = Vec::new();
        for g in f.gpu {
            if g.tflops_bf16 <= 0.0 || g.bandwidth_tbs <= 0.0 || g.memory_gb <= 0.0 {
                return Err(EngineError::Spec {
                    file: path.into(),
                    message: format!("gpu `{}`: tflops_bf16, bandwidth_tbs and memory_gb must be positive", g.name),
                });
            }
            names.push(g.name.clone());
            self.gpus.insert(g.name.clone(), g);
        }
        Ok(names)
    }

    pub fn gpu(&self, name: &str) -> Result<&Gpu, EngineError> {
        self.gpus.get(&name.to_ascii_lowercase()).ok_or_else(|| EngineError::Unknown {
            what: "GPU",
            name: name.into(),
            known: self.gpus.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    pub fn model(&self, name: &str) -> Result<&ModelArch, EngineError> {
        self.models.get(&name.to_ascii_lowercase()).ok_or_else(|| EngineError::Unknown {
            what: "model",
            name: name.into(),
            known: self.models.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }
}

/// Reads a Hugging Face `config.json` (Llama, Mistral/Mixtral, Qwen2/Qwen2-MoE, Llama 4 and
/// similar decoder-only layouts; a nested `text_config` is used when present).
pub fn from_hf_config(path: &str, text: &str, name: &str) -> Result<ModelArch, EngineError> {
    let err = |m: String| EngineError::Spec { file: path.into(), message: m };
    let root: serde_json::Value = serde_json::from_str(text).map_err(|e| err(format!("invalid JSON: {e}")))?;
    let c = root.get("text_config").filter(|v| v.is_object()).unwrap_or(&root);
    let get = |keys: &[&str]| keys.iter().find_map(|k| c.get(*k).and_then(|v| v.as_u64()));
    let need = |keys: &[&str]| get(keys).ok_or_else(|| err(format!("missing field `{}`", keys[0])));
    let experts = get(&["num_local_experts", "num_experts", "n_routed_experts"]).unwrap_or(0);
    let expert_ffn = if experts > 0 { get(&["moe_intermediate_size", "intermediate_size"]).unwrap_or(0) } else { 0 };
    let shared = if experts > 0 {
        get(&["n_shared_experts", "num_shared_experts"])
            .or_else(|| c.get("shared_expert_intermediate_size").map(|_| 1))
            .unwrap_or(if c.get("model_type").and_then(|v| v.as_str()) == Some("llama4_text") { 1 } else { 0 })
    } else {
        0
    };
    let arch = ModelArch {
        name: name.to_string(),
        hf_id: root.get("_name_or_path").and_then(|v| v.as_str()).unwrap_or_default().to_string(),
        layers: need(&["num_hidden_layers", "n_layer", "num_layers"])?,
        hidden: need(&["hidden_size", "n_embd", "d_model"])?,
        heads: need(&["num_attention_heads", "n_head"])?,
        kv_heads: get(&["num_key_value_heads"]).or(get(&["num_attention_heads"])).unwrap_or(1),
        head_dim: get(&["head_dim"]),
        ffn: if experts > 0 { 0 } else { need(&["intermediate_size", "n_inner"])? },
        vocab: need(&["vocab_size"])?,
        max_context: get(&["max_position_embeddings", "n_positions", "max_sequence_length"]).unwrap_or(4096),
        tied_embeddings: c
            .get("tie_word_embeddings")
            .or(root.get("tie_word_embeddings"))
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        qkv_bias: c.get("attention_bias").and_then(|v| v.as_bool()).unwrap_or(false)
            || c.get("model_type").and_then(|v| v.as_str()).is_some_and(|t| t.starts_with("qwen2")),
        experts,
        top_k: if experts > 0 { get(&["num_experts_per_tok", "moe_topk"]).unwrap_or(1) } else { 0 },
        shared_experts: shared,
        expert_ffn,
    };
    if arch.heads == 0 || arch.layers == 0 || arch.hidden == 0 {
        return Err(err("layers, hidden size and heads must be positive".into()));
    }
    Ok(arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn billions(x: u64) -> f64 {
        x as f64 / 1e9
    }

    #[test]
    fn parameter_counts_match_published_sizes() {
        let c = Catalog::builtin();
        // published sizes (../shared/reference/published-figures.md), within 1%
        for (name, total, active) in [
            ("llama-2-7b", 6.74, 6.74),
            ("llama-2-13b", 13.0, 13.0),
            ("llama-2-70b", 69.0, 69.0),
            ("llama-3.1-8b", 8.03, 8.03),
            ("llama-3.1-70b", 70.6, 70.6),
            ("llama-3.1-405b", 405.9, 405.9),
            ("mixtral-8x7b", 46.7, 12.9),
            ("qwen2.5-7b", 7.6, 7.6),
            ("llama-4-scout", 108.0, 17.2),
            ("mixtral-8x22b", 141.0, 39.0),
            ("qwen3-30b-a3b", 30.5, 3.35), // "3.3B" on the model card, rounded
            ("qwen3-235b-a22b", 235.0, 22.0),
        ] {
            let m = c.model(name).unwrap();
            let (t, a) = (billions(m.total_params()), billions(m.active_params()));
            assert!((t / total - 1.0).abs() < 0.01, "{name}: total {t:.3}B vs {total}B");
            assert!((a / active - 1.0).abs() < 0.01, "{name}: active {a:.3}B vs {active}B");
        }
    }

    #[test]
    fn kv_bytes_per_token_match_published() {
        let c = Catalog::builtin();
        for (name, kib) in [
            ("llama-2-7b", 512.0),
            ("llama-2-13b", 800.0),
            ("llama-2-70b", 320.0),
            ("llama-3.1-8b", 128.0),
            ("llama-3.1-70b", 320.0),
            ("llama-3.1-405b", 504.0),
            ("mixtral-8x7b", 128.0),
            ("qwen2.5-7b", 56.0),
            ("llama-4-scout", 192.0),
        ] {
            assert_eq!(c.model(name).unwrap().kv_bytes_per_token(Dtype::Bf16) / 1024.0, kib, "{name}");
        }
        assert_eq!(c.model("llama-3.1-8b").unwrap().kv_bytes_per_token(Dtype::Fp8), 65536.0);
    }

    #[test]
    fn weights_and_flops() {
        let c = Catalog::builtin();
        let m = c.model("llama-2-70b").unwrap();
        // 68.98e9 params × 2 bytes ≈ 138 GB
        assert_eq!((m.weight_bytes(Dtype::Bf16) / 1e9).round(), 138.0);
        let m = c.model("llama-3.1-8b").unwrap();
        // 2 · 8.03e9 + 4 · 32 · 1000 · 4096 at context 1000
        let f = m.flops_per_token(1000);
        assert!((f - (2.0 * m.active_params() as f64 + 4.0 * 32.0 * 1000.0 * 4096.0)).abs() < 1.0);
        assert!((f / 1e9 - 16.58).abs() < 0.05, "{}", f / 1e9);
    }

    #[test]
    fn gpus_and_ridge_points() {
        let c = Catalog::builtin();
        let h100 = c.gpu("h100").unwrap();
        assert!((h100.ridge_point(Dtype::Bf16) - 295.3).abs() < 0.5);
        assert!((c.gpu("a100").unwrap().ridge_point(Dtype::Bf16) - 153.0).abs() < 0.5);
        assert_eq!(c.gpu("A100").unwrap().peak_flops(Dtype::Fp8), 312e12, "no FP8: falls back to BF16");
        assert_eq!(c.gpus.len(), 8, "six data-centre GPUs, a consumer card and a workstation");
        let e = c.gpu("tpu").unwrap_err().to_string();
        assert!(e.contains("a100") && e.contains("l40s"), "{e}");
        assert!(c.model("gpt-5").unwrap_err().to_string().contains("llama-3.1-8b"));
    }

    #[test]
    fn gpu_spec_file() {
        let mut c = Catalog::builtin();
        let names = c
            .add_gpu_file("x.toml", "[[gpu]]\nname = \"rtx4090\"\ntflops_bf16 = 165.2\nmemory_gb = 24\nbandwidth_tbs = 1.008\nlink_gbs = 32\n")
            .unwrap();
        assert_eq!(names, vec!["rtx4090"]);
        assert!(c.gpu("rtx4090").is_ok());
        let e = c.add_gpu_file("bad.toml", "[[gpu]]\nname = 3\n").unwrap_err().to_string();
        assert!(e.contains("bad.toml"), "{e}");
    }

    #[test]
    fn hf_config_json() {
        let llama = r#"{"_name_or_path":"meta-llama/Meta-Llama-3-8B","hidden_size":4096,"intermediate_size":14336,
            "max_position_embeddings":8192,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
            "vocab_size":128256,"tie_word_embeddings":false,"model_type":"llama"}"#;
        let m = from_hf_config("config.json", llama, "llama-3-8b").unwrap();
        assert_eq!(m.total_params(), Catalog::builtin().model("llama-3.1-8b").unwrap().total_params());
        let mixtral = r#"{"hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,
            "num_key_value_heads":8,"vocab_size":32000,"num_local_experts":8,"num_experts_per_tok":2,"max_position_embeddings":32768}"#;
        let m = from_hf_config("c.json", mixtral, "mixtral").unwrap();
        assert!((billions(m.active_params()) - 12.9).abs() < 0.1);
        let e = from_hf_config("c.json", r#"{"hidden_size": 1}"#, "x").unwrap_err().to_string();
        assert!(e.contains("c.json") && e.contains("num_hidden_layers"), "{e}");
    }
}
