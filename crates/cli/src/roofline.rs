//! `goodput roofline`: where a model's prefill and decode steps sit on a GPU's roofline, and the
//! TTFT and TPOT floors that follow. The flags become a validated [`RooflinePlan`]; the numbers
//! are [`goodput_engine::roofline::analyze`]'s (the engine model's own FLOP and byte accounting);
//! this module prints them, draws the SVG (`--svg`) and writes the JSON document (`--out`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use goodput_engine::roofline::{Bound, RooflineReport, RooflineSpec, analyze};
use goodput_engine::{Catalog, Dtype, EngineConfig, Given, Preset};
use goodput_results::Tool;
use serde::{Deserialize, Serialize};

use crate::Outcome;
use crate::args::RooflineArgs;
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
    let mut config = EngineConfig::new(arch, gpu);
    Preset::Vllm.apply(&mut config);
    config.tp = a.tp.unwrap_or(1);
    config.dtype = dtype("--dtype", a.dtype.as_deref())?;
    config.kv_dtype = dtype("--kv-dtype", a.kv_dtype.as_deref())?;
    let given = Given { memory_utilization: false, max_num_seqs: false, kv_dtype: a.kv_dtype.is_some() };
    Preset::Vllm.derive(&mut config, given);
    let spec = RooflineSpec {
        prompt: tokens("--prompt", a.prompt.as_deref(), DEFAULT_PROMPT)?,
        context: tokens("--context", a.context.as_deref(), DEFAULT_CONTEXT)?,
        batches: batches(a.batch.as_deref())?,
    };
    spec.check(&config).map_err(|e| UsageError(e.to_string()))?;
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

/// `3.35 T`, `139.3 G`, `591.4 T`: three or four significant digits and an SI prefix.
fn si(x: f64) -> String {
    const PREFIXES: [(f64, &str); 7] =
        [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];
    let (scale, p) = PREFIXES.into_iter().find(|(scale, _)| x.abs() >= *scale).unwrap_or((1.0, ""));
    let v = x / scale;
    if v.abs() < 10.0 { format!("{v:.2} {p}") } else { format!("{v:.1} {p}") }
}

fn duration(s: f64) -> String {
    match s {
        s if s >= 1.0 => format!("{s:.2} s"),
        s if s >= 0.01 => format!("{:.1} ms", s * 1e3),
        s => format!("{:.2} ms", s * 1e3),
    }
}

