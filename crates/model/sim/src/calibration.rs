//! Published serving figures and the simulations that predict them (`data/published.toml`):
//! a calibration set, which the engine's efficiencies (`goodput_engine::efficiency`) were chosen
//! on, and a held-out set, which they never saw. Each row names the engine whose preset it runs
//! under, the GPU, the parallelism, the number formats, the lengths and the load, as published.
//!
//! Used by a test (every calibration figure within its band) and by the `calibration` bench,
//! which prints both sets with their errors.

use goodput_metrics::{Distribution, Summary, SummaryOptions, summarize};
use goodput_workload::{Arrivals, LengthDist, Load, Workload, WorkloadSpec};
use serde::Deserialize;

use goodput_engine::{Catalog, Dtype, EfficiencyTable, EngineConfig, EngineSpec, Named, Preset, Scheduling};

use crate::{SimConfig, simulate};

/// Which set a figure belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Set {
    /// The efficiencies were chosen on these.
    #[serde(rename = "cal")]
    Calibration,
    /// Never used in choosing them.
    #[serde(rename = "held")]
    HeldOut,
}

/// One row of `data/published.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    id: String,
    set: Set,
    src: String,
    model: String,
    gpu: String,
    #[serde(default = "one")]
    tp: u32,
    #[serde(default = "one")]
    replicas: u32,
    dtype: String,
    kv_dtype: Option<String>,
    engine: String,
    #[serde(default)]
    v0: bool,
    /// Expert parallelism with data-parallel attention.
    #[serde(default)]
    ep: bool,
    /// Chunked prefill (TensorRT-LLM's chunked context, for prompts beyond its token budget).
    #[serde(default)]
    chunked: bool,
    max_num_seqs: Option<u32>,
    input: String,
    output: String,
    requests: Option<u64>,
    load: String,
    metric: String,
    published: f64,
    band: Option<f64>,
    #[serde(default = "firm_a")]
    firm: String,
    #[serde(default)]
    note: String,
    /// Why the figure is shown but neither fitted nor counted (a setup goodput does not model).
    excluded: Option<String>,
}

fn one() -> u32 {
    1
}

fn firm_a() -> String {
    "A".into()
}

#[derive(Deserialize)]
struct File {
    figure: Vec<Row>,
}

/// One published figure and our prediction of it.
#[derive(Clone, Debug)]
pub struct Figure {
    pub id: String,
    pub set: Set,
    /// The source's key (docs/engine.md, "Published figures").
    pub source: String,
    /// A: a table or text in a primary source; B: a secondary source or an ambiguity.
    pub firm: String,
    /// The largest error a test accepts for this figure alone (the reference rows); the others
    /// are held by their set's median.
    pub band: Option<f64>,
    pub setup: String,
    pub metric: &'static str,
    pub published: f64,
    pub predicted: f64,
    pub note: String,
    /// Shown, but neither fitted nor counted, for this reason.
    pub excluded: Option<String>,
}

impl Figure {
    /// `predicted / published − 1`.
    pub fn error(&self) -> f64 {
        self.predicted / self.published - 1.0
    }
}

/// ShareGPT lengths as vLLM's benchmark samples them: the 200 (input, output) lengths of a real
/// `benchmark_serving` run (`data/sharegpt_lengths.json`; means 213 in / 212 out, close to the
/// 202 / 179 of the vLLM v0.6.0 post), each drawn independently.
fn sharegpt() -> (LengthDist, LengthDist) {
    #[derive(Deserialize)]
    struct Lengths {
        input: Vec<u32>,
        output: Vec<u32>,
    }
    let l: Lengths = serde_json::from_str(include_str!("../data/sharegpt_lengths.json")).expect("fixture parses");
    let path = "data/sharegpt_lengths.json".to_string();
    (LengthDist::Empirical { path: path.clone(), values: l.input }, LengthDist::Empirical { path, values: l.output })
}

fn rows() -> Vec<Row> {
    let f: File = toml::from_str(include_str!("../data/published.toml")).expect("data/published.toml parses");
    f.figure
}

fn lengths(s: &str, sharegpt: &LengthDist) -> LengthDist {
    if s == "sharegpt" { sharegpt.clone() } else { s.parse().unwrap_or_else(|e| panic!("lengths `{s}`: {e}")) }
}

fn dtype(s: &str) -> Dtype {
    Dtype::parse(s).unwrap_or_else(|| panic!("dtype `{s}`"))
}

