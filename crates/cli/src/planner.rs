//! `goodput plan`: every candidate deployment (GPU × tensor parallelism × weight format × engine
//! × mechanism set) is planned like a `sim`, its capacity under the SLO searched in virtual time
//! on every core ([`goodput_stage::planner::evaluate`]), priced, and ranked. Flags are checked
//! before anything runs; a candidate that does not fit in memory is listed with why.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Parser;
use goodput_engine::Dtype;
use goodput_results::ResultDoc;
use goodput_results::plan::{EnginePlan, RunPlan};
use goodput_results::planning::{PlanCandidate, PlanReport};
use goodput_stage::Resources;
use goodput_stage::capacity::CapacityOptions;
use goodput_stage::planner::{self as lib, Evaluation};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use crate::Outcome;
use crate::args::{Cli, Command, EngineArgs, PlanArgs, SimArgs};
use crate::plan::{self, UsageError};

fn usage(flag: &str, m: impl std::fmt::Display) -> UsageError {
    UsageError(format!("{flag}: {m}"))
}

/// The mechanism sets a plan can compare.
const MECHANISMS: &[&str] = &["baseline", "spec", "ngram", "disagg", "no-prefix-caching", "prefill-first"];

/// A workload preset: lengths, shared prefixes, SLO, attainment, and where the targets come from.
struct Preset {
    name: &'static str,
    input: &'static str,
    output: &'static str,
    prefix: Option<(u32, u32)>,
    slo: &'static str,
    attainment: f64,
}

/// The seed article's decision framework as workloads (sources: docs/plan.md, Presets).
const PRESETS: &[Preset] = &[
    // GuideLLM's chat applications target: TTFT ≤ 200 ms and ITL ≤ 50 ms for 99% of requests
    Preset {
        name: "chat",
        input: "lognormal:256,200",
        output: "lognormal:256,150",
        prefix: None,
        slo: "ttft<=200ms,tpot<=50ms",
        attainment: 0.99,
    },
    // many users behind shared system prompts, MLPerf's interactive targets (450 ms / 40 ms)
    Preset {
        name: "enterprise",
        input: "uniform:100..500",
        output: "lognormal:300,200",
        prefix: Some((8, 1000)),
        slo: "ttft<=450ms,tpot<=40ms",
        attainment: 0.99,
    },
    // long documents in, short summaries out; throughput first, TTFT relaxed
    Preset {
        name: "summarize",
        input: "uniform:4000..8000",
        output: "uniform:200..400",
        prefix: None,
        slo: "ttft<=10s,tpot<=100ms",
        attainment: 0.9,
    },
    // offline: only the cost of the tokens counts (a half-hour bound stands for "eventually")
    Preset {
        name: "batch",
        input: "lognormal:512,300",
        output: "lognormal:512,300",
        prefix: None,
        slo: "e2e<=30m",
        attainment: 0.99,
    },
];

/// One candidate deployment.
#[derive(Clone, Debug)]
struct Candidate {
    gpu: String,
    tp: u32,
    dtype: Dtype,
    engine: String,
    mechanisms: String,
}

/// The validated plan: the base simulation, the candidates, the money.
struct Planned {
    base: plan::Planned,
    model: Option<String>,
    engine_base: EngineArgs,
    candidates: Vec<Candidate>,
    preset: Option<String>,
    attainment: f64,
    capacity: CapacityOptions,
    prices: BTreeMap<String, f64>,
    purchase: BTreeMap<String, f64>,
    running: BTreeMap<String, f64>,
    target_rate: Option<f64>,
    budget: Option<f64>,
    seed: u64,
    /// `--shard I/N`: evaluate only the candidates whose grid index `k` has `k mod N = I`.
    shard: Option<goodput_workload::Shard>,
    out: Option<PathBuf>,
    html: Option<PathBuf>,
    quiet: bool,
}

fn list(flag: &str, v: &str) -> Result<Vec<String>, UsageError> {
    let items: Vec<String> = v.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    if items.is_empty() { Err(usage(flag, "expected a comma-separated list")) } else { Ok(items) }
}

