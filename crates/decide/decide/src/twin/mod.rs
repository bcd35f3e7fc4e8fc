//! The digital twin (`goodput fit`): an engine model of the user's own server, learnt from runs
//! measured against it, that predicts loads it was never run at and checks itself.
//!
//! - [`observe`]: the server's iterations as the token timestamps of all streams show them;
//! - [`fit`]: the step cost by non-negative least squares with bootstrap uncertainties, and the
//!   front end from requests that found the server idle;
//! - this module: the scheduler (sequence limit, prefill policy, prefill budget, tokens per
//!   event), the twin file's contents (`goodput_results::twin::Twin`), the engine it stands for
//!   ([`TwinEngine::engine_spec`]) and what a prediction extrapolates ([`TwinEngine::beyond`]);
//! - [`validate`]: measured against predicted, run by run.

pub mod fit;
pub mod observe;
pub mod validate;

use goodput_engine::{EngineSpec, Fitted, FittedStep, Scheduling};
use goodput_results::twin::{
    FrontEnd, Limit, Param, Ranges, SchedulerParams, StepParams, TRAINING_DISAGREES, TWIN_SCHEMA_VERSION, TrainingRun,
    Twin, UNSEEN_KV_TOKENS,
};
use goodput_results::{Run, Target};
use goodput_workload::{Arrivals, Load};

/// Why runs cannot be fitted or a twin file not used.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    #[error("{0}: {1}")]
    Refused(String, String),
    #[error("no training run given")]
    NoRuns,
    #[error(
        "the runs show no iteration of the server (no two token events of a stream while another was in flight): run at least one load with several tokens per request"
    )]
    NoIterations,
}

/// A run named by the file it came from.
pub struct NamedRun<'a> {
    pub file: &'a str,
    pub run: &'a Run,
}

/// The server a run measured, as the twin records it.
fn server_of(run: &Run) -> Result<(String, Option<String>), String> {
    match &run.target {
        Target::Url { url, model } => Ok((url.clone(), model.clone().or_else(|| run.plan.model.clone()))),
        Target::Embedded { model, engine, .. } => {
            Ok((format!("embedded engine ({})", engine.short()), model.clone().or_else(|| run.plan.model.clone())))
        }
        Target::Sim { .. } => Err("a simulated run: fit measures a server (goodput bench)".into()),
        Target::Imported(s) => Ok((s.url.clone().unwrap_or_else(|| s.file.clone()), s.model.clone())),
    }
}

/// Checks that the runs measured one server and carry per-token timestamps.
fn check_runs(runs: &[NamedRun]) -> Result<(String, Option<String>), TwinError> {
    let first = runs.first().ok_or(TwinError::NoRuns)?;
    let id = server_of(first.run).map_err(|m| TwinError::Refused(first.file.into(), m))?;
    for r in runs {
        let this = server_of(r.run).map_err(|m| TwinError::Refused(r.file.into(), m))?;
        if this != id {
            return Err(TwinError::Refused(
                r.file.into(),
                format!(
                    "measured {} (model {}), but {} measured {} (model {}): one fit is one server and model",
                    this.0,
                    this.1.as_deref().unwrap_or("?"),
                    first.file,
                    id.0,
                    id.1.as_deref().unwrap_or("?")
                ),
            ));
        }
        if let Target::Imported(src) = &r.run.target
            && src.clock != goodput_results::import::RecordClock::Run
        {
            return Err(TwinError::Refused(
                r.file.into(),
                format!(
                    "imported from {} without per-token timestamps on one clock (each record counts from its own send, or \
                     there are no records): the fit needs when every token of every stream arrived; measure with goodput bench",
                    src.tool.name()
                ),
            ));
        }
        let timed = r.run.requests.iter().filter(|q| q.event_ms.len() > 1 && q.sent_ms.is_some()).count();
        if timed == 0 {
            return Err(TwinError::Refused(
                r.file.into(),
                "no request record with per-token timestamps (sent time and two or more events): measure with \
                 goodput bench and keep its records (--records all)"
                    .into(),
            ));
        }
        if r.run.requests.iter().all(|q| observe::prompt_sent(q).is_none()) {
            return Err(TwinError::Refused(r.file.into(), "the records carry no prompt lengths".into()));
        }
    }
    Ok(id)
}

