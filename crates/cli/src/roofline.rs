//! `goodput roofline`: where a model's prefill and decode steps sit on a GPU's roofline, and the
//! TTFT and TPOT floors that follow. The flags become a validated [`RooflinePlan`]; the numbers
//! are [`goodput_decide::roofline::analyze`]'s (the engine model's own FLOP and byte accounting);
//! [`goodput_render::roofline`] renders them for the console and as the SVG (`--svg`); this module
//! prints and writes them, and writes the JSON document (`--out`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use goodput_decide::roofline::analyze;
use goodput_engine::{Catalog, Dtype, EngineConfig, Preset};
use goodput_render::roofline::{render, svg};
use goodput_results::Tool;
use goodput_results::roofline::{RooflineReport, RooflineSpec};
use serde::{Deserialize, Serialize};

use crate::args::RooflineArgs;
use crate::outcome::Outcome;
use crate::plan::{UsageError, writable};

/// Decode batch sizes placed when `--batch` is not given.
pub const DEFAULT_BATCHES: [u64; 7] = [1, 8, 32, 64, 128, 256, 512];
/// `--prompt` when not given: the seed's 4096-token prompt.
pub const DEFAULT_PROMPT: u64 = 4096;
/// `--context` when not given: a chat turn's prompt plus output so far.
pub const DEFAULT_CONTEXT: u64 = 1024;
/// The JSON document's format version: bump it on any incompatible change.
pub const ROOFLINE_VERSION: u32 = 1;

fn usage(flag: &str, msg: impl std::fmt::Display) -> UsageError {
    UsageError(format!("{flag}: {msg}"))
}

/// A validated `goodput roofline`.
#[derive(Clone, Debug)]
pub struct RooflinePlan {
    /// The model on the GPU with `--tp`, `--dtype`, `--kv-dtype` and vLLM's memory defaults.
    pub config: EngineConfig,
    pub spec: RooflineSpec,
    pub svg: Option<PathBuf>,
    pub out: Option<PathBuf>,
}

/// What `--out` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    Roofline,
}

/// The `--out` document: `{"kind": "roofline", "version": 1, "tool": …, …the report}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineDoc {
    pub kind: DocKind,
    pub version: u32,
    pub tool: Tool,
    #[serde(flatten)]
    pub report: RooflineReport,
}

fn tokens(flag: &str, v: Option<&str>, default: u64) -> Result<u64, UsageError> {
    match v.map(str::trim) {
        None => Ok(default),
        Some(s) => s.parse::<u64>().map_err(|_| usage(flag, format!("`{s}` is not a number of tokens"))),
    }
}

fn batches(v: Option<&str>) -> Result<Vec<u64>, UsageError> {
    let Some(text) = v else { return Ok(DEFAULT_BATCHES.to_vec()) };
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(part.parse::<u64>().map_err(|_| usage("--batch", format!("`{part}` is not a batch size")))?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn dtype(flag: &str, v: Option<&str>) -> Result<Dtype, UsageError> {
    match v {
        None => Ok(Dtype::Bf16),
        Some(s) => Dtype::parse(s).ok_or_else(|| usage(flag, format!("`{s}`: expected bf16, fp8 or fp4"))),
    }
}

/// Flags → a validated plan: the model and GPU exist, the numbers are in range, the outputs can
/// be written. Every error names its flag (exit code 2).
pub fn plan(a: &RooflineArgs) -> Result<RooflinePlan, UsageError> {
    let mut catalog = Catalog::builtin();
    if let Some(p) = &a.gpu_spec {
        let text =
            std::fs::read_to_string(p).map_err(|e| usage("--gpu-spec", format!("cannot read {}: {e}", p.display())))?;
        catalog.add_gpu_file(&p.display().to_string(), &text).map_err(|e| usage("--gpu-spec", e))?;
    }
    let arch = match (&a.model_config, &a.model) {
        (Some(p), name) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| usage("--model-config", format!("cannot read {}: {e}", p.display())))?;
            let name = name.clone().unwrap_or_else(|| "custom-model".into());
            goodput_engine::catalog::from_hf_config(&p.display().to_string(), &text, &name)
                .map_err(|e| usage("--model-config", e))?
        }
        (None, Some(name)) => catalog.model(name).map_err(|e| usage("--model", e))?.clone(),
        (None, None) => return Err(usage("--model", "required: a catalog model, or --model-config config.json")),
    };
    let gpu = catalog.gpu(&a.gpu).map_err(|e| usage("--gpu", e))?.clone();
    // vLLM's engine, as `sim` builds it by default: its memory settings and the calibrated
    // efficiencies of the GPU and format
    let config = goodput_engine::EngineSpec {
        preset: Some(Preset::Vllm),
        tp: Some(a.tp.unwrap_or(1)),
        dtype: Some(dtype("--dtype", a.dtype.as_deref())?),
        kv_dtype: Some(dtype("--kv-dtype", a.kv_dtype.as_deref())?),
        ..Default::default()
    }
    .build(arch, gpu);
    let spec = RooflineSpec {
        prompt: tokens("--prompt", a.prompt.as_deref(), DEFAULT_PROMPT)?,
        context: tokens("--context", a.context.as_deref(), DEFAULT_CONTEXT)?,
        batches: batches(a.batch.as_deref())?,
    };
    goodput_decide::roofline::check(&spec, &config).map_err(|e| UsageError(e.to_string()))?;
    for (flag, p) in [("--svg", &a.svg), ("--out", &a.out)] {
        if let Some(p) = p {
            writable(flag, p)?;
        }
    }
    if let (Some(s), Some(o)) = (&a.svg, &a.out) {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        if abs(s) == abs(o) {
            return Err(usage("--out", format!("{} is also --svg: give another file", o.display())));
        }
    }
    Ok(RooflinePlan { config, spec, svg: a.svg.clone(), out: a.out.clone() })
}

