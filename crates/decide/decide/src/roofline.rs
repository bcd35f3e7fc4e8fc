//! The roofline of one model on one GPU type (`goodput roofline`): where a prefill and decode
//! steps of several batch sizes sit against the GPU's ridge point, and the latency floors that
//! follow ([`RooflineReport`], the document's).
//!
//! Nothing is counted here: FLOPs and bytes of each iteration come from the step-time model's own
//! accounting ([`Roofline::work`]), priced twice: at peak (MFU = MBU = 1, no overheads: the
//! floor) and at the calibrated efficiencies the engine model runs at. The KV capacity is the
//! engine's [`goodput_engine::MemoryPlan`].

use goodput_engine::cost::{BatchShape, Roofline, StepCost, StepTime};
use goodput_engine::{Efficiency, EngineConfig};
use goodput_results::roofline::{
    Bound, IntensityBand, MAX_BATCH, Phase, RooflineMemory, RooflinePoint, RooflineReport, RooflineSpec, SEED_BAND,
};

/// Why a roofline cannot be drawn.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RooflineError {
    #[error("--prompt: {given} tokens; give 1 to {limit} (the context of {model})")]
    Prompt { given: u64, limit: u64, model: String },
    #[error("--context: {given} tokens; give 1 to {limit} (the context of {model})")]
    Context { given: u64, limit: u64, model: String },
    #[error("--batch: {given}; give batch sizes from 1 to {MAX_BATCH}")]
    Batch { given: u64 },
    #[error("--batch: give at least one batch size")]
    NoBatch,
    /// The configuration is invalid on any amount of memory (`--tp` and the like).
    #[error("{0}")]
    Config(String),
}

/// Checks `spec`'s lengths against the model's context and its batch sizes.
pub fn check(spec: &RooflineSpec, cfg: &EngineConfig) -> Result<(), RooflineError> {
    let (limit, model) = (cfg.model.max_context, cfg.model.name.clone());
    if !(1..=limit).contains(&spec.prompt) {
        return Err(RooflineError::Prompt { given: spec.prompt, limit, model });
    }
    if !(1..=limit).contains(&spec.context) {
        return Err(RooflineError::Context { given: spec.context, limit, model });
    }
    if spec.batches.is_empty() {
        return Err(RooflineError::NoBatch);
    }
    if let Some(&b) = spec.batches.iter().find(|&&b| !(1..=MAX_BATCH).contains(&b)) {
        return Err(RooflineError::Batch { given: b });
    }
    Ok(())
}

/// The same configuration priced at peak and at its calibrated efficiencies.
struct Models<'a> {
    cfg: &'a EngineConfig,
    peak: Roofline,
    calibrated: Roofline,
}

impl Models<'_> {
    fn point(&self, label: String, phase: Phase, batch: u64, context: u64, b: &BatchShape) -> RooflinePoint {
        let (flops, bytes) = self.peak.work(b);
        let weight_bytes = self.peak.weight_bytes_read(b.tokens() as f64);
        let at_peak: StepTime = self.peak.time(b);
        let gpu = &self.cfg.gpu;
        let intensity = flops / bytes;
        RooflinePoint {
            label,
            phase,
            batch,
            context,
            tokens: b.tokens(),
            flops,
            bytes,
            weight_bytes,
            kv_bytes: bytes - weight_bytes,
            intensity,
            bound: if at_peak.compute_bound { Bound::Compute } else { Bound::Memory },
            attainable_flops: gpu.peak_flops(self.cfg.dtype).min(intensity * gpu.bandwidth()),
            floor_s: at_peak.compute_s.max(at_peak.memory_s),
            calibrated_s: self.calibrated.time(b).total_s,
            fits: None,
        }
    }

    /// The smallest batch in `1..=MAX_BATCH` for which `pred` holds, `pred` being monotone
    /// (false, then true) in the batch.
    fn first_batch(&self, pred: impl Fn(u64) -> bool) -> Option<u64> {
        if !pred(MAX_BATCH) {
            return None;
        }
        let (mut lo, mut hi) = (0, MAX_BATCH); // pred(lo) false (or lo = 0), pred(hi) true
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if pred(mid) { hi = mid } else { lo = mid }
        }
        Some(hi)
    }

    fn decode_intensity(&self, batch: u64, context: u64) -> f64 {
        let (f, b) = self.peak.work(&BatchShape::decodes(batch, context));
        f / b
    }
}

