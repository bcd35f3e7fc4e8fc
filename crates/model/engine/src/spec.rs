//! An engine as typed choices ([`EngineSpec`]): what a plan asks for, each setting given or left
//! to the engine's preset. One builder turns it into the resolved [`EngineConfig`] whoever made
//! it: the command line parses its flags into a spec once, and the planner builds one per
//! candidate from values, so no setting is ever written back into a flag to be parsed again.

use crate::catalog::{Dtype, Gpu, ModelArch};
use crate::config::{Batching, EngineConfig, KvAlloc, Prealloc, Preset, Scheduling, Speculative};
use crate::preset::Given;
use crate::topology::{Disaggregation, Router};

/// Every engine setting a plan may choose; `None` keeps the preset's (or the model's) default.
/// [`EngineSpec::overlay`] puts one spec's choices on top of another's (flags on a twin).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineSpec {
    /// The engine whose defaults apply (vLLM when not given).
    pub preset: Option<Preset>,
    pub tp: Option<u32>,
    pub dtype: Option<Dtype>,
    pub kv_dtype: Option<Dtype>,
    pub max_num_seqs: Option<u32>,
    pub max_batched_tokens: Option<u32>,
    pub gpu_memory_utilization: Option<f64>,
    pub block_size: Option<u32>,
    pub max_model_len: Option<u64>,
    pub cpu_offload_gb: Option<f64>,
    pub max_waiting: Option<usize>,
    pub scheduling: Option<Scheduling>,
    pub batching: Option<Batching>,
    pub batch_timeout_s: Option<f64>,
    pub kv_alloc: Option<KvAlloc>,
    pub prealloc: Option<Prealloc>,
    pub prefix_caching: Option<bool>,
    pub speculative: Option<Speculative>,
    pub replicas: Option<u32>,
    pub router: Option<Router>,
    pub disaggregation: Option<Disaggregation>,
    pub expert_parallel: Option<bool>,
    pub mfu: Option<f64>,
    pub mbu: Option<f64>,
    pub step_overhead_s: Option<f64>,
    pub seq_overhead_s: Option<f64>,
    pub ingest_s: Option<f64>,
    pub ingest_per_token_s: Option<f64>,
    pub frontend_s: Option<f64>,
    pub frontend_jitter_s: Option<f64>,
    /// A digital twin's fitted engine (`--twin`).
    pub fitted: Option<crate::fitted::Fitted>,
}

impl EngineSpec {
    /// `over`'s settings where it has them, this spec's elsewhere.
    pub fn overlay(self, over: EngineSpec) -> EngineSpec {
        EngineSpec {
            preset: over.preset.or(self.preset),
            tp: over.tp.or(self.tp),
            dtype: over.dtype.or(self.dtype),
            kv_dtype: over.kv_dtype.or(self.kv_dtype),
            max_num_seqs: over.max_num_seqs.or(self.max_num_seqs),
            max_batched_tokens: over.max_batched_tokens.or(self.max_batched_tokens),
            gpu_memory_utilization: over.gpu_memory_utilization.or(self.gpu_memory_utilization),
            block_size: over.block_size.or(self.block_size),
            max_model_len: over.max_model_len.or(self.max_model_len),
            cpu_offload_gb: over.cpu_offload_gb.or(self.cpu_offload_gb),
            max_waiting: over.max_waiting.or(self.max_waiting),
            scheduling: over.scheduling.or(self.scheduling),
            batching: over.batching.or(self.batching),
            batch_timeout_s: over.batch_timeout_s.or(self.batch_timeout_s),
            kv_alloc: over.kv_alloc.or(self.kv_alloc),
            prealloc: over.prealloc.or(self.prealloc),
            prefix_caching: over.prefix_caching.or(self.prefix_caching),
            speculative: over.speculative.or(self.speculative),
            replicas: over.replicas.or(self.replicas),
            router: over.router.or(self.router),
            disaggregation: over.disaggregation.or(self.disaggregation),
            expert_parallel: over.expert_parallel.or(self.expert_parallel),
            mfu: over.mfu.or(self.mfu),
            mbu: over.mbu.or(self.mbu),
            step_overhead_s: over.step_overhead_s.or(self.step_overhead_s),
            seq_overhead_s: over.seq_overhead_s.or(self.seq_overhead_s),
            ingest_s: over.ingest_s.or(self.ingest_s),
            ingest_per_token_s: over.ingest_per_token_s.or(self.ingest_per_token_s),
            frontend_s: over.frontend_s.or(self.frontend_s),
            frontend_jitter_s: over.frontend_jitter_s.or(self.frontend_jitter_s),
            fitted: over.fitted.or(self.fitted),
        }
    }

