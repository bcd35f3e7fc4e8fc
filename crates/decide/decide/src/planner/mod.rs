//! The planner: which deployment serves a workload under an SLO for the least money.
//!
//! A [`PlanSearch`] holds typed values only: the model, the shared run plan (workload, SLO,
//! load), the candidates (GPU × tensor parallelism × weight format × engine × [`Mechanism`]),
//! the capacity search's options and the money. Each candidate becomes an engine through an
//! [`EngineSpec`] (never through flags), its capacity under the SLO is searched in virtual time
//! ([`crate::capacity`]) on every core, it is priced ([`money`]), and the rows are ranked with
//! their cost-vs-latency Pareto front ([`rank_and_front`]). [`merge`] puts a sharded search's
//! shards back together; [`presets`] are the workload presets.

pub mod merge;
pub mod money;
pub mod presets;

use std::collections::BTreeMap;
use std::time::Instant;

use goodput_engine::Preset;
use goodput_engine::catalog::{Catalog, ModelArch};
use goodput_engine::config::{Named, Scheduling, SpecMethod, Speculative};
use goodput_engine::{Disaggregation, Link};
use goodput_engine::{Dtype, EngineConfig, EngineSpec};
use goodput_results::plan::{EnginePlan, RunPlan, WorkloadPlan};
use goodput_results::planning::{PlanCandidate, PlanReport};
use goodput_stage::{Resources, SimTarget, StageError};
use goodput_workload::Shard;
use rayon::prelude::*;

use crate::capacity::{CapacityOptions, CapacityOutcome, search};

/// A set of engine mechanisms a plan compares against the engine's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// The engine's defaults.
    Baseline,
    /// Speculative decoding with a small draft model (k = 4, 70% acceptance).
    Spec,
    /// Speculative decoding by prompt lookup (k = 4, 50% acceptance).
    Ngram,
    /// One prefill and one decode instance over NVLink.
    Disagg,
    NoPrefixCaching,
    PrefillFirst,
}

impl Named for Mechanism {
    const NAMES: &'static [(Self, &'static str)] = &[
        (Mechanism::Baseline, "baseline"),
        (Mechanism::Spec, "spec"),
        (Mechanism::Ngram, "ngram"),
        (Mechanism::Disagg, "disagg"),
        (Mechanism::NoPrefixCaching, "no-prefix-caching"),
        (Mechanism::PrefillFirst, "prefill-first"),
    ];
}

/// The draft model of the `spec` mechanism when none is given: the smallest catalog model that
/// shares the target's tokenizer (the same publisher and vocabulary size) and has at most a
/// quarter of its parameters; `None` when the catalog has none (Mixtral, Qwen, Llama 4 here).
pub fn draft_for<'a>(catalog: &'a Catalog, target: &ModelArch) -> Option<&'a ModelArch> {
    let publisher = |m: &ModelArch| m.hf_id.split('/').next().unwrap_or_default().to_string();
    catalog
        .models
        .values()
        .filter(|m| {
            m.name != target.name
                && m.vocab == target.vocab
                && publisher(m) == publisher(target)
                && m.total_params() * 4 <= target.total_params()
        })
        .min_by_key(|m| m.total_params())
}

impl Mechanism {
    /// Sets the mechanism on `spec` for serving `target` on GPUs whose interconnect runs at
    /// `gpu_link_gbs` GB/s; the draft model is `draft` (a catalog name) or [`draft_for`].
    pub fn apply(
        self,
        spec: &mut EngineSpec,
        catalog: &Catalog,
        target: &ModelArch,
        draft: Option<&str>,
        gpu_link_gbs: f64,
    ) -> Result<(), String> {
        match self {
            Mechanism::Baseline => {}
            Mechanism::Spec => {
                let draft = match draft {
                    Some(name) => catalog.model(name).map_err(|e| e.to_string())?,
                    None => draft_for(catalog, target).ok_or_else(|| {
                        format!(
                            "no catalog model shares {}'s tokenizer to draft for it (same publisher and vocabulary, at \
                             most a quarter of its size): pass --draft MODEL",
                            target.name
                        )
                    })?,
                }
                .clone();
                let method = SpecMethod::Draft { model: Box::new(draft) };
                spec.speculative = Some(Speculative { method, k: 4, acceptance: 0.7 });
            }
            Mechanism::Ngram => {
                spec.speculative = Some(Speculative { method: SpecMethod::Ngram, k: 4, acceptance: 0.5 })
            }
            Mechanism::Disagg => {
                let link = Link::nvlink(gpu_link_gbs);
                spec.disaggregation = Some(Disaggregation { prefill: 1, decode: 1, link, ppd: false });
            }
            Mechanism::NoPrefixCaching => spec.prefix_caching = Some(false),
            Mechanism::PrefillFirst => spec.scheduling = Some(Scheduling::PrefillFirst),
        }
        Ok(())
    }
}