pub fn run(a: RooflineArgs) -> anyhow::Result<Outcome> {
    let p = plan(&a)?;
    let report = analyze(&p.config, &p.spec).map_err(|e| UsageError(e.to_string()))?;
    say!("{}", render(&report));
    if let Some(path) = &p.svg {
        write_atomic(path, svg(&report).as_bytes())?;
        say!("wrote {}\n", path.display());
    }
    if let Some(path) = &p.out {
        let doc = RooflineDoc {
            kind: DocKind::Roofline,
            version: ROOFLINE_VERSION,
            tool: Tool { name: "goodput".into(), version: env!("CARGO_PKG_VERSION").into() },
            report,
        };
        let mut text = serde_json::to_string_pretty(&doc)?;
        text.push('\n');
        write_atomic(path, text.as_bytes())?;
        say!("wrote {}\n", path.display());
    }
    Ok(Outcome::Ok)
}

/// Writes to a temporary name beside `path`, then renames (never half a file).
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> RooflineArgs {
        let mut v = vec!["goodput", "roofline"];
        v.extend_from_slice(extra);
        match crate::args::Cli::try_parse_from(v).unwrap().command {
            crate::args::Command::Roofline(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn flags_become_a_plan_and_errors_name_the_flag() {
        let p = plan(&args(&["--model", "llama-3.1-70b", "--gpu", "h100", "--batch", "64, 8,8", "--tp", "4"])).unwrap();
        assert_eq!(p.spec.batches, vec![8, 64]);
        assert_eq!((p.spec.prompt, p.spec.context, p.config.tp), (4096, 1024, 4));
        let e = |a: &[&str]| plan(&args(a)).unwrap_err().to_string();
        assert!(e(&["--model", "gpt-9", "--gpu", "h100"]).starts_with("--model: unknown model `gpt-9`"));
        assert!(e(&["--model", "llama-3.1-8b", "--gpu", "tpu"]).starts_with("--gpu: unknown GPU `tpu`"));
        assert!(e(&["--gpu", "h100"]).starts_with("--model: required"));
        assert!(e(&["--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "1,x"]).starts_with("--batch: `x`"));
        assert!(e(&["--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "0"]).starts_with("--batch: 0"));
        assert!(e(&["--model", "llama-3.1-8b", "--gpu", "h100", "--prompt", "-3"]).starts_with("--prompt: `-3`"));
        assert!(e(&["--model", "llama-3.1-8b", "--gpu", "h100", "--context", "0"]).starts_with("--context: 0"));
        assert!(e(&["--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "int3"]).starts_with("--dtype: `int3`"));
    }
}