fn intensity(x: f64) -> String {
    if x >= 100.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

/// The console report.
pub fn render(r: &RooflineReport) -> String {
    let mut o = String::new();
    let m = &r.memory;
    let b1 = r.decode.iter().find(|p| p.batch == 1).unwrap_or(&r.decode[0]);
    let _ = writeln!(
        o,
        "roofline: {} on {}× {} ({} weights, {} KV)\n",
        r.model,
        r.tp,
        r.gpu,
        r.dtype.name(),
        r.kv_dtype.name()
    );
    let _ = writeln!(
        o,
        "  parameters        {:.2}B total, {:.2}B active",
        r.total_params as f64 / 1e9,
        r.active_params as f64 / 1e9
    );
    let _ = writeln!(
        o,
        "  weights           {}B ({}B per GPU); a decode step at batch {} reads {}B of them\n{:20}(all but the input embedding, a lookup)",
        si(m.weight_bytes),
        si(m.weight_bytes_per_gpu),
        b1.batch,
        si(b1.weight_bytes),
        ""
    );
    let _ = writeln!(o, "  KV per token      {:.0} KiB (all layers, whole model)", m.kv_bytes_per_token / 1024.0);
    match (&m.plan, m.kv_capacity_tokens, m.max_batch, &m.does_not_fit) {
        (Some(p), Some(tokens), Some(max), _) => {
            let _ = writeln!(
                o,
                "  KV capacity       {tokens} tokens ({:.1} GB per GPU at {} memory utilization); at most {max} sequences of {} tokens",
                p.kv_gb, m.gpu_memory_utilization, r.spec.context
            );
        }
        (_, _, _, Some(why)) => {
            let _ = writeln!(o, "  KV capacity       none: {why}");
        }
        _ => {}
    }
    let _ = writeln!(
        o,
        "  ridge point       {:.0} FLOP/byte ({}FLOP/s {} ÷ {}B/s per GPU)",
        r.ridge_point,
        si(r.peak_flops),
        r.dtype.name(),
        si(r.bandwidth)
    );
    let scores = r.attention_scores_per_head_per_layer as f64;
    let _ = writeln!(
        o,
        "  prompt attention  {}² = {:.1}M scores per head per layer (causal kernels compute half)\n",
        r.spec.prompt,
        scores / 1e6
    );
    let _ = writeln!(
        o,
        "  {:<14}{:>12}{:>12}{:>10}{:>9}{:>11}{:>12}{:>11}{:>6}",
        "step", "FLOPs", "bytes", "FLOP/B", "bound", "floor", "calibrated", "tok/s", "KV"
    );
    let p = &r.prefill;
    let _ = writeln!(
        o,
        "  {:<14}{:>12}{:>12}{:>10}{:>9}{:>11}{:>12}{:>11}{:>6}   TTFT",
        p.label,
        si(p.flops),
        format!("{}B", si(p.bytes)),
        intensity(p.intensity),
        p.bound.name(),
        duration(p.floor_s),
        duration(p.calibrated_s),
        "",
        ""
    );
    for d in &r.decode {
        let fits = match d.fits {
            Some(true) => "fits",
            Some(false) => "over",
            None => "-",
        };
        let _ = writeln!(
            o,
            "  {:<14}{:>12}{:>12}{:>10}{:>9}{:>11}{:>12}{:>11.0}{:>6}   TPOT",
            d.label,
            si(d.flops),
            format!("{}B", si(d.bytes)),
            intensity(d.intensity),
            d.bound.name(),
            duration(d.floor_s),
            duration(d.calibrated_s),
            d.batch as f64 / d.floor_s,
            fits
        );
    }
    let _ = writeln!(
        o,
        "\n  floor: every FLOP at peak and every byte at full bandwidth, nothing else (TTFT floor of the prefill,\n  \
         TPOT floor of a decode step; tok/s: the batch's output at the floor). calibrated: the engine model's step\n  \
         time at MFU {:.2} and MBU {:.2}, with its per-step overhead{}. Decode sequences attend\n  \
         {} tokens each; FLOPs and bytes are the whole model's{}.\n",
        r.mfu,
        r.mbu,
        if r.tp > 1 { " and tensor-parallel all-reduces" } else { "" },
        r.spec.context,
        if r.tp > 1 { format!(" (each GPU does 1/{})", r.tp) } else { String::new() }
    );
    let c = r.spec.context;
    let _ = match (r.compute_bound_batch, r.compute_bound_batch_calibrated) {
        (Some(b), Some(cal)) => writeln!(
            o,
            "  decode turns compute-bound at batch {b} at peak, at batch {cal} at the calibrated efficiencies"
        ),
        (Some(b), None) => writeln!(o, "  decode turns compute-bound at batch {b} at peak"),
        (None, Some(cal)) => {
            writeln!(o, "  decode never turns compute-bound at peak; at the calibrated efficiencies at batch {cal}")
        }
        (None, None) => writeln!(o, "  decode never turns compute-bound"),
    };
    let _ = writeln!(
        o,
        "  (context {c}: its intensity tends to {} FLOP/byte as the batch grows: weights are read once\n  \
         per step, KV once per sequence)",
        intensity(r.decode_intensity_limit)
    );
    let band = &r.seed_band;
    let quote = format!("the seed's \"{}–{} operations per byte at typical batch sizes\"", band.low, band.high);
    let _ = match band.batches {
        Some([lo, hi]) => writeln!(o, "  {quote}: decode at batch {lo}–{hi} (context {c})"),
        None => writeln!(o, "  {quote}: no decode batch reaches it at context {c}"),
    };
    o
}

/// A power of ten for an axis, as a number and an SI prefix: `("0.1", "")`, `("10", "k")`.
fn decade(e: i32) -> (String, &'static str) {
    const PREFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    match PREFIXES.get((e / 3) as usize) {
        _ if e < 0 => (format!("{}", 10f64.powi(e)), ""),
        Some(p) => (10u64.pow((e % 3) as u32).to_string(), p),
        None => (format!("1e{e}"), ""),
    }
}

/// Escapes text for XML content and attribute values.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

/// A log-log roofline, self-contained: the roof (bandwidth slope and compute ceiling) per GPU,
/// the calibrated roof, the ridge point, the seed's 60–80 FLOP/byte band, and the prefill and
/// each decode step at the FLOP/s their intensity allows. Every element is labelled.
pub fn svg(r: &RooflineReport) -> String {
    let (w, h) = (900.0, 600.0);
    let (left, right, top, bottom) = (110.0, 40.0, 60.0, 80.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let points: Vec<_> = std::iter::once(&r.prefill).chain(&r.decode).collect();
    let lo_i = points.iter().map(|p| p.intensity).fold(1.0, f64::min);
    let hi_i = points.iter().map(|p| p.intensity).fold(r.ridge_point, f64::max);
    let (x0, x1) = ((lo_i / 2.0).log10().floor(), (hi_i * 2.0).log10().ceil());
    let (y0, y1) =
        ((10f64.powf(x0) * r.bandwidth * r.mbu.min(1.0)).log10().floor(), (r.peak_flops * 2.0).log10().ceil());
    let x = |v: f64| left + (v.log10() - x0) / (x1 - x0) * pw;
    let y = |v: f64| top + ph - (v.log10() - y0) / (y1 - y0) * ph;
    let (xmin, xmax) = (10f64.powf(x0), 10f64.powf(x1));
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<title>{}</title>
<rect x="0" y="0" width="{w}" height="{h}" fill="white"/>
<text id="title" x="{}" y="30" text-anchor="middle" font-size="16">{}</text>"#,
        xml(&format!("Roofline: {} on {} ({}), per GPU", r.model, r.gpu, r.dtype.name())),
        left + pw / 2.0,
        xml(&format!("Roofline: {} on {} ({} weights, TP {}), per GPU", r.model, r.gpu, r.dtype.name(), r.tp))
    );
    // the seed's band
    let (blo, bhi) = (r.seed_band.low, r.seed_band.high);
    if blo > xmin && bhi < xmax {
        let _ = writeln!(
            o,
            r##"<g id="seed-band"><rect x="{:.1}" y="{top}" width="{:.1}" height="{ph}" fill="#fdf2c4"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#8a6d00">{}–{} FLOP/B (seed)</text></g>"##,
            x(blo),
            x(bhi) - x(blo),
            (x(blo) + x(bhi)) / 2.0,
            top + 14.0,
            blo,
            bhi
        );
    }
    // axes, decades, grid
    let _ = writeln!(o, r##"<g id="axes" stroke="#999" fill="none">"##);
    let _ = writeln!(o, r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}"/>"#);
    let _ = writeln!(o, "</g>");
    let _ = writeln!(o, r##"<g id="x-ticks" fill="#333" text-anchor="middle">"##);
    for e in (x0 as i32)..=(x1 as i32) {
        let v = 10f64.powi(e);
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}">{3}</text>"##,
            x(v),
            top + ph,
            top + ph + 18.0,
            {
                let (n, p) = decade(e);
                format!("{n}{p}")
            }
        );
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(o, r##"<g id="y-ticks" fill="#333" text-anchor="end">"##);
    for e in (y0 as i32)..=(y1 as i32) {
        let v = 10f64.powi(e);
        let _ = writeln!(
            o,
            r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#eee"/><text x="{2}" y="{3:.1}">{4}</text>"##,
            y(v),
            left + pw,
            left - 6.0,
            y(v) + 4.0,
            {
                let (n, p) = decade(e);
                format!("{n} {p}FLOP/s")
            }
        );
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(
        o,
        r#"<text id="x-label" x="{:.1}" y="{:.1}" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>
<text id="y-label" transform="translate(22 {:.1}) rotate(-90)" text-anchor="middle">attainable FLOP/s per GPU</text>"#,
        left + pw / 2.0,
        h - 30.0,
        top + ph / 2.0
    );
    // the roofs
    let roof = |peak: f64, bw: f64| {
        let ridge = peak / bw;
        format!("{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}", x(xmin), y(xmin * bw), x(ridge), y(peak), x(xmax), y(peak))
    };
    let _ = writeln!(
        o,
        r##"<g id="roof"><polyline points="{}" fill="none" stroke="#1f4e9c" stroke-width="2.5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#1f4e9c">peak {}FLOP/s, {}B/s</text></g>"##,
        roof(r.peak_flops, r.bandwidth),
        x(xmax) - 6.0,
        y(r.peak_flops) - 8.0,
        si(r.peak_flops),
        si(r.bandwidth)
    );
    let (cp, cb) = (r.peak_flops * r.mfu, r.bandwidth * r.mbu);
    let _ = writeln!(
        o,
        r##"<g id="calibrated-roof"><polyline points="{}" fill="none" stroke="#7a9cd3" stroke-width="1.5" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#7a9cd3">calibrated (MFU {:.2}, MBU {:.2})</text></g>"##,
        roof(cp, cb),
        x(xmax) - 6.0,
        y(cp) + 16.0,
        r.mfu,
        r.mbu
    );
    let _ = writeln!(
        o,
        r##"<g id="ridge"><line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="#1f4e9c" stroke-dasharray="3 3"/><circle cx="{0:.1}" cy="{1:.1}" r="4" fill="#1f4e9c"/><text x="{3:.1}" y="{4:.1}" fill="#1f4e9c">ridge {5:.0} FLOP/B</text></g>"##,
        x(r.ridge_point),
        y(r.peak_flops),
        top + ph,
        x(r.ridge_point) + 6.0,
        top + ph - 8.0,
        r.ridge_point
    );
    // the steps; decode labels alternate above-left and below-right of the slope, each moved
    // further out while it would overlap one already placed; the prefill's sits below the ceiling
    let mut placed: Vec<[f64; 4]> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let (px, py) = (x(p.intensity), y(p.attainable_flops));
        let (id, color, label) = if i == 0 {
            ("prefill".to_string(), "#c0392b", format!("prefill {} ({})", r.spec.prompt, intensity(p.intensity)))
        } else {
            (format!("decode-b{}", p.batch), "#27864a", format!("b={} ({})", p.batch, intensity(p.intensity)))
        };
        let (dx, mut dy, anchor, step) = match (i, i % 2) {
            (0, _) => (0.0, 22.0, "middle", 14.0),
            (_, 1) => (-8.0, -8.0, "end", -14.0),
            _ => (8.0, 16.0, "start", 14.0),
        };
        let width = 7.0 * label.chars().count() as f64;
        let left_edge = match anchor {
            "end" => px + dx - width,
            "middle" => px + dx - width / 2.0,
            _ => px + dx,
        };
        let overlaps =
            |ty: f64, b: &[f64; 4]| left_edge < b[1] && left_edge + width > b[0] && ty - 12.0 < b[3] && ty > b[2];
        for _ in 0..points.len() {
            if !placed.iter().any(|b| overlaps(py + dy, b)) {
                break;
            }
            dy += step;
        }
        placed.push([left_edge, left_edge + width, py + dy - 12.0, py + dy]);
        let bound = if p.bound == Bound::Compute { "compute-bound" } else { "memory-bound" };
        let _ = writeln!(
            o,
            r#"<g id="{id}" class="point {}"><title>{}</title><circle cx="{px:.1}" cy="{py:.1}" r="5" fill="{color}"/><text x="{:.1}" y="{:.1}" text-anchor="{anchor}" fill="{color}">{}</text></g>"#,
            bound,
            xml(&format!("{}: {} FLOP/byte, {bound}, floor {}", p.label, intensity(p.intensity), duration(p.floor_s))),
            px + dx,
            py + dy,
            xml(&label)
        );
    }
    let _ = writeln!(o, "</svg>");
    o
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

    #[test]
    fn svg_is_labelled_and_escaped() {
        let p = plan(&args(&["--model", "mixtral-8x7b", "--gpu", "h100", "--tp", "2"])).unwrap();
        let mut r = analyze(&p.config, &p.spec).unwrap();
        r.model = "a<b&c".into();
        let s = svg(&r);
        assert!(s.contains("a&lt;b&amp;c") && !s.contains("a<b"));
        for id in ["roof", "ridge", "prefill", "decode-b1", "decode-b512", "x-label", "y-label", "seed-band"] {
            assert!(s.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(!s.contains("NaN") && !s.contains("inf") && !s.contains("href"));
    }
}