/// Places `spec`'s prefill and decode steps on the roofline of `cfg` (its model, GPU, tensor
/// parallelism, number formats, memory settings and calibrated efficiencies). The weights need
/// not fit: the physics is drawn anyway and [`RooflineMemory::does_not_fit`] says so.
pub fn analyze(cfg: &EngineConfig, spec: &RooflineSpec) -> Result<RooflineReport, RooflineError> {
    check(spec, cfg)?;
    let memory = memory(cfg, spec.context)?;
    let mut at_peak = cfg.clone();
    at_peak.efficiency = Efficiency::peak();
    let models = Models { cfg, peak: Roofline::new(&at_peak), calibrated: Roofline::new(cfg) };
    let m = &cfg.model;
    let (mfu, mbu) = models.calibrated.efficiencies();

    let mut prefill_shape = BatchShape::default();
    prefill_shape.add_prefill(spec.prompt, 0);
    prefill_shape.sampled = 1;
    let prefill = models.point(format!("prefill {}", spec.prompt), Phase::Prefill, 1, spec.prompt, &prefill_shape);

    let decode = spec
        .batches
        .iter()
        .map(|&b| {
            let mut p = models.point(
                format!("decode b={b}"),
                Phase::Decode,
                b,
                spec.context,
                &BatchShape::decodes(b, spec.context),
            );
            p.fits = memory.max_batch.map(|max| b <= max);
            p
        })
        .collect();

    let c = spec.context;
    let compute_bound_batch = models.first_batch(|b| models.peak.time(&BatchShape::decodes(b, c)).compute_bound);
    let compute_bound_batch_calibrated =
        models.first_batch(|b| models.calibrated.time(&BatchShape::decodes(b, c)).compute_bound);
    let (low, high) = SEED_BAND;
    let first_in = models.first_batch(|b| models.decode_intensity(b, c) >= low);
    let first_over = models.first_batch(|b| models.decode_intensity(b, c) > high);
    let batches = match (first_in, first_over) {
        (Some(a), Some(o)) if o > a => Some([a, o - 1]),
        (Some(a), None) => Some([a, MAX_BATCH]),
        _ => None,
    };

    Ok(RooflineReport {
        model: m.name.clone(),
        gpu: cfg.gpu.name.clone(),
        tp: cfg.tp,
        dtype: cfg.dtype,
        kv_dtype: cfg.kv_dtype,
        spec: spec.clone(),
        total_params: m.total_params(),
        active_params: m.active_params(),
        memory,
        peak_flops: cfg.gpu.peak_flops(cfg.dtype),
        bandwidth: cfg.gpu.bandwidth(),
        ridge_point: cfg.gpu.ridge_point(cfg.dtype),
        mfu,
        mbu,
        attention_scores_per_head_per_layer: spec.prompt * spec.prompt,
        prefill,
        decode,
        compute_bound_batch,
        compute_bound_batch_calibrated,
        decode_intensity_limit: models.decode_intensity(1 << 40, c),
        seed_band: IntensityBand { low, high, batches },
    })
}