/// One candidate deployment.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub gpu: String,
    pub tp: u32,
    pub dtype: Dtype,
    pub engine: Preset,
    pub mechanism: Mechanism,
}

/// Every combination of the dimensions, in the order given (the grid order shards deal out).
pub fn enumerate(
    gpus: &[String],
    tps: &[u32],
    dtypes: &[Dtype],
    engines: &[Preset],
    mechanisms: &[Mechanism],
) -> Vec<Candidate> {
    let mut out = Vec::new();
    for gpu in gpus {
        for &tp in tps {
            for &dtype in dtypes {
                for &engine in engines {
                    for &mechanism in mechanisms {
                        out.push(Candidate { gpu: gpu.clone(), tp, dtype, engine, mechanism });
                    }
                }
            }
        }
    }
    out
}

/// Prices, and what the deployment must serve for how much.
#[derive(Clone, Debug, Default)]
pub struct Money {
    /// Rent per GPU-hour by GPU name (default: [`money::default_price`]).
    pub prices: BTreeMap<String, f64>,
    /// Purchase price per GPU, for the buy-vs-rent break-even.
    pub purchase: BTreeMap<String, f64>,
    /// An owned GPU's running cost per hour (default: [`money::running_cost_per_hour`]).
    pub running: BTreeMap<String, f64>,
    /// Requests per second the deployment must serve.
    pub target_rate: Option<f64>,
    /// Most dollars per hour for the target rate.
    pub budget: Option<f64>,
}

/// A whole plan search, validated.
#[derive(Clone, Debug)]
pub struct PlanSearch {
    pub model: ModelArch,
    /// GPUs and draft models.
    pub catalog: Catalog,
    /// The run every candidate shares: workload, SLO, load (its engine is the candidate's).
    pub base: RunPlan,
    pub res: Resources,
    pub candidates: Vec<Candidate>,
    pub capacity: CapacityOptions,
    pub money: Money,
    /// The workload preset used, by name.
    pub preset: Option<String>,
    /// This shard's share of the grid: candidate `k` when `k mod N = I`.
    pub shard: Option<Shard>,
    /// The `spec` mechanism's draft model (`--draft`); `None`: [`draft_for`] the model.
    pub draft: Option<String>,
}

/// What one candidate came to.
#[derive(Debug)]
pub enum Outcome {
    /// Its engine cannot run the workload: why.
    Unfit(String),
    /// Its simulation failed: why.
    Failed(String),
    Done(Box<EnginePlan>, Box<Evaluation>),
}

/// One candidate's capacity search, and the figures at its capacity.
#[derive(Clone, Debug)]
pub struct Evaluation {
    pub report: goodput_results::CapacityReport,
    /// The step run at the capacity rate (`None` when no rate met the SLO).
    pub at_capacity: Option<AtCapacity>,
    /// The SLO predicate with the lowest pass rate in the first step above capacity (or in the
    /// first step, when none passed).
    pub binding: Option<String>,
}

/// What the step at the capacity rate measured.
#[derive(Clone, Debug, PartialEq)]
pub struct AtCapacity {
    /// Requests completed per second.
    pub requests_per_s: f64,
    /// Prompt tokens of the measured requests, and KV blocks the prefix cache served.
    pub input_tokens: u64,
    pub prefix_hit_blocks: Option<u64>,
    pub output_tokens_per_s: f64,
    pub total_tokens_per_s: f64,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    /// Share of the engine's iterations that were compute-bound.
    pub compute_share: f64,
}

