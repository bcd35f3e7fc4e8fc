//! The engine flags: the model, the GPU and every engine setting, as a typed `EngineSpec` built
//! once.

use super::*;

pub(super) fn dtype(flag: &str, v: &str) -> Result<Dtype, UsageError> {
    Dtype::parse(v).ok_or_else(|| usage(flag, format!("`{v}`: expected bf16, fp8 or fp4")))
}

/// An engine setting by its name.
pub(super) fn named<T: Named>(flag: &str, v: &str) -> Result<T, UsageError> {
    T::from_name(v).map_err(|m| usage(flag, m))
}

pub(super) fn fraction(flag: &str, x: f64) -> Result<f64, UsageError> {
    if x > 0.0 && x <= 1.0 { Ok(x) } else { Err(usage(flag, format!("{x} must be in (0, 1]"))) }
}

/// The built-in catalog, with `--gpu-spec`'s GPUs added.
pub fn catalog(gpu_spec: Option<&std::path::Path>) -> Result<Catalog, UsageError> {
    let mut catalog = Catalog::builtin();
    if let Some(p) = gpu_spec {
        let text =
            std::fs::read_to_string(p).map_err(|e| usage("--gpu-spec", format!("cannot read {}: {e}", p.display())))?;
        catalog.add_gpu_file(&p.display().to_string(), &text).map_err(|e| usage("--gpu-spec", e))?;
    }
    Ok(catalog)
}

/// The catalog model `model` (default llama-3.1-8b) or `--model-config`, on `--gpu`, with every
/// engine flag applied ([`engine_spec`]) and the configuration checked (it must fit in memory).
pub fn engine_plan(model: Option<&str>, a: &EngineArgs) -> Result<EnginePlan, UsageError> {
    let catalog = catalog(a.gpu_spec.as_deref())?;
    let arch = model_arch(model, a.model_config.as_deref(), &catalog)?;
    let gpu = catalog.gpu(a.gpu.as_deref().unwrap_or("h100")).map_err(|e| usage("--gpu", e))?.clone();
    let spec = engine_spec(a, &catalog, gpu.link_gbs)?;
    let (spec, arch) = match &a.twin {
        // the twin's fitted engine, the flags given as what-ifs on top of it; the model is the
        // measured server's (its architecture is not needed: the step cost is fitted)
        Some(path) => {
            let twin = read_twin(path)?;
            let mut arch = arch;
            use goodput_decide::twin::TwinEngine;
            arch.name = twin.model_name();
            (twin.engine_spec().overlay(spec), arch)
        }
        None => (spec, arch),
    };
    EnginePlan::new(spec.build(arch, gpu)).map_err(|e| UsageError(e.to_string()))
}

/// Reads a twin file (`--twin`).
pub fn read_twin(path: &Path) -> Result<goodput_results::twin::Twin, UsageError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| usage("--twin", format!("cannot read {}: {e}", path.display())))?;
    goodput_results::twin::Twin::parse(&path.display().to_string(), &text).map_err(|e| usage("--twin", e))
}

/// What a prediction with `--twin` extrapolates beyond the twin's training runs (nothing
/// without a twin).
pub fn twin_extrapolations(a: &EngineArgs, load: &LoadPlan, w: &WorkloadPlan) -> Result<Vec<String>, UsageError> {
    let Some(path) = &a.twin else { return Ok(Vec::new()) };
    let twin = read_twin(path)?;
    let spec = &w.spec;
    let max_prompt = spec.input_tokens.max().map_or(u64::MAX, u64::from).saturating_add(spec.prefix_tokens as u64);
    let max_output = spec.output_tokens.max().map_or(u64::MAX, u64::from);
    Ok(goodput_decide::twin::TwinEngine::beyond(&twin, &load.load, max_prompt, max_output, a.max_num_seqs.is_some()))
}

/// The model: `--model-config`'s Hugging Face `config.json` (named by `--model`, or its folder),
/// or `--model` from the catalog (default llama-3.1-8b).
pub fn model_arch(model: Option<&str>, config: Option<&Path>, catalog: &Catalog) -> Result<ModelArch, UsageError> {
    Ok(match config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| usage("--model-config", format!("cannot read {}: {e}", p.display())))?;
            let default_name = p
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().to_lowercase())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "custom-model".into());
            let name = model.map(str::to_string).unwrap_or(default_name);
            goodput_engine::catalog::from_hf_config(&p.display().to_string(), &text, &name)
                .map_err(|e| usage("--model-config", e))?
        }
        None => catalog.model(model.unwrap_or("llama-3.1-8b")).map_err(|e| usage("--model", e))?.clone(),
    })
}

/// The engine flags as typed choices, each checked once, naming its flag.
pub fn engine_spec(a: &EngineArgs, catalog: &Catalog, link_gbs: f64) -> Result<EngineSpec, UsageError> {
    let mut s =
        EngineSpec { preset: a.preset.as_deref().map(|v| named("--engine", v)).transpose()?, ..Default::default() };
    sizes(&mut s, a)?;
    mechanisms(&mut s, a, catalog)?;
    deployment(&mut s, a, link_gbs)?;
    efficiency(&mut s, a)?;
    Ok(s)
}