/// The load of a run, in words, and its closed-loop users or open-loop rate.
fn load_of(run: &Run) -> (String, Option<u64>, Option<f64>) {
    let load = run.load.clone().unwrap_or_else(|| run.plan.load.load.clone());
    match &load {
        Load::Closed { concurrency, .. } => (format!("{concurrency} users"), Some(*concurrency as u64), None),
        Load::Open { arrivals, .. } => match arrivals {
            Arrivals::AllAtOnce => ("all at once".into(), None, None),
            a => {
                let kind = match a {
                    Arrivals::Poisson { .. } => "poisson",
                    Arrivals::Constant { .. } => "constant",
                    Arrivals::Gamma { .. } => "gamma",
                    Arrivals::Ramp { .. } => "ramp",
                    _ => "replay",
                };
                let rate = load.offered_rate();
                (format!("{kind} at {} req/s", rate.map_or("?".into(), |r| format!("{r:.3}"))), None, rate)
            }
        },
    }
}

fn widen(r: &mut Option<[u64; 2]>, v: u64) {
    *r = Some(r.map_or([v, v], |[lo, hi]| [lo.min(v), hi.max(v)]));
}

/// What all the training runs show together.
struct Seen {
    steps: Vec<observe::StepRow>,
    idle: Vec<observe::IdleArrival>,
    ranges: Ranges,
    /// First tokens that shared an iteration with running decodes, and that did not.
    mixed: u32,
    alone: u32,
    /// The most sequences generating together, and iteration ends at which a request queued
    /// at that count.
    running: u32,
    queued: u32,
    max_prefill: u64,
    per_event: Vec<f64>,
    /// The longest prompt plus output.
    context: u64,
}

/// Observes every run and gathers what they show, with the ranges they covered.
fn seen(runs: &[NamedRun]) -> Seen {
    let mut s = Seen {
        steps: Vec::new(),
        idle: Vec::new(),
        ranges: Ranges { prompt_tokens: [u64::MAX, 0], output_tokens: [u64::MAX, 0], ..Default::default() },
        mixed: 0,
        alone: 0,
        running: 0,
        queued: 0,
        max_prefill: 0,
        per_event: Vec::new(),
        context: 0,
    };
    for r in runs {
        let o = observe::observe(&r.run.requests);
        s.steps.extend(o.steps);
        s.idle.extend(o.idle_arrivals);
        (s.mixed, s.alone) = (s.mixed + o.prefills_mixed, s.alone + o.prefills_alone);
        if o.max_running > s.running {
            (s.running, s.queued) = (o.max_running, o.queued_at_max);
        } else if o.max_running == s.running {
            s.queued += o.queued_at_max;
        }
        s.max_prefill = s.max_prefill.max(o.max_prefill_tokens);
        s.per_event.push(o.tokens_per_event);
        let (_, users, rate) = load_of(r.run);
        if let Some(u) = users {
            widen(&mut s.ranges.concurrency, u);
        }
        if let Some(x) = rate {
            s.ranges.rate = Some(s.ranges.rate.map_or([x, x], |[lo, hi]| [lo.min(x), hi.max(x)]));
        }
        for q in r.run.requests.iter().filter(|q| q.is_success()) {
            let (p, out) = (observe::prompt_sent(q).unwrap_or(0), q.output_tokens.unwrap_or(0));
            let r = &mut s.ranges;
            r.prompt_tokens = [r.prompt_tokens[0].min(p), r.prompt_tokens[1].max(p)];
            r.output_tokens = [r.output_tokens[0].min(out), r.output_tokens[1].max(out)];
            s.context = s.context.max(p + out);
        }
    }
    s.ranges.running = s.running as u64;
    s
}