/// The engine's memory plan when the weights fit; otherwise why not. A configuration invalid on
/// any amount of memory (say `--tp 3`) is an error.
fn memory(cfg: &EngineConfig, context: u64) -> Result<RooflineMemory, RooflineError> {
    let m = &cfg.model;
    let mut base = RooflineMemory {
        weight_bytes: m.weight_bytes(cfg.dtype),
        weight_bytes_per_gpu: m.weight_bytes(cfg.dtype) / cfg.tp.max(1) as f64,
        kv_bytes_per_token: m.kv_bytes_per_token(cfg.kv_dtype),
        gpu_memory_utilization: cfg.gpu_memory_utilization,
        plan: None,
        kv_capacity_tokens: None,
        max_batch: None,
        does_not_fit: None,
    };
    match cfg.plan() {
        Ok(p) => {
            let blocks_per_seq = context.div_ceil(cfg.block_size.max(1) as u64);
            base.kv_capacity_tokens = Some(p.kv_tokens);
            base.max_batch = Some(p.kv_blocks as u64 / blocks_per_seq.max(1));
            base.plan = Some(p);
            Ok(base)
        }
        Err(e) => {
            let mut unbounded = cfg.clone();
            unbounded.gpu.memory_gb = 1e9;
            if let Err(e) = unbounded.plan() {
                return Err(RooflineError::Config(e.to_string()));
            }
            base.does_not_fit = Some(e.to_string());
            Ok(base)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_engine::{Catalog, Dtype, Preset};

    fn cfg(model: &str, gpu: &str, tp: u32, dtype: Dtype) -> EngineConfig {
        let c = Catalog::builtin();
        let mut cfg = EngineConfig::new(c.model(model).unwrap().clone(), c.gpu(gpu).unwrap().clone());
        Preset::Vllm.apply(&mut cfg);
        cfg.tp = tp;
        cfg.dtype = dtype;
        cfg
    }

    fn spec(prompt: u64, context: u64) -> RooflineSpec {
        RooflineSpec { prompt, context, batches: vec![1, 8, 32, 64, 128, 256, 512] }
    }

    #[test]
    fn a_4096_token_prompt_gives_16_8m_scores_per_head_per_layer() {
        let r = analyze(&cfg("llama-3.1-8b", "h100", 1, Dtype::Bf16), &spec(4096, 1024)).unwrap();
        assert_eq!(r.attention_scores_per_head_per_layer, 16_777_216);
        assert_eq!((r.attention_scores_per_head_per_layer as f64 / 1e5).round() / 10.0, 16.8);
    }

    #[test]
    fn seventy_b_in_fp16_reads_about_140_gb_per_decode_step() {
        let r = analyze(&cfg("llama-3.1-70b", "h100", 1, Dtype::Bf16), &spec(4096, 1024)).unwrap();
        let b1 = &r.decode[0];
        assert_eq!(b1.batch, 1);
        // 70.55e9 parameters less the 1.05e9 input embedding (a lookup), 2 bytes each: 139 GB
        assert!((b1.weight_bytes / 1e9 - 140.0).abs() < 2.0, "{} GB", b1.weight_bytes / 1e9);
        assert!((b1.weight_bytes / 1e9 - 139.0).abs() < 0.5, "{} GB", b1.weight_bytes / 1e9);
        // the KV of one 1024-token sequence (320 KiB a token) is small beside it
        assert!((b1.kv_bytes - 1025.0 * 327_680.0).abs() < 1.0, "{}", b1.kv_bytes);
        // 141 GB of weights do not fit one 80 GB H100: said, not refused
        let e = r.memory.does_not_fit.as_deref().unwrap();
        assert!(e.contains("--tp 2"), "{e}");
        assert_eq!(r.memory.max_batch, None);
        assert_eq!(b1.fits, None);
        // per GPU at TP 2: 70.6 GB of weights fit, but leave no room for KV
        let r2 = analyze(&cfg("llama-3.1-70b", "h100", 2, Dtype::Bf16), &spec(4096, 1024)).unwrap();
        assert!((r2.memory.weight_bytes_per_gpu / 1e9 - 70.6).abs() < 0.1);
        let e = r2.memory.does_not_fit.as_deref().unwrap();
        assert!(e.contains("no room for the KV cache"), "{e}");
        let r4 = analyze(&cfg("llama-3.1-70b", "h100", 4, Dtype::Bf16), &spec(4096, 1024)).unwrap();
        assert!(r4.memory.max_batch.unwrap() > 0 && r4.memory.does_not_fit.is_none());
    }

    #[test]
    fn h100_ridge_point_is_295() {
        let r = analyze(&cfg("llama-3.1-8b", "h100", 1, Dtype::Bf16), &spec(512, 512)).unwrap();
        // 989.4 TFLOP/s BF16 dense / 3.35 TB/s
        assert!((r.ridge_point - 295.0).abs() < 1.0, "{}", r.ridge_point);
        assert_eq!(r.peak_flops, 989.4e12);
        // FP8 doubles the peak and the ridge
        let r8 = analyze(&cfg("llama-3.1-8b", "h100", 1, Dtype::Fp8), &spec(512, 512)).unwrap();
        assert!((r8.ridge_point - 590.7).abs() < 1.0, "{}", r8.ridge_point);
    }

    #[test]
    fn prefill_far_above_the_ridge_batch_one_decode_about_one() {
        let r = analyze(&cfg("llama-3.1-70b", "h100", 1, Dtype::Bf16), &spec(4096, 1024)).unwrap();
        assert_eq!(r.prefill.bound, Bound::Compute);
        assert!(r.prefill.intensity > 10.0 * r.ridge_point, "{}", r.prefill.intensity);
        let b1 = &r.decode[0];
        assert_eq!(b1.bound, Bound::Memory);
        assert!((b1.intensity - 1.0).abs() < 0.05, "{}", b1.intensity);
        // floors: a batch-1 step reads 139 GB at 3.35 TB/s; the prefill's FLOPs at 989 TFLOP/s
        assert!((b1.floor_s - b1.bytes / 3.35e12).abs() < 1e-12);
        assert!((r.prefill.floor_s - r.prefill.flops / 989.4e12).abs() < 1e-12);
        assert!((b1.floor_s * 1e3 - 41.6).abs() < 0.2, "{} ms", b1.floor_s * 1e3);
        // calibrated: bytes at MBU 0.8 plus the 2 ms step overhead
        assert!((b1.calibrated_s - (b1.bytes / (3.35e12 * 0.8) + 0.002)).abs() < 1e-9);
        assert!(r.prefill.calibrated_s > r.prefill.floor_s);
        // memory-bound points sit on the bandwidth slope, compute-bound ones under the ceiling
        assert!((b1.attainable_flops - b1.intensity * 3.35e12).abs() < 1.0);
        assert_eq!(r.prefill.attainable_flops, 989.4e12);
    }

    #[test]
    fn the_figures_are_the_step_time_models() {
        let c = cfg("mixtral-8x7b", "h100", 2, Dtype::Bf16);
        let r = analyze(&c, &spec(2048, 1000)).unwrap();
        let model = Roofline::new(&c);
        for p in &r.decode {
            let mut b = BatchShape::default();
            for _ in 0..p.batch {
                b.add_decode(1000);
            }
            assert_eq!(BatchShape::decodes(p.batch, 1000), b);
            assert_eq!(model.work(&b), (p.flops, p.bytes));
            assert_eq!(model.time(&b).total_s, p.calibrated_s);
        }
        // a mixture of experts reads more experts as the batch grows
        assert!(r.decode[6].weight_bytes > 2.0 * r.decode[0].weight_bytes);
    }

    #[test]
    fn decode_turns_compute_bound_where_intensity_crosses_the_ridge() {
        let r = analyze(&cfg("llama-3.1-70b", "h100", 4, Dtype::Bf16), &spec(4096, 1024)).unwrap();
        let b = r.compute_bound_batch.unwrap();
        let c = cfg("llama-3.1-70b", "h100", 4, Dtype::Bf16);
        let at = |n| {
            let p = analyze(&c, &RooflineSpec { batches: vec![n], ..spec(4096, 1024) }).unwrap();
            p.decode[0].intensity
        };
        assert!(at(b) > r.ridge_point && at(b - 1) <= r.ridge_point, "{b}");
        // KV reads grow with the batch: about 900 sequences of 1024 tokens
        assert!((800..1000).contains(&b), "{b}");
        assert!(r.decode_intensity_limit > r.ridge_point);
        // at MFU 0.38 and MBU 0.8 compute binds much sooner
        assert!(r.compute_bound_batch_calibrated.unwrap() < b / 2);
        // at 4096 tokens of context the KV dominates: decode never turns compute-bound
        let long = analyze(&c, &spec(4096, 4096)).unwrap();
        assert_eq!(long.compute_bound_batch, None);
        assert!(long.decode_intensity_limit < long.ridge_point, "{}", long.decode_intensity_limit);
    }

    #[test]
    fn the_seeds_60_to_80_flop_per_byte_hold_at_batch_69_to_96() {
        let c = cfg("llama-3.1-70b", "h100", 1, Dtype::Bf16);
        let r = analyze(&c, &spec(4096, 1024)).unwrap();
        let [lo, hi] = r.seed_band.batches.unwrap();
        let at = |n| analyze(&c, &RooflineSpec { batches: vec![n], ..spec(4096, 1024) }).unwrap().decode[0].intensity;
        assert!(at(lo) >= 60.0 && at(lo - 1) < 60.0, "{lo}");
        assert!(at(hi) <= 80.0 && at(hi + 1) > 80.0, "{hi}");
        // weights read once, KV per sequence: at 1024 tokens of context, batch 69 to 96
        assert_eq!([lo, hi], [69, 96]);
        // the default list's 64 sits just under the band, 128 above it
        let at_list = |n| r.decode.iter().find(|p| p.batch == n).unwrap().intensity;
        assert!(at_list(64) < 60.0 && at_list(128) > 80.0);
    }

    #[test]
    fn kv_capacity_and_largest_batch() {
        let c = cfg("llama-3.1-8b", "h100", 1, Dtype::Bf16);
        let r = analyze(&c, &spec(4096, 2048)).unwrap();
        let p = c.plan().unwrap();
        assert_eq!(r.memory.kv_capacity_tokens, Some(p.kv_tokens));
        assert_eq!(r.memory.max_batch, Some(p.kv_blocks as u64 / 128));
        assert_eq!(r.memory.kv_bytes_per_token, 131_072.0);
        let max = r.memory.max_batch.unwrap();
        for d in &r.decode {
            assert_eq!(d.fits, Some(d.batch <= max));
        }
    }

    #[test]
    fn bad_specs_are_refused_naming_the_flag() {
        let c = cfg("llama-3.1-8b", "h100", 1, Dtype::Bf16);
        let e = |s: RooflineSpec| analyze(&c, &s).unwrap_err().to_string();
        assert!(e(spec(0, 10)).starts_with("--prompt: 0 tokens"));
        assert!(e(spec(10, 200_000)).starts_with("--context: 200000"));
        assert!(e(RooflineSpec { batches: vec![], ..spec(10, 10) }).starts_with("--batch"));
        assert!(e(RooflineSpec { batches: vec![0], ..spec(10, 10) }).starts_with("--batch: 0"));
        let mut bad = c.clone();
        bad.tp = 3;
        assert!(analyze(&bad, &spec(10, 10)).unwrap_err().to_string().contains("--tp 3"));
    }
}