/// Parallelism, number formats, batch limits and memory.
pub(super) fn sizes(s: &mut EngineSpec, a: &EngineArgs) -> Result<(), UsageError> {
    s.tp = a.tp;
    s.dtype = a.dtype.as_deref().map(|d| dtype("--dtype", d)).transpose()?;
    s.kv_dtype = a.kv_dtype.as_deref().map(|d| dtype("--kv-dtype", d)).transpose()?;
    s.max_num_seqs = a.max_num_seqs;
    s.max_batched_tokens = a.max_batched_tokens;
    s.gpu_memory_utilization = a.gpu_memory_utilization.map(|v| fraction("--gpu-memory-utilization", v)).transpose()?;
    s.block_size = a.block_size;
    s.max_model_len = a.max_model_len;
    s.cpu_offload_gb = a.cpu_offload_gb;
    s.expert_parallel = a.expert_parallel.then_some(true);
    if a.max_waiting == Some(0) {
        return Err(usage("--max-waiting", "must be at least 1"));
    }
    s.max_waiting = a.max_waiting;
    Ok(())
}

/// Batching, prefill scheduling, KV allocation, prefix caching, speculative decoding.
pub(super) fn mechanisms(s: &mut EngineSpec, a: &EngineArgs, catalog: &Catalog) -> Result<(), UsageError> {
    s.scheduling = a.scheduling.as_deref().map(|v| named("--scheduling", v)).transpose()?;
    if a.chunked_prefill {
        if a.scheduling.as_deref().is_some_and(|v| v != "chunked") {
            return Err(usage("--chunked-prefill", "is --scheduling chunked: give one of them"));
        }
        s.scheduling = Some(Scheduling::Chunked);
    }
    s.batching = a.batching.as_deref().map(|v| named("--batching", v)).transpose()?;
    if let Some(d) = &a.batch_timeout {
        if s.batching != Some(Batching::Static) {
            return Err(usage("--batch-timeout", "applies to --batching static"));
        }
        s.batch_timeout_s = Some(parse_duration("--batch-timeout", d)?.as_secs_f64());
    }
    s.kv_alloc = a.kv_alloc.as_deref().map(|v| named("--kv-alloc", v)).transpose()?;
    if let Some(v) = &a.prealloc {
        if s.kv_alloc != Some(KvAlloc::Prealloc) {
            return Err(usage("--prealloc", "applies to --kv-alloc prealloc"));
        }
        s.prealloc = Some(named("--prealloc", v)?);
    }
    s.prefix_caching = match a.prefix_caching.as_deref() {
        None => None,
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(v) => return Err(usage("--prefix-caching", format!("`{v}`: expected on or off"))),
    };
    if let Some(text) = &a.speculative {
        let lookup = |name: &str| catalog.model(name).cloned().map_err(|e| e.to_string());
        s.speculative = Some(Speculative::parse(text, lookup).map_err(|m| usage("--speculative", m))?);
    }
    Ok(())
}

/// Replicas and routing, or prefill/decode disaggregation.
pub(super) fn deployment(s: &mut EngineSpec, a: &EngineArgs, link_gbs: f64) -> Result<(), UsageError> {
    if a.replicas == Some(0) {
        return Err(usage("--replicas", "must be at least 1"));
    }
    s.replicas = a.replicas;
    if let Some(v) = &a.router {
        if a.replicas.unwrap_or(1) < 2 {
            return Err(usage("--router", "picks among --replicas N (2 or more)"));
        }
        s.router = Some(named("--router", v)?);
    }
    match &a.disaggregate {
        Some(spec) => {
            if a.replicas.is_some() {
                return Err(usage(
                    "--replicas",
                    "is for colocated engines; with --disaggregate give prefill=P,decode=D",
                ));
            }
            let link = Link::parse(a.link.as_deref().unwrap_or("100gbps"), link_gbs).map_err(|m| usage("--link", m))?;
            s.disaggregation = Some(Disaggregation::parse(spec, link, a.ppd).map_err(|m| usage("--disaggregate", m))?);
        }
        None => {
            for (flag, given) in [("--link", a.link.is_some()), ("--ppd", a.ppd)] {
                if given {
                    return Err(usage(flag, "applies to --disaggregate prefill=P,decode=D"));
                }
            }
        }
    }
    Ok(())
}

/// The step-time model's efficiencies and overheads.
pub(super) fn efficiency(s: &mut EngineSpec, a: &EngineArgs) -> Result<(), UsageError> {
    for (flag, v) in [("--mfu", a.mfu), ("--mbu", a.mbu)] {
        if v.is_some_and(|x| x < 0.01) {
            return Err(usage(flag, "must be at least 0.01 (a utilization, like 0.38)"));
        }
    }
    s.mfu = a.mfu.map(|v| fraction("--mfu", v)).transpose()?;
    s.mbu = a.mbu.map(|v| fraction("--mbu", v)).transpose()?;
    let seconds = |flag: &str, d: &Option<String>| -> Result<Option<f64>, UsageError> {
        d.as_deref().map(|d| parse_duration(flag, d).map(|d| d.as_secs_f64())).transpose()
    };
    s.step_overhead_s = seconds("--step-overhead", &a.step_overhead)?;
    s.seq_overhead_s = seconds("--seq-overhead", &a.seq_overhead)?;
    s.ingest_s = seconds("--ingest-overhead", &a.ingest_overhead)?;
    s.ingest_per_token_s = seconds("--ingest-per-token", &a.ingest_per_token)?;
    s.frontend_s = seconds("--frontend-latency", &a.frontend_latency)?;
    s.frontend_jitter_s = seconds("--frontend-jitter", &a.frontend_jitter)?;
    Ok(())
}

/// Refuses a synthetic workload whose every request the engine model would refuse, naming the
/// flag, instead of a run where all requests fail
/// ([`goodput_decide::planner::smallest_request_fits`]).
pub fn check_workload_fits(engine: &EnginePlan, w: &WorkloadPlan) -> Result<(), UsageError> {
    goodput_decide::planner::smallest_request_fits(&engine.config, w).map_err(|m| usage("--input-tokens", m))
}