/// Fits a twin to `runs` (measured against one server). `version` names the tool.
pub fn fit_twin(runs: &[NamedRun], version: &str) -> Result<Twin, TwinError> {
    let (server, model) = check_runs(runs)?;
    let Seen { steps, idle, ranges, mixed, alone, running, queued, max_prefill, mut per_event, context } = seen(runs);
    let mut f = fit::fit_steps(&steps, 7).ok_or(TwinError::NoIterations)?;
    let decode_coefs: [f64; 5] = std::array::from_fn(|j| f.coefs[j].value);
    let headers_front = fit::front_end_from_headers(&idle);
    let idle_prefill = fit::prefill_from_idle(&idle, &steps, &decode_coefs, headers_front.as_ref());
    if let Some(p) = idle_prefill {
        f.coefs[1] = fit::Coef { value: p.fixed_s, stderr: f.coefs[1].stderr.min(p.jitter_s), identified: true };
        f.coefs[2] = fit::Coef { value: p.per_token_s, stderr: p.per_token_stderr_s, identified: true };
    }
    let coefs: [f64; 5] = std::array::from_fn(|j| f.coefs[j].value);
    let param =
        |j: usize| Param { value: f.coefs[j].value, stderr: f.coefs[j].stderr, identified: f.coefs[j].identified };
    let mut unidentified = Vec::new();
    for (j, why) in [
        (1, "prefill_overhead_s: no iteration that prefilled was timed (train at a concurrency above 1)"),
        (2, "per_prefill_token_s: the prompts prefilled per iteration did not vary (train at two prompt lengths)"),
        (3, "per_decode_seq_s: never more than one sequence decoded at once (train at a concurrency above 1)"),
        (4, "per_context_token_s: the context decoded over did not vary apart from the sequence count"),
    ] {
        if !f.coefs[j].identified {
            unidentified.push(why.to_string());
        }
    }
    let from_fit = |f: fit::FrontFit| FrontEnd {
        latency_s: Param { value: f.fixed_s, stderr: f.jitter_s / (f.requests as f64).sqrt(), identified: true },
        per_prompt_token_s: f.per_token_s,
        jitter_s: f.jitter_s,
        requests: f.requests,
    };
    let front = match (headers_front, idle_prefill, fit::front_end(&idle, &coefs)) {
        (Some(h), _, _) => from_fit(h),
        (None, Some(p), _) => FrontEnd {
            latency_s: Param {
                value: p.front_end_s,
                stderr: p.jitter_s / (p.requests as f64).sqrt(),
                identified: true,
            },
            per_prompt_token_s: 0.0,
            jitter_s: p.jitter_s,
            requests: p.requests,
        },
        (None, None, Some(f)) => from_fit(f),
        (None, None, None) => {
            unidentified.push("front_end: no request found the server idle (train one run at concurrency 1)".into());
            FrontEnd {
                latency_s: Param { value: 0.0, stderr: 0.0, identified: false },
                per_prompt_token_s: 0.0,
                jitter_s: 0.0,
                requests: 0,
            }
        }
    };
    let limit_seen = queued > 0;
    if !limit_seen {
        unidentified.push(format!(
            "max_num_seqs: no request waited for a sequence slot; at least {running} (pass --max-num-seqs for loads above it)"
        ));
    }
    let scheduling_identified = mixed + alone > 0;
    if !scheduling_identified {
        unidentified.push("scheduling: no prefill met running decodes (train at a concurrency above 1)".into());
    }
    unidentified.push(format!(
        "max_batched_tokens: at least {max_prefill} (the longest prefill of one iteration seen; prompts above it extrapolate)"
    ));
    unidentified.push("kv_tokens: no run filled the server's KV cache (no preemption modelled)".into());
    per_event.sort_by(f64::total_cmp);
    let mut twin = Twin {
        schema_version: TWIN_SCHEMA_VERSION,
        kind: "goodput-twin".into(),
        tool_version: version.into(),
        created_at: goodput_results::now_rfc3339(),
        server,
        model,
        step: StepParams {
            step_overhead_s: param(0),
            prefill_overhead_s: param(1),
            per_prefill_token_s: param(2),
            per_decode_seq_s: param(3),
            per_context_token_s: param(4),
            rmse_s: f.rmse_s,
            iterations: f.rows,
        },
        front_end: front,
        scheduler: SchedulerParams {
            max_num_seqs: Limit { value: running.max(1) as u64, identified: limit_seen },
            scheduling: if alone > mixed { Scheduling::PrefillFirst } else { Scheduling::Chunked },
            scheduling_identified,
            max_batched_tokens: Limit { value: max_prefill.max(1), identified: false },
            tokens_per_event: per_event.get(per_event.len() / 2).copied().unwrap_or(1.0),
        },
        kv_tokens: Limit { value: UNSEEN_KV_TOKENS, identified: false },
        context_tokens: context.max(1),
        training: Vec::new(),
        ranges,
        unidentified,
        warnings: Vec::new(),
    };
    check_training(&mut twin, runs);
    Ok(twin)
}