/// `gpu=2.99/h` (or `gpu=30000`) pairs; `per_hour`: the `/h` suffix is allowed.
fn prices(flag: &str, values: &[String], per_hour: bool) -> Result<BTreeMap<String, f64>, UsageError> {
    let mut out = BTreeMap::new();
    for item in values.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let (gpu, price) = item.split_once('=').ok_or_else(|| usage(flag, format!("`{item}`: expected GPU=PRICE")))?;
        let number = if per_hour { price.trim().trim_end_matches("/h") } else { price.trim() };
        let p: f64 = number
            .trim_start_matches('$')
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| usage(flag, format!("`{item}`: the price must be a number of dollars, at least 0")))?;
        out.insert(gpu.trim().to_ascii_lowercase(), p);
    }
    Ok(out)
}

/// The simulation every candidate shares: the workload, the SLO and the capacity steps' load.
fn base_sim(a: &PlanArgs, preset: Option<&Preset>) -> Result<SimArgs, UsageError> {
    let argv = ["goodput", "sim", "--rate", "1", "--requests", "200", "--seed", &a.seed.to_string()];
    let Ok(Cli { command: Command::Sim(mut s) }) = Cli::try_parse_from(argv) else {
        return Err(usage("--seed", "not a valid seed"));
    };
    s.model = a.model.clone();
    s.workload = a.workload.clone();
    s.slo = a.slo.clone();
    if let Some(p) = preset {
        // the preset gives what the flags left at their defaults
        if s.workload.input_tokens == "512" {
            s.workload.input_tokens = p.input.into();
        }
        if s.workload.output_tokens == "128" {
            s.workload.output_tokens = p.output.into();
        }
        if let (Some((groups, tokens)), None) = (p.prefix, s.workload.prefix_groups) {
            s.workload.prefix_groups = Some(groups);
            s.workload.prefix_tokens = Some(tokens);
        }
        if s.slo.slo.is_empty() && s.slo.slo_preset.is_empty() {
            s.slo.slo = vec![p.slo.into()];
        }
    }
    Ok(s)
}