impl Evaluation {
    /// What a capacity search says of a candidate: the figures of the step at its capacity,
    /// and the predicate that failed first in the lowest step above it.
    pub fn of(found: CapacityOutcome) -> Self {
        let rate = found.report.rate;
        let at_capacity = rate.and_then(|c| found.step_at(c)).map(|s| {
            let r = &s.run;
            AtCapacity {
                requests_per_s: r.summary.request_throughput,
                input_tokens: r.summary.input_tokens,
                prefix_hit_blocks: r.engine_stats.as_ref().and_then(|s| s.prefix_cache.map(|c| c.hit_blocks)),
                output_tokens_per_s: r.summary.output_throughput,
                total_tokens_per_s: r.summary.total_throughput,
                ttft_p99_ms: r.summary.ttft_ms.p99,
                tpot_p99_ms: r.summary.tpot_ms.p99,
                compute_share: r.engine_stats.as_ref().map_or(0.0, |s| s.compute_bound_share()),
            }
        });
        let above =
            found.steps.iter().filter(|s| rate.is_none_or(|c| s.rate > c)).min_by(|a, b| a.rate.total_cmp(&b.rate));
        let binding = above.and_then(|s| s.run.summary.slo.as_ref()).and_then(|s| s.binding.clone());
        Evaluation { at_capacity, report: found.report, binding }
    }
}

/// Runs the capacity search for `engine` on `plan` (its workload and SLO) in virtual time, on
/// the calling thread.
pub fn evaluate(
    engine: EnginePlan,
    plan: &RunPlan,
    res: &Resources,
    o: &CapacityOptions,
) -> Result<Evaluation, StageError> {
    let rt = tokio::runtime::Builder::new_current_thread().build().map_err(StageError::Runtime)?;
    let mut target = SimTarget { engine, res: res.clone() };
    // the plan keeps each candidate's figures, not its steps' runs: no whole-run summaries
    let control = |_: &goodput_stage::Stage, saturation| goodput_stage::Control {
        saturation,
        whole_run: false,
        ..goodput_stage::Control::quiet()
    };
    let found = rt.block_on(search(&mut target, plan, o, control, |_| {}))?;
    Ok(Evaluation::of(found))
}

/// Refuses a synthetic workload whose every request `engine` would refuse (a prompt over the
/// token budget without chunked prefill, over the context, over the KV cache), saying why.
pub fn smallest_request_fits(engine: &EngineConfig, w: &WorkloadPlan) -> Result<(), String> {
    if w.spec.source.kind != "synthetic" {
        return Ok(());
    }
    let prompt = w.spec.input_tokens.min().saturating_add(w.spec.prefix_tokens);
    let output = w.spec.output_tokens.min();
    let e = goodput_engine::Engine::new(engine.clone()).map_err(|e| e.to_string())?;
    let probe = goodput_engine::EngineRequest {
        prompt_tokens: prompt,
        output_tokens: output,
        max_tokens: output,
        ..Default::default()
    };
    e.check(&probe).map_err(|r| {
        format!("even the smallest request ({prompt} prompt + {output} output tokens) cannot run on this engine: {r}")
    })
}

impl PlanSearch {
    /// The candidates this process evaluates, with their grid index: all of them, or this
    /// shard's share.
    pub fn mine(&self) -> Vec<(usize, &Candidate)> {
        let shard = self.shard;
        self.candidates
            .iter()
            .enumerate()
            .filter(|(k, _)| shard.is_none_or(|s| *k as u64 % s.count as u64 == s.index as u64))
            .collect()
    }

    /// The engine of candidate `c`, checked against the workload.
    pub fn engine(&self, c: &Candidate) -> Result<EnginePlan, String> {
        let gpu = self.catalog.gpu(&c.gpu).map_err(|e| e.to_string())?.clone();
        let mut spec =
            EngineSpec { preset: Some(c.engine), tp: Some(c.tp), dtype: Some(c.dtype), ..Default::default() };
        c.mechanism.apply(&mut spec, &self.catalog, &self.model, self.draft.as_deref(), gpu.link_gbs)?;
        let engine = EnginePlan::new(spec.build(self.model.clone(), gpu)).map_err(|e| e.to_string())?;
        smallest_request_fits(&engine.config, &self.base.workload)?;
        Ok(engine)
    }