/// The row's engine: its preset with the row's parallelism and formats, and `table`'s
/// efficiencies.
fn config(r: &Row, table: &EfficiencyTable) -> EngineConfig {
    let c = Catalog::builtin();
    let v0 = r.v0;
    let spec = EngineSpec {
        preset: Some(Preset::from_name(&r.engine).expect("engine")),
        tp: Some(r.tp),
        replicas: Some(r.replicas),
        dtype: Some(dtype(&r.dtype)),
        kv_dtype: r.kv_dtype.as_deref().map(dtype),
        max_num_seqs: r.max_num_seqs,
        expert_parallel: r.ep.then_some(true),
        scheduling: if v0 { Some(Scheduling::PrefillFirst) } else { r.chunked.then_some(Scheduling::Chunked) },
        prefix_caching: v0.then_some(false),
        ..EngineSpec::default()
    };
    let model = c.model(&r.model).unwrap_or_else(|e| panic!("{}: {e}", r.id)).clone();
    let gpu = c.gpu(&r.gpu).unwrap_or_else(|e| panic!("{}: {e}", r.id)).clone();
    let mut cfg = spec.build(model, gpu);
    cfg.efficiency = table.for_config(&cfg);
    cfg
}

fn setup(r: &Row) -> String {
    let n = r.tp * r.replicas;
    let par = if r.replicas > 1 { format!("{}×TP{}", r.replicas, r.tp) } else { format!("TP{}", r.tp) };
    let par = if r.ep { par.replace("TP", "EP") } else { par };
    let len = if r.input == "sharegpt" { "ShareGPT".to_string() } else { format!("{}/{}", r.input, r.output) };
    let len = len.replace("lognormal:", "ln");
    format!("{} {} {}×{} {} {} {} {}", r.model, r.dtype, n, r.gpu, par, r.engine, len, r.load)
}

fn predict(r: &Row, sharegpt: &(LengthDist, LengthDist), table: &EfficiencyTable) -> f64 {
    let cfg = config(r, table);
    let mut engine = goodput_engine::build(&cfg).unwrap_or_else(|e| panic!("{}: {e}", r.id));
    let spec = WorkloadSpec {
        input_tokens: lengths(&r.input, &sharegpt.0),
        output_tokens: lengths(&r.output, &sharegpt.1),
        seed: 1,
        ..Default::default()
    };
    let w = Workload::counts_only(spec).expect("workload");
    let (arrivals, requests) = match r.load.split_once(':') {
        None if r.load == "all" => (Arrivals::AllAtOnce, r.requests.unwrap_or(3000)),
        Some(("rate", v)) => (Arrivals::Poisson { rate: v.parse().expect("rate") }, r.requests.unwrap_or(1000)),
        Some(("batch", v)) => (Arrivals::AllAtOnce, v.parse().expect("batch")),
        _ => panic!("{}: load `{}`", r.id, r.load),
    };
    let sim =
        SimConfig { seed: 1, ..SimConfig::new(Load::Open { arrivals, max_concurrency: None }).with_requests(requests) };
    let out = simulate(engine.as_mut(), &sim, w);
    let sum = summarize(&out.records, &SummaryOptions::new());
    (metric(r).2)(&sum)
}

/// What a row can compare: its key in `data/published.toml`, its words in the table, and its
/// value in a summary of the simulated run.
type MetricDef = (&'static str, &'static str, fn(&Summary) -> f64);

const METRICS: [MetricDef; 6] = [
    ("output_tok_s", "output tok/s", |s| s.output_throughput),
    ("requests_per_s", "req/s", |s| s.request_throughput),
    ("mean_tpot_ms", "mean TPOT ms", |s| mean(&s.tpot_ms)),
    ("mean_itl_ms", "mean ITL ms", |s| mean(&s.itl_ms)),
    ("mean_ttft_ms", "mean TTFT ms", |s| mean(&s.ttft_ms)),
    ("mean_e2e_s", "mean E2E s", |s| mean(&s.e2e_ms) / 1e3),
];

fn mean(d: &Distribution) -> f64 {
    d.mean.unwrap_or(f64::NAN)
}

/// The row's metric (a row naming another is a fault in the data file).
fn metric(r: &Row) -> &'static MetricDef {
    METRICS.iter().find(|m| m.0 == r.metric).unwrap_or_else(|| panic!("{}: metric `{}`", r.id, r.metric))
}

