//! `goodput bench`: measure a server.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use goodput_client::{Endpoint, HttpClient, RunConfig, StopReason, cancel_pair};
use goodput_metrics::result::{Run, Target};
use goodput_metrics::{Summary, SummaryOptions, summarize};
use goodput_server::{AppState, Embedded, ServerConfig};
use goodput_workload::Workload;

use crate::Outcome;
use crate::args::BenchArgs;
use crate::console;
use crate::plan::{BenchPlan, EnginePlan, TargetPlan};
use crate::report::{LiveLog, write_doc};

pub async fn run(args: BenchArgs) -> anyhow::Result<Outcome> {
    let mut plan = BenchPlan::from_args(&args)?;
    match plan.target.clone() {
        TargetPlan::Url { url } => {
            let key = std::env::var(&plan.api_key_env).ok().filter(|k| !k.is_empty());
            let client = HttpClient::new(&url, key.as_deref(), plan.load.load.pool_size(), plan.timeouts.connect)?;
            let model = match &plan.model {
                Some(m) => m.clone(),
                None => {
                    let ids =
                        client.models(Duration::from_secs(30)).await.context("cannot pick a model (pass --model)")?;
                    ids.into_iter().next().context("the server lists no models at /v1/models (pass --model)")?
                }
            };
            plan.model = Some(model.clone());
            let target = Target { kind: "url".into(), url: Some(url), model: Some(model.clone()), engine: None };
            let (outcome, _) = measure(&plan, client, target, model, None).await?;
            Ok(outcome)
        }
        TargetPlan::Embedded { engine } => {
            let model = engine.config.model.name.clone();
            plan.model = Some(model.clone());
            let server_cfg = ServerConfig { seed: plan.load.seed, ..ServerConfig::new(model.clone()) };
            let embedded = Embedded::start(engine.config.clone(), plan.workload.tk.clone(), server_cfg).await?;
            if !plan.output.quiet {
                warn!("embedded engine: {} at {}", engine.describe(), embedded.url());
            }
            let client = HttpClient::new(&embedded.url(), None, plan.load.load.pool_size(), plan.timeouts.connect)?;
            let target = Target {
                kind: "embedded".into(),
                url: Some(embedded.url()),
                model: Some(model.clone()),
                engine: Some(serde_json::to_value(&*engine)?),
            };
            let state = embedded.state.clone();
            let (outcome, _) = measure(&plan, client, target, model, Some((&state, &engine))).await?;
            embedded.shutdown().await;
            Ok(outcome)
        }
    }
}

/// Runs a validated plan against a reachable endpoint, writes the results, prints the report.
pub async fn measure(
    plan: &BenchPlan,
    client: HttpClient,
    target: Target,
    model: String,
    engine: Option<(&AppState, &EnginePlan)>,
) -> anyhow::Result<(Outcome, Summary)> {
    let ep = Endpoint {
        client,
        api: plan.api,
        timeouts: plan.timeouts,
        tokenizer: plan.workload.tk.clone(),
        clock: goodput_client::Clock::start(),
    };
    let cfg = RunConfig {
        load: plan.load.load.clone(),
        requests: plan.load.requests,
        duration: plan.load.duration,
        max_errors: plan.load.max_errors,
        grace: Some(plan.load.grace),
        model,
        ignore_eos: plan.ignore_eos,
        extra_body: plan.extra_body.clone(),
        seed: plan.load.seed,
    };
    let workload = Workload::new(plan.workload.spec.clone(), plan.workload.tk.clone())?;
    let jsonl = plan.output.jsonl_path();
    let log = Arc::new(LiveLog::new(jsonl.as_deref(), plan.load.requests, plan.output.quiet)?);

    let (interrupt, token) = cancel_pair();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            warn!("\ninterrupted: no new requests; in-flight ones get the grace period");
            interrupt.cancel();
        }
    });
    let outcome = goodput_client::run(ep, cfg, workload, token, log.clone()).await;
    log.bar.finish_and_clear();

    let opts = SummaryOptions {
        percentiles: plan.output.percentiles,
        offered_rate: plan.load.offered_rate(),
        expect_exact_output: plan.ignore_eos,
        ..SummaryOptions::new()
    };
    let summary = summarize(&outcome.records, &opts);
    let title = format!(
        "goodput bench · {} · model {} · {} · {}",
        if target.kind == "embedded" { "embedded engine" } else { target.url.as_deref().unwrap_or(&target.kind) },
        target.model.as_deref().unwrap_or("-"),
        serde_json::to_value(plan.api).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
        load_label(plan),
    );
    say!("{}", console::render(&title, &summary));
    let mut engine_stats = None;
    if let Some((state, eplan)) = engine {
        if let Some(stats) = state.engine().stats().await {
            say!("{}", console::render_engine(eplan, &stats));
            engine_stats = Some(serde_json::to_value(&stats)?);
        }
        let late = state.engine().late_steps.load(std::sync::atomic::Ordering::Relaxed);
        if late > 0 {
            say!(
                "  ! the embedded engine started {late} iterations more than 5 ms late (host CPU busy): its timing is less exact\n"
            );
        }
    }
    if outcome.stop == StopReason::MaxErrors {
        say!("  stopped early: --max-errors reached\n");
    }

    let run = Run {
        name: None,
        plan: serde_json::to_value(plan)?,
        target,
        interrupted: outcome.interrupted,
        summary: summary.clone(),
        summary_full: None,
        engine_stats,
        requests: outcome.records,
    };
    if let Some(path) = &plan.output.out {
        write_doc(path, vec![run], None)?;
        say!("  results      {}{}\n", path.display(), jsonl.map(|j| format!(" · {}", j.display())).unwrap_or_default());
    }
    let code = match outcome.stop {
        StopReason::MaxErrors => Outcome::Failed,
        StopReason::Interrupted => Outcome::Interrupted,
        _ if summary.completed == 0 => Outcome::Failed,
        _ => Outcome::Ok,
    };
    Ok((code, summary))
}

fn load_label(plan: &BenchPlan) -> String {
    use goodput_client::Load;
    let load = match &plan.load.load {
        Load::Closed { concurrency, .. } => format!("concurrency {concurrency}"),
        Load::Open { arrivals, .. } => match arrivals.rate() {
            Some(r) => format!("rate {r} req/s"),
            None => "all at once".into(),
        },
    };
    match (plan.load.requests, plan.load.duration) {
        (Some(n), _) => format!("{load} · {n} requests"),
        (None, Some(d)) => format!("{load} · {:.0} s", d.as_secs_f64()),
        _ => load,
    }
}