    /// Candidate `c`'s engine and capacity.
    pub fn evaluate(&self, c: &Candidate) -> Outcome {
        let engine = match self.engine(c) {
            Ok(e) => e,
            Err(why) => return Outcome::Unfit(why),
        };
        let mut plan = self.base.clone();
        plan.engine = Some(engine.clone());
        match evaluate(engine.clone(), &plan, &self.res, &self.capacity) {
            Ok(ev) => Outcome::Done(Box::new(engine), Box::new(ev)),
            Err(e) => Outcome::Failed(e.to_string()),
        }
    }

    /// Evaluates this process's candidates on every core (`on_done` after each), prices and
    /// ranks them.
    pub fn run(&self, on_done: impl Fn() + Sync) -> PlanReport {
        let started = Instant::now();
        let mine = self.mine();
        // on the pool's threads even for one candidate (rayon runs a lone item on the calling
        // thread, which may be inside an async runtime, where the evaluation cannot start its own)
        let outcomes: Vec<Outcome> = rayon::scope(|_| {
            mine.par_iter()
                .map(|(_, c)| {
                    let o = self.evaluate(c);
                    on_done();
                    o
                })
                .collect()
        });
        let mut rows: Vec<PlanCandidate> = mine.iter().zip(outcomes).map(|((k, c), o)| self.row(*k, c, o)).collect();
        let pareto = rank_and_front(&mut rows, self.money.budget);
        let w = &self.base.workload.spec;
        PlanReport {
            model: self.model.name.clone(),
            preset: self.preset.clone(),
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
            slo: self.base.slo.slo().map(|(s, _)| s.describe()).unwrap_or_default(),
            attainment_target: self.capacity.attainment,
            target_rate: self.money.target_rate,
            budget_per_hour: self.money.budget,
            seed: self.base.load.seed,
            grid_size: Some(self.candidates.len() as u32),
            shard: self.shard,
            missing_candidates: Vec::new(),
            pareto,
            candidates: rows,
            elapsed_s: started.elapsed().as_secs_f64(),
        }
    }

    /// The priced, explained row of candidate `c` (grid index `k`).
    pub fn row(&self, k: usize, c: &Candidate, o: Outcome) -> PlanCandidate {
        let m = &self.money;
        let price = m.prices.get(&c.gpu).copied().or_else(|| money::default_price(&c.gpu));
        let mut r = PlanCandidate {
            grid_index: Some(k as u32),
            gpu: c.gpu.clone(),
            tp: c.tp,
            dtype: c.dtype,
            engine: c.engine.name().to_string(),
            mechanisms: c.mechanism.name().to_string(),
            gpus: c.tp * if c.mechanism == Mechanism::Disagg { 2 } else { 1 },
            price_per_gpu_hour: price,
            ..PlanCandidate::default()
        };
        let (engine, ev) = match o {
            Outcome::Unfit(why) => {
                r.reason = format!("cannot run: {why}");
                return r;
            }
            Outcome::Failed(why) => {
                r.fits = true;
                r.reason = format!("simulation failed: {why}");
                return r;
            }
            Outcome::Done(e, ev) => (e, ev),
        };
        r.fits = true;
        r.gpus = engine.config.gpus();
        r.binding = ev.binding.clone();
        r.curve = ev.report.curve.clone();
        let Some((rate, at)) = ev.report.rate.zip(ev.at_capacity.clone()) else {
            r.reason = format!(
                "meets the SLO at no rate tried{}",
                ev.binding.as_ref().map_or(String::new(), |b| format!(" ({b} fails first)"))
            );
            return r;
        };
        // arrivals a deployment did not keep up with (a loose SLO) are not its capacity: what it
        // served is
        let outran = at.requests_per_s < 0.95 * rate;
        let capacity = if outran { at.requests_per_s } else { rate };
        r.capacity = Some(capacity);
        r.capacity_per_gpu = Some(capacity / r.gpus as f64);
        r.served_requests_per_s = Some(at.requests_per_s);
        r.output_tokens_per_s_per_gpu = Some(at.output_tokens_per_s / r.gpus as f64);
        r.cached_prompt_share = at
            .prefix_hit_blocks
            .filter(|_| at.input_tokens > 0)
            .map(|b| (b as f64 * engine.config.block_size as f64 / at.input_tokens as f64).min(1.0));
        r.output_tokens_per_s = Some(at.output_tokens_per_s);
        r.total_tokens_per_s = Some(at.total_tokens_per_s);
        r.ttft_p99_ms = at.ttft_p99_ms;
        r.tpot_p99_ms = at.tpot_p99_ms;
        r.bound = Some(if at.compute_share >= 0.5 { "compute" } else { "memory" }.into());
        if let Some(price) = price {
            let hourly = price * r.gpus as f64;
            r.cost_per_m_output = money::cost_per_million(hourly, at.output_tokens_per_s);
            r.cost_per_m_total = money::cost_per_million(hourly, at.total_tokens_per_s);
            if let Some(target) = m.target_rate {
                r.replicas_for_target = money::deployments_for(target, capacity);
                r.gpus_for_target = r.replicas_for_target.map(|n| n * r.gpus);
                r.cost_per_hour_for_target = r.gpus_for_target.map(|g| g as f64 * price);
            }
        }
        // buying against renting, for a candidate that runs
        if let (Some(buy), Some(rent)) = (m.purchase.get(&c.gpu), price) {
            let running =
                m.running.get(&c.gpu).copied().or_else(|| money::running_cost_per_hour(&c.gpu)).unwrap_or(0.0);
            r.break_even_hours = money::break_even_hours(*buy, rent, running);
        }
        r.reason = if outran {
            format!(
                "serves {capacity:.2} req/s (arrivals at {rate:.2} req/s still met the SLO while they queued); {}-bound",
                r.bound.as_deref().unwrap_or("?")
            )
        } else {
            format!(
                "capacity {rate:.2} req/s, then {} fails first; {}-bound at capacity",
                ev.binding.as_deref().unwrap_or("the queue's growth"),
                r.bound.as_deref().unwrap_or("?")
            )
        };
        if let (Some(budget), Some(cost)) = (m.budget, r.cost_per_hour_for_target)
            && cost > budget
        {
            r.reason.push_str(&format!("; over budget (${cost:.2}/h for the target rate)"));
        }
        r
    }
}