fn validate(a: &PlanArgs) -> Result<Planned, UsageError> {
    let preset = match &a.preset {
        Some(n) => Some(PRESETS.iter().find(|p| p.name == n.as_str()).ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            usage("--preset", format!("unknown preset `{n}`; known: {}", names.join(", ")))
        })?),
        None => None,
    };
    let sim = base_sim(a, preset)?;
    let engine_base =
        EngineArgs { gpu_spec: a.gpu_spec.clone(), model_config: a.model_config.clone(), ..Default::default() };
    let tps = list("--tp", &a.tp)?
        .iter()
        .map(|t| {
            t.parse::<u32>()
                .ok()
                .filter(|&n| (1..=64).contains(&n))
                .ok_or_else(|| usage("--tp", format!("`{t}`: a whole number from 1 to 64")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtypes = list("--dtype", &a.dtype)?
        .iter()
        .map(|d| Dtype::parse(d).ok_or_else(|| usage("--dtype", format!("`{d}`: expected bf16, fp8 or fp4"))))
        .collect::<Result<Vec<_>, _>>()?;
    let engines = list("--engines", &a.engines)?;
    for e in &engines {
        if !["vllm", "sglang", "trtllm"].contains(&e.as_str()) {
            return Err(usage("--engines", format!("unknown engine `{e}`; known: vllm, sglang, trtllm")));
        }
    }
    let mechanisms = list("--mechanisms", &a.mechanisms)?;
    for m in &mechanisms {
        if !MECHANISMS.contains(&m.as_str()) {
            return Err(usage(
                "--mechanisms",
                format!("unknown mechanism set `{m}`; known: {}", MECHANISMS.join(", ")),
            ));
        }
    }
    let gpus = list("--gpus", &a.gpus)?;
    // every GPU name must be known before anything runs
    let catalog = plan::catalog(a.gpu_spec.as_deref())?;
    for g in &gpus {
        catalog.gpu(g).map_err(|e| usage("--gpus", e))?;
    }
    let attainment = a.attainment.unwrap_or(preset.map_or(0.99, |p| p.attainment));
    if !(attainment > 0.0 && attainment <= 1.0) {
        return Err(usage("--attainment", "must be in (0, 1]"));
    }
    if !(a.precision > 0.0 && a.precision < 1.0) {
        return Err(usage("--precision", "must be in (0, 1)"));
    }
    if a.target_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(usage("--target-rate", "must be a rate above 0 requests per second"));
    }
    if a.budget.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
        return Err(usage("--budget", "must be dollars per hour above 0"));
    }
    let step_s = plan::parse_duration("--step-time", &a.step_time)?.as_secs_f64();
    let shard = match &a.shard {
        Some(s) => Some(s.parse::<goodput_workload::Shard>().map_err(|e| usage("--shard", e))?),
        None => None,
    };
    let money = (prices("--price", &a.price, true)?, prices("--purchase", &a.purchase, false)?);
    let running = prices("--running-cost", &a.running_cost, true)?;
    if sim.slo.slo.is_empty() && sim.slo.slo_preset.is_empty() {
        return Err(usage("--slo", "plan needs an SLO (--slo, --slo-preset or --preset)"));
    }
    let candidates = enumerate(&gpus, &tps, &dtypes, &engines, &mechanisms);
    // the workload, SLO and load every candidate shares, planned with the first that fits
    let mut base = Err(usage("--gpus", "no candidate fits"));
    for c in &candidates {
        base = plan::sim(&SimArgs { engine: engine_args(&engine_base, c), ..sim.clone() });
        if base.is_ok() {
            break;
        }
    }
    let base = base.map_err(|e| usage("--gpus", format!("no candidate fits; the first: {}", e.0)))?;
    if let Some(o) = &a.out {
        plan::writable("--out", o)?;
    }
    if let Some(h) = &a.html {
        plan::writable("--html", h)?;
        if a.out.as_ref().is_some_and(|o| plan::same_file(o, h)) {
            return Err(usage("--html", "must differ from --out"));
        }
    }
    Ok(Planned {
        capacity: CapacityOptions {
            attainment,
            start_rate: 1.0,
            precision: a.precision,
            max_steps: 14,
            step_s,
            max_step_s: None,
            min_requests: 200,
        },
        base,
        model: a.model.clone(),
        engine_base,
        candidates,
        preset: preset.map(|p| p.name.to_string()),
        attainment,
        prices: money.0,
        purchase: money.1,
        running,
        target_rate: a.target_rate,
        budget: a.budget,
        seed: a.seed,
        shard,
        out: a.out.clone(),
        html: a.html.clone(),
        quiet: a.quiet,
    })
}

/// Every combination of the dimensions, in the order given.
fn enumerate(
    gpus: &[String],
    tps: &[u32],
    dtypes: &[Dtype],
    engines: &[String],
    mechanisms: &[String],
) -> Vec<Candidate> {
    let mut out = Vec::new();
    for gpu in gpus {
        for &tp in tps {
            for &dtype in dtypes {
                for engine in engines {
                    for m in mechanisms {
                        let (gpu, engine, mechanisms) = (gpu.clone(), engine.clone(), m.clone());
                        out.push(Candidate { gpu, tp, dtype, engine, mechanisms });
                    }
                }
            }
        }
    }
    out
}

/// A candidate's engine flags: the GPU, TP, format and engine, and its mechanism set.
fn engine_args(base: &EngineArgs, c: &Candidate) -> EngineArgs {
    let mut e = EngineArgs {
        preset: Some(c.engine.clone()),
        gpu: Some(c.gpu.clone()),
        tp: Some(c.tp),
        dtype: Some(c.dtype.name().to_string()),
        ..base.clone()
    };
    match c.mechanisms.as_str() {
        "spec" => e.speculative = Some("draft=llama-3.2-1b,k=4,acceptance=0.7".into()),
        "ngram" => e.speculative = Some("ngram,k=4,acceptance=0.5".into()),
        "disagg" => {
            e.disaggregate = Some("prefill=1,decode=1".into());
            e.link = Some("nvlink".into());
        }
        "no-prefix-caching" => e.prefix_caching = Some("off".into()),
        "prefill-first" => e.scheduling = Some("prefill-first".into()),
        _ => {}
    }
    e
}

/// What one candidate came to: its engine, or why it cannot run; its evaluation.
enum Outcome1 {
    Unfit(String),
    Failed(String),
    Done(Box<EnginePlan>, Box<Evaluation>),
}

fn evaluate(p: &Planned, c: &Candidate, res: &Resources) -> Outcome1 {
    let engine = match plan::engine_plan(p.model.as_deref(), &engine_args(&p.engine_base, c))
        .and_then(|e| plan::check_workload_fits(&e, &p.base.plan.workload).map(|()| e))
    {
        Ok(e) => e,
        Err(e) => return Outcome1::Unfit(e.0),
    };
    let mut run_plan: RunPlan = p.base.plan.clone();
    run_plan.engine = Some(engine.clone());
    match lib::evaluate(engine.clone(), &run_plan, res, &p.capacity) {
        Ok(ev) => Outcome1::Done(Box::new(engine), Box::new(ev)),
        Err(e) => Outcome1::Failed(e.to_string()),
    }
}

/// The priced, explained row of one candidate.
fn row(p: &Planned, k: usize, c: &Candidate, o: Outcome1) -> PlanCandidate {
    let price = p.prices.get(&c.gpu).copied().or_else(|| lib::default_price(&c.gpu));
    let mut r = PlanCandidate {
        grid_index: Some(k as u32),
        gpu: c.gpu.clone(),
        tp: c.tp,
        dtype: c.dtype,
        engine: c.engine.clone(),
        mechanisms: c.mechanisms.clone(),
        gpus: c.tp * if c.mechanisms == "disagg" { 2 } else { 1 },
        fits: false,
        capacity: None,
        capacity_per_gpu: None,
        output_tokens_per_s: None,
        total_tokens_per_s: None,
        ttft_p99_ms: None,
        tpot_p99_ms: None,
        binding: None,
        bound: None,
        price_per_gpu_hour: price,
        cost_per_m_output: None,
        cost_per_m_total: None,
        replicas_for_target: None,
        gpus_for_target: None,
        cost_per_hour_for_target: None,
        break_even_hours: None,
        reason: String::new(),
    };
    if let (Some(buy), Some(rent)) = (p.purchase.get(&c.gpu), price) {
        let running = p.running.get(&c.gpu).copied().or_else(|| lib::running_cost_per_hour(&c.gpu)).unwrap_or(0.0);
        r.break_even_hours = lib::break_even_hours(*buy, rent, running);
    }
    let (engine, ev) = match o {
        Outcome1::Unfit(why) => {
            r.reason = format!("cannot run: {why}");
            return r;
        }
        Outcome1::Failed(why) => {
            r.fits = true;
            r.reason = format!("simulation failed: {why}");
            return r;
        }
        Outcome1::Done(e, ev) => (e, ev),
    };
    r.fits = true;
    r.gpus = engine.config.gpus();
    r.binding = ev.binding.clone();
    let Some((rate, at)) = ev.report.rate.zip(ev.at_capacity.clone()) else {
        r.reason = format!(
            "meets the SLO at no rate tried{}",
            ev.binding.as_ref().map_or(String::new(), |b| format!(" ({b} fails first)"))
        );
        return r;
    };
    r.capacity = Some(rate);
    r.capacity_per_gpu = Some(rate / r.gpus as f64);
    r.output_tokens_per_s = Some(at.output_tokens_per_s);
    r.total_tokens_per_s = Some(at.total_tokens_per_s);
    r.ttft_p99_ms = at.ttft_p99_ms;
    r.tpot_p99_ms = at.tpot_p99_ms;
    r.bound = Some(if at.compute_share >= 0.5 { "compute" } else { "memory" }.into());
    if let Some(price) = price {
        let hourly = price * r.gpus as f64;
        r.cost_per_m_output = lib::cost_per_million(hourly, at.output_tokens_per_s);
        r.cost_per_m_total = lib::cost_per_million(hourly, at.total_tokens_per_s);
        if let Some(target) = p.target_rate {
            r.replicas_for_target = lib::deployments_for(target, rate);
            r.gpus_for_target = r.replicas_for_target.map(|n| n * r.gpus);
            r.cost_per_hour_for_target = r.gpus_for_target.map(|g| g as f64 * price);
        }
    }
    r.reason = format!(
        "capacity {rate:.2} req/s, then {} fails first; {}-bound at capacity",
        ev.binding.as_deref().unwrap_or("the queue's growth"),
        r.bound.as_deref().unwrap_or("?")
    );
    if let (Some(budget), Some(cost)) = (p.budget, r.cost_per_hour_for_target)
        && cost > budget
    {
        r.reason.push_str(&format!("; over budget (${cost:.2}/h for the target rate)"));
    }
    r
}

/// Ranks `rows` best first ([`rank`]) and returns the cost-vs-p99-latency Pareto front (indices
/// into the ranked rows): what `goodput plan` does with its candidates, and what `goodput merge`
/// does with the candidates of a sharded search's shards (given in grid order, as one process
/// holds them).
pub(crate) fn rank_and_front(rows: &mut [PlanCandidate], budget: Option<f64>) -> Vec<usize> {
    rank(rows, budget);
    let points: Vec<(usize, f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.cost_per_m_output?, r.ttft_p99_ms? + r.tpot_p99_ms.unwrap_or(0.0))))
        .collect();
    lib::pareto(&points)
}