/// Runs every figure of `set` (or both), a few seconds of CPU per set in release builds.
pub fn figures(set: Option<Set>) -> Vec<Figure> {
    figures_with(set, EfficiencyTable::builtin(), |_| true)
}

/// The figures of `set` (or both) whose id `pick` accepts, predicted with `table`'s
/// efficiencies (the `fit_efficiency` example tries tables this way).
pub fn figures_with(set: Option<Set>, table: &EfficiencyTable, pick: impl Fn(&str) -> bool) -> Vec<Figure> {
    let sg = sharegpt();
    rows()
        .into_iter()
        .filter(|r| set.is_none_or(|s| s == r.set) && pick(&r.id))
        .map(|r| Figure {
            predicted: predict(&r, &sg, table),
            setup: setup(&r),
            metric: metric(&r).1,
            band: r.band,
            id: r.id,
            set: r.set,
            source: r.src,
            firm: r.firm,
            published: r.published,
            note: r.note,
            excluded: r.excluded,
        })
        .collect()
}

/// A printable table of predicted vs published, and a summary line: the median and worst
/// |error|, and how many are within ±25%.
pub fn table(figs: &[Figure]) -> String {
    let mut s = format!(
        "{:<8} {:<64} {:<13} {:>10} {:>10} {:>7} {:>6}\n",
        "#", "setup", "metric", "published", "predicted", "error", "ratio"
    );
    for f in figs {
        s.push_str(&format!(
            "{:<8} {:<64} {:<13} {:>10.1} {:>10.1} {:>+6.1}% ×{:.2}{}\n",
            f.id,
            f.setup,
            f.metric,
            f.published,
            f.predicted,
            f.error() * 100.0,
            f.predicted / f.published,
            if f.excluded.is_some() {
                "  (excluded)"
            } else if f.firm == "B" {
                "  (B)"
            } else {
                ""
            }
        ));
    }
    let (median, worst, within) = summary(figs);
    s.push_str(&format!(
        "{} figures counted ({} excluded) · median |error| {:.1}% · worst {:.1}% · {} within ±25%\n",
        figs.iter().filter(|f| f.excluded.is_none()).count(),
        figs.iter().filter(|f| f.excluded.is_some()).count(),
        median * 100.0,
        worst * 100.0,
        within
    ));
    s
}

/// Over the figures not excluded: the median and largest |error|, and how many are within ±25%.
pub fn summary(figs: &[Figure]) -> (f64, f64, usize) {
    let mut e: Vec<f64> = figs.iter().filter(|f| f.excluded.is_none()).map(|f| f.error().abs()).collect();
    e.sort_by(f64::total_cmp);
    let median = match e.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => e[n / 2],
        n => (e[n / 2 - 1] + e[n / 2]) / 2.0,
    };
    (median, e.last().copied().unwrap_or(f64::NAN), e.iter().filter(|x| **x <= 0.25).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_figure_within_its_band_and_both_sets_within_their_medians() {
        let cal = figures(Some(Set::Calibration));
        let table = table(&cal);
        for f in cal.iter().filter(|f| f.excluded.is_none()) {
            if let Some(band) = f.band {
                assert!(f.error().abs() <= band, "figure {} off by {:+.1}%:\n{table}", f.id, f.error() * 100.0);
            }
        }
        // what the docs report (median 11.0% and 14.9%), with a little room
        let (median, _, _) = summary(&cal);
        assert!(median <= 0.12, "calibration median |error| {:.1}%:\n{table}", median * 100.0);
        let held = figures(Some(Set::HeldOut));
        let (median, _, within) = summary(&held);
        assert!(
            median <= 0.16 && within >= 11,
            "held-out median {:.1}%, {within} within ±25%:\n{}",
            median * 100.0,
            super::table(&held)
        );
    }

    #[test]
    fn every_row_names_a_catalog_model_and_gpu_a_known_metric_and_source() {
        let c = Catalog::builtin();
        // the source keys of docs/engine.md's table
        let known = [
            "REF",
            "TRT014",
            "TRT017",
            "TRT020",
            "TRT100",
            "TRTmain",
            "MLP40",
            "MLP41",
            "MLP50",
            "MLP51",
            "AMDPR-Jun25",
            "AMDPR-Oct25",
            "ORCL",
            "LMB",
        ];
        for r in rows() {
            assert!(c.model(&r.model).is_ok() && c.gpu(&r.gpu).is_ok(), "{}", r.id);
            assert!(known.contains(&r.src.as_str()), "{}: {}", r.id, r.src);
            metric(&r);
        }
    }
}