/// Ranks `rows` best first ([`rank`]) and returns the cost-vs-p99-latency Pareto front (indices
/// into the ranked rows): what `goodput plan` does with its candidates, and what `goodput merge`
/// does with the candidates of a sharded search's shards (given in grid order, as one process
/// holds them).
pub fn rank_and_front(rows: &mut [PlanCandidate], budget: Option<f64>) -> Vec<usize> {
    rank(rows, budget);
    let points: Vec<(usize, f64, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.cost_per_m_output?, r.ttft_p99_ms? + r.tpot_p99_ms.unwrap_or(0.0))))
        .collect();
    money::pareto(&points)
}

/// Best first: serving candidates within budget, by cost per million output tokens (or, without a
/// price, by goodput per GPU); then over budget; then those that cannot serve.
pub fn rank(rows: &mut [PlanCandidate], budget: Option<f64>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_shares_its_targets_tokenizer() {
        let c = Catalog::builtin();
        let draft = |m: &str| draft_for(&c, c.model(m).unwrap()).map(|d| d.name.clone());
        assert_eq!(draft("llama-3.1-8b").as_deref(), Some("llama-3.2-1b"));
        assert_eq!(draft("llama-3.1-70b").as_deref(), Some("llama-3.2-1b"));
        assert_eq!(draft("llama-2-70b").as_deref(), Some("llama-2-7b"));
        // Mistral's tokenizer has Llama 2's vocabulary size, not its publisher; Qwen and Llama 4
        // have no smaller sibling here
        for m in ["mixtral-8x7b", "qwen2.5-7b", "llama-4-scout"] {
            assert_eq!(draft(m), None, "{m}");
        }
        // the spec mechanism says so, and takes a draft when given one
        let mut spec = EngineSpec::default();
        let mixtral = c.model("mixtral-8x7b").unwrap();
        let e = Mechanism::Spec.apply(&mut spec, &c, mixtral, None, 900.0).unwrap_err();
        assert!(e.contains("--draft MODEL"), "{e}");
        Mechanism::Spec.apply(&mut spec, &c, mixtral, Some("llama-2-7b"), 900.0).unwrap();
        assert!(spec.speculative.is_some());
    }
}