/// Best first: serving candidates within budget, by cost per million output tokens (or, without a
/// price, by goodput per GPU); then over budget; then those that cannot serve.
fn rank(rows: &mut [PlanCandidate], budget: Option<f64>) {
    let key = |r: &PlanCandidate| {
        let serves = r.capacity.is_some();
        let over = matches!((budget, r.cost_per_hour_for_target), (Some(b), Some(c)) if c > b);
        let tier = if !serves {
            2
        } else if over {
            1
        } else {
            0
        };
        let cost = r.cost_per_m_output.unwrap_or(f64::INFINITY);
        (tier, cost, -r.capacity_per_gpu.unwrap_or(0.0))
    };
    rows.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(ka.2.total_cmp(&kb.2))
    });
}

fn progress(n: usize, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    if quiet || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    } else {
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} candidates {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }
    bar
}

pub fn run(a: PlanArgs) -> anyhow::Result<Outcome> {
    let p = validate(&a)?;
    let started = Instant::now();
    // this shard's share of the grid (all of it without --shard): candidate k goes to k mod N
    let mine: Vec<(usize, &Candidate)> = p
        .candidates
        .iter()
        .enumerate()
        .filter(|(k, _)| p.shard.is_none_or(|s| *k as u64 % s.count as u64 == s.index as u64))
        .collect();
    let bar = progress(mine.len(), p.quiet);
    let done = AtomicU64::new(0);
    let res = p.base.res.clone();
    // on the pool's threads even for one candidate (rayon runs a lone item on the calling thread,
    // which is inside the async runtime, where the evaluation cannot start its own)
    let outcomes: Vec<Outcome1> = rayon::scope(|_| {
        mine.par_iter()
            .map(|(_, c)| {
                let o = evaluate(&p, c, &res);
                bar.set_position(done.fetch_add(1, Ordering::Relaxed) + 1);
                o
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut rows: Vec<PlanCandidate> = mine.iter().zip(outcomes).map(|((k, c), o)| row(&p, *k, c, o)).collect();
    let pareto = rank_and_front(&mut rows, p.budget);
    let w = &p.base.plan.workload.spec;
    let report = PlanReport {
        model: p.base.plan.engine.as_ref().map_or_else(String::new, |e| e.config.model.name.clone()),
        preset: p.preset.clone(),
        workload: format!(
            "input {} tokens, output {}{}",
            w.input_tokens,
            w.output_tokens,
            if w.prefix_groups > 0 {
                format!(", {} shared prefixes of {} tokens", w.prefix_groups, w.prefix_tokens)
            } else {
                String::new()
            }
        ),
        slo: p.base.plan.slo.slo().map(|(s, _)| s.describe()).unwrap_or_default(),
        attainment_target: p.attainment,
        target_rate: p.target_rate,
        budget_per_hour: p.budget,
        seed: p.seed,
        grid_size: Some(p.candidates.len() as u32),
        shard: p.shard,
        missing_candidates: Vec::new(),
        pareto,
        candidates: rows,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    say!("{}", goodput_render::render_plan(&report));
    let mut doc = ResultDoc::new(env!("CARGO_PKG_VERSION"), Vec::new());
    doc.plan = Some(report.clone());
    if let Some(path) = &p.out {
        crate::output::write_result(&doc, path)?;
        say!("  results      {}\n", path.display());
    }
    if let Some(path) = &p.html {
        let source = p.out.as_deref().and_then(|o| o.file_name()).map(|n| n.to_string_lossy().into_owned());
        crate::output::write_html(path, &doc, source.as_deref().unwrap_or("goodput plan"))?;
    }
    // a shard's few candidates may all fail to serve: the merged plan gives the answer
    let serves = report.shard.is_some() || report.candidates.iter().any(|c| c.capacity.is_some());
    Ok(if serves { Outcome::Ok } else { Outcome::Failed })
}