/// The twin's error on each training run, and a warning for each run it misses by more than
/// [`TRAINING_DISAGREES`] and for each run the client could not keep up with (its timings are
/// then partly the client's, and so is the twin).
fn check_training(twin: &mut Twin, runs: &[NamedRun]) {
    twin.training = training_errors(twin, runs);
    let client_bound =
        runs.iter().filter(|r| r.run.summary.verdict == goodput_metrics::ClientVerdict::ClientBound).map(|r| {
            format!(
                "{}: the run was client-bound (the load generator fell behind its schedule): its timings are partly \
                 the client's, and so is the twin; measure it again with more client CPU or a lighter load",
                r.file
            )
        });
    twin.warnings = client_bound.collect();
    let missed: Vec<String> = twin
        .training
        .iter()
        .filter_map(|t| {
            let off: Vec<String> =
                [("TTFT", t.ttft_mean_ratio), ("TPOT", t.tpot_mean_ratio), ("output throughput", t.throughput_ratio)]
                    .into_iter()
                    .filter(|(_, r)| r.is_some_and(|r| (r - 1.0).abs() > TRAINING_DISAGREES))
                    .map(|(m, r)| format!("{m} ×{:.2}", r.unwrap_or(f64::NAN)))
                    .collect();
            (!off.is_empty()).then(|| {
                format!(
                    "{} ({}): the twin misses its own training run ({}): the runs disagree with each other (did the \
                     server's speed change between them, or does it do what the twin does not model?); predictions \
                     inherit it",
                    t.file,
                    t.load,
                    off.join(", ")
                )
            })
        })
        .collect();
    twin.warnings.extend(missed);
}

/// The engine a twin stands for, and what a prediction with it extrapolates.
pub trait TwinEngine {
    fn engine_spec(&self) -> EngineSpec;
    /// The name a prediction gives the model: the measured server's model, else the server.
    fn model_name(&self) -> String;
    fn beyond(&self, load: &Load, max_prompt: u64, max_output: u64, max_num_seqs_given: bool) -> Vec<String>;
}

/// The twin's error on each of its training runs: predicted ÷ measured mean TTFT, mean TPOT and
/// output throughput.
fn training_errors(twin: &Twin, runs: &[NamedRun]) -> Vec<TrainingRun> {
    let ratio = |m: Option<f64>, p: Option<f64>| m.zip(p).filter(|(m, _)| *m > 0.0).map(|(m, p)| p / m);
    runs.iter()
        .map(|r| {
            let (load, ..) = load_of(r.run);
            let v = validate::predict(twin, r.run).ok();
            let s = &r.run.summary;
            TrainingRun {
                file: r.file.into(),
                run_id: r.run.id.clone(),
                load,
                requests: r.run.requests.len(),
                ttft_mean_ratio: v.as_ref().and_then(|p| ratio(s.ttft_ms.mean, p.summary.ttft_ms.mean)),
                tpot_mean_ratio: v.as_ref().and_then(|p| ratio(s.tpot_ms.mean, p.summary.tpot_ms.mean)),
                throughput_ratio: v
                    .as_ref()
                    .and_then(|p| ratio(Some(s.output_throughput), Some(p.summary.output_throughput))),
            }
        })
        .collect()
}

impl TwinEngine for Twin {
    fn model_name(&self) -> String {
        self.model.clone().unwrap_or_else(|| format!("twin of {}", self.server))
    }