    /// The configuration of `model` on `gpu`: the preset's defaults, then every setting given,
    /// then what the preset derives from them (for settings not given).
    pub fn build(&self, model: ModelArch, gpu: Gpu) -> EngineConfig {
        let mut c = EngineConfig::new(model, gpu);
        let preset = self.preset.unwrap_or(Preset::Vllm);
        c.preset = Some(preset);
        preset.apply(&mut c);
        self.sizes(&mut c);
        self.mechanisms(&mut c);
        self.deployment(&mut c);
        self.efficiency(&mut c);
        c.fitted = self.fitted;
        let given = Given {
            memory_utilization: self.gpu_memory_utilization.is_some(),
            max_num_seqs: self.max_num_seqs.is_some(),
            kv_dtype: self.kv_dtype.is_some(),
        };
        preset.derive(&mut c, given);
        c
    }

    /// Parallelism, number formats, batch limits and memory.
    fn sizes(&self, c: &mut EngineConfig) {
        c.tp = self.tp.unwrap_or(1);
        c.dtype = self.dtype.unwrap_or(Dtype::Bf16);
        c.kv_dtype = self.kv_dtype.unwrap_or(Dtype::Bf16);
        c.max_num_seqs = self.max_num_seqs.unwrap_or(c.max_num_seqs);
        c.max_batched_tokens = self.max_batched_tokens.unwrap_or(c.max_batched_tokens);
        c.gpu_memory_utilization = self.gpu_memory_utilization.unwrap_or(c.gpu_memory_utilization);
        c.block_size = self.block_size.unwrap_or(c.block_size);
        c.max_model_len = self.max_model_len;
        c.cpu_offload_gb = self.cpu_offload_gb.unwrap_or(0.0);
        c.expert_parallel = self.expert_parallel.unwrap_or(false);
        c.max_waiting = self.max_waiting.unwrap_or(c.max_waiting);
    }

    /// Batching, prefill scheduling, KV allocation, prefix caching, speculative decoding.
    fn mechanisms(&self, c: &mut EngineConfig) {
        if let Some(s) = self.scheduling {
            c.set_scheduling(s);
        }
        if let Some(b) = self.batching {
            c.batching = b;
            if b == Batching::Static && self.scheduling.is_none() {
                // a static batch prefills whole; the preset's chunking does not apply
                c.set_scheduling(Scheduling::PrefillFirst);
            }
        }
        if let Some(t) = self.batch_timeout_s {
            c.batch_timeout_s = t;
        }
        if let Some(k) = self.kv_alloc {
            c.kv_alloc = k;
        }
        if let Some(p) = self.prealloc {
            c.prealloc = p;
        }
        c.prefix_caching = match self.prefix_caching {
            // the preset's default yields to contiguous pre-allocation, which cannot share blocks
            None if c.kv_alloc == KvAlloc::Prealloc => false,
            None => c.prefix_caching,
            Some(on) => on,
        };
        if let Some(s) = &self.speculative {
            c.speculative = Some(s.clone());
        }
    }

    /// Replicas and routing, or prefill/decode disaggregation.
    fn deployment(&self, c: &mut EngineConfig) {
        c.replicas = self.replicas.unwrap_or(1);
        if let Some(r) = self.router {
            c.router = r;
        }
        c.disaggregation = self.disaggregation.clone();
    }

    /// The step-time model's efficiencies and overheads: the calibrated ones of the GPU, engine
    /// and format (`data/efficiency.toml`), then every one given.
    fn efficiency(&self, c: &mut EngineConfig) {
        c.efficiency = crate::efficiency::EfficiencyTable::builtin().for_config(c);
        let given = crate::efficiency::Rule {
            mfu: self.mfu,
            mbu: self.mbu,
            step_overhead_s: self.step_overhead_s,
            seq_overhead_s: self.seq_overhead_s,
            ingest_s: self.ingest_s,
            ingest_per_token_s: self.ingest_per_token_s,
            frontend_s: self.frontend_s,
            frontend_jitter_s: self.frontend_jitter_s,
            ..Default::default()
        };
        given.apply(&mut c.efficiency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn a_spec_of_nothing_is_the_presets_engine() {
        let c = Catalog::builtin();
        let (m, g) = (c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        let built = EngineSpec::default().build(m.clone(), g.clone());
        let mut by_hand = EngineConfig::new(m, g);
        by_hand.preset = Some(Preset::Vllm);
        Preset::Vllm.apply(&mut by_hand);
        by_hand.efficiency = crate::efficiency::EfficiencyTable::builtin().for_config(&by_hand);
        Preset::Vllm.derive(&mut by_hand, Given::default());
        assert_eq!(built, by_hand);
        assert!(built.prefix_caching && built.scheduling() == Scheduling::Chunked);
    }

    #[test]
    fn given_settings_win_and_static_batches_prefill_whole() {
        let c = Catalog::builtin();
        let (m, g) = (c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
        let spec = EngineSpec {
            tp: Some(2),
            dtype: Some(Dtype::Fp8),
            batching: Some(Batching::Static),
            kv_alloc: Some(KvAlloc::Prealloc),
            max_num_seqs: Some(64),
            ..Default::default()
        };
        let e = spec.build(m, g);
        assert_eq!((e.tp, e.dtype, e.max_num_seqs), (2, Dtype::Fp8, 64));
        assert_eq!(e.scheduling(), Scheduling::PrefillFirst);
        assert!(!e.prefix_caching, "pre-allocation turns the preset's prefix caching off");
    }
}