    /// The engine this twin stands for: its fitted step cost, front end and scheduler; flags
    /// given on top of it (what-ifs) override what they name.
    fn engine_spec(&self) -> EngineSpec {
        let s = &self.step;
        let sched = &self.scheduler;
        EngineSpec {
            fitted: Some(Fitted {
                step: FittedStep {
                    overhead_s: s.step_overhead_s.value,
                    prefill_overhead_s: s.prefill_overhead_s.value,
                    per_prefill_token_s: s.per_prefill_token_s.value,
                    per_decode_seq_s: s.per_decode_seq_s.value,
                    per_context_token_s: s.per_context_token_s.value,
                },
                kv_tokens: self.kv_tokens.value,
                context_tokens: self.context_tokens.max(self.ranges.prompt_tokens[1] + self.ranges.output_tokens[1]),
                frontend_s: self.front_end.latency_s.value,
                frontend_per_token_s: self.front_end.per_prompt_token_s,
                frontend_jitter_s: self.front_end.jitter_s,
            }),
            max_num_seqs: Some(sched.max_num_seqs.value as u32),
            max_batched_tokens: Some(
                (sched.max_batched_tokens.value as u32).max(self.ranges.prompt_tokens[1] as u32).max(1),
            ),
            scheduling: Some(sched.scheduling),
            prefix_caching: Some(false),
            ingest_s: Some(0.0),
            ingest_per_token_s: Some(0.0),
            ..EngineSpec::default()
        }
    }

    /// What a prediction for `load` with prompts up to `max_prompt` and outputs up to
    /// `max_output` extrapolates, in words (empty: within what was measured).
    /// `max_num_seqs_given`: the sequence limit was set on top of the twin.
    fn beyond(&self, load: &Load, max_prompt: u64, max_output: u64, max_num_seqs_given: bool) -> Vec<String> {
        let mut out = Vec::new();
        let r = &self.ranges;
        match load {
            Load::Closed { concurrency, .. } => {
                let c = *concurrency as u64;
                if let Some([lo, hi]) = r.concurrency
                    && (c < lo || c > hi)
                {
                    out.push(format!("concurrency {c} is beyond the measured {lo}–{hi}: extrapolated"));
                }
                if c > r.running && !self.scheduler.max_num_seqs.identified && !max_num_seqs_given {
                    out.push(format!(
                        "concurrency {c} is above the {} sequences seen running together and the server's sequence limit was not identified: queueing is not predicted (pass --max-num-seqs)",
                        r.running
                    ));
                }
            }
            Load::Open { .. } => match (load.offered_rate(), r.rate) {
                (Some(rate), Some([lo, hi])) if rate < lo * 0.999 || rate > hi * 1.001 => {
                    out.push(format!("rate {rate:.3} req/s is beyond the measured {lo:.3}–{hi:.3}: extrapolated"));
                }
                (Some(rate), None) => out.push(format!(
                    "arrivals at {rate:.3} req/s: the twin was fitted on closed loops only: extrapolated"
                )),
                _ => {}
            },
        }
        if max_prompt > r.prompt_tokens[1] {
            out.push(format!(
                "prompts of {max_prompt} tokens are beyond the measured {}: extrapolated",
                r.prompt_tokens[1]
            ));
        }
        if max_output > r.output_tokens[1] {
            out.push(format!(
                "outputs of {max_output} tokens are beyond the measured {}: extrapolated",
                r.output_tokens[1]
            ));
        }
        out
    }
}

/// Sets the server's sequence limit as the user gave it (`fit --max-num-seqs`), and the fit's
/// error on each training run again with it.
pub fn give_max_num_seqs(twin: &mut Twin, n: u32, runs: &[NamedRun]) {
    twin.scheduler.max_num_seqs = Limit { value: n as u64, identified: true };
    twin.unidentified.retain(|u| !u.starts_with("max_num_seqs"));
    twin.unidentified.push(format!("max_num_seqs: {n}, given (--max-num-seqs), not fitted"));
    check_training(twin, runs);
}
