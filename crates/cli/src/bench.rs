//! `goodput bench`: measure a server (or the embedded engine model), one stage or a sweep.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use goodput_client::{Endpoint, HttpClient, RunConfig, StopReason, cancel_pair};
use goodput_metrics::result::{Run, Target};
use goodput_server::{Embedded, ServerConfig};
use goodput_workload::Workload;

use crate::Outcome;
use crate::args::BenchArgs;
use crate::console;
use crate::plan::{BenchPlan, TargetPlan};
use crate::report::{LiveLog, write_doc};
use crate::stages::{self, Stage, StageResult};

pub async fn run(args: BenchArgs) -> anyhow::Result<Outcome> {
    let mut plan = BenchPlan::from_args(&args)?;
    let model = resolve_model(&plan).await?;
    plan.model = Some(model.clone());

    // Ctrl-C: stop sending, let in-flight requests finish within the grace period, keep results.
    let (interrupt, token) = cancel_pair();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            warn!("\ninterrupted: no new requests; in-flight ones get the grace period (Ctrl-C again: stop now)");
            interrupt.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                warn!("interrupted again: stopping now (the JSONL log has every record finished so far)");
                std::process::exit(130);
            }
        }
    });

    let sweep = plan.load.sweep_points.is_some();
    let mut first = true;
    let results = stages::run_stages(&plan.load, |stage| {
        let append = !std::mem::replace(&mut first, false);
        run_stage(&plan, &model, stage, token.clone(), append, sweep, None)
    })
    .await?;
    if sweep {
        say!("{}", console::render_sweep(&results.iter().map(|r| &r.run).collect::<Vec<_>>()));
    }
    if let Some(path) = &plan.output.out {
        write_doc(path, results.iter().map(|r| r.run.clone()).collect(), None)?;
        let jsonl = plan.output.jsonl_path();
        say!("  results      {}{}\n", path.display(), jsonl.map(|j| format!(" · {}", j.display())).unwrap_or_default());
    }
    Ok(stages::outcome(&results))
}

/// The model to request, picked once: `--model`, else the first id the server lists at
/// `/v1/models`; the embedded engine serves its catalog name.
pub(crate) async fn resolve_model(plan: &BenchPlan) -> anyhow::Result<String> {
    Ok(match &plan.target {
        TargetPlan::Url { url } => match &plan.model {
            Some(m) => m.clone(),
            None => {
                let key = std::env::var(&plan.api_key_env).ok().filter(|k| !k.is_empty());
                let client =
                    HttpClient::with_roots(url, key.as_deref(), 1, plan.timeouts.connect, plan.ca_pem.as_deref())?;
                let ids = client.models(Duration::from_secs(30)).await.context("cannot pick a model (pass --model)")?;
                ids.into_iter().next().context("the server lists no models at /v1/models (pass --model)")?
            }
        },
        TargetPlan::Embedded { engine } => engine.config.model.name.clone(),
    })
}

/// One stage against the target (a fresh embedded engine per stage, so its statistics are the
/// stage's own). `saturation`: stop early once this many requests are in flight.
pub(crate) async fn run_stage(
    plan: &BenchPlan,
    model: &str,
    stage: Stage,
    interrupt: goodput_client::Cancel,
    append: bool,
    sweep: bool,
    saturation: Option<u64>,
) -> anyhow::Result<StageResult> {
    let key = std::env::var(&plan.api_key_env).ok().filter(|k| !k.is_empty());
    let pool = stage.load.pool_size();
    let (client, target, embedded) = match &plan.target {
        TargetPlan::Url { url } => {
            let client =
                HttpClient::with_roots(url, key.as_deref(), pool, plan.timeouts.connect, plan.ca_pem.as_deref())?;
            let target =
                Target { kind: "url".into(), url: Some(url.clone()), model: Some(model.to_string()), engine: None };
            (client, target, None)
        }
        TargetPlan::Embedded { engine } => {
            // the embedded engine yields the CPU to the load generator when both want it
            let server_cfg = ServerConfig { seed: stage.seed, nice: 10, ..ServerConfig::new(model) };
            let e = Embedded::start(engine.config.clone(), plan.workload.tk.clone(), server_cfg).await?;
            if !plan.output.quiet && !append {
                warn!("embedded engine: {} at {}", engine.describe(), e.url());
            }
            let client = HttpClient::new(&e.url(), None, pool, plan.timeouts.connect)?;
            let target = Target {
                kind: "embedded".into(),
                url: Some(e.url()),
                model: Some(model.to_string()),
                engine: Some(serde_json::to_value(&**engine)?),
            };
            (client, target, Some(e))
        }
    };
    let ep =
        Endpoint { retries: plan.retries, ..Endpoint::new(client, plan.api, plan.timeouts, plan.workload.tk.clone()) };
    let cfg = RunConfig {
        load: stage.load.clone(),
        requests: plan.load.requests,
        duration: plan.load.duration,
        max_errors: plan.load.max_errors,
        grace: Some(plan.load.grace),
        model: model.to_string(),
        ignore_eos: plan.ignore_eos,
        extra_body: plan.extra_body.clone(),
        // the embedded engine stops each request where the simulator would
        send_seed: embedded.is_some(),
        seed: stage.seed,
    };
    let mut spec = plan.workload.spec.clone();
    spec.seed = stage.seed;
    let workload = Workload::new(spec, plan.workload.tk.clone())?;
    let jsonl = plan.output.jsonl_path();
    let mut log = LiveLog::new(
        jsonl.as_deref(),
        plan.load.export_schedule.as_deref(),
        stage.name.clone(),
        append,
        plan.load.requests,
        plan.output.quiet,
    )?;
    // the stage stops on Ctrl-C, or when saturated
    let (stage_stop, stage_token) = cancel_pair();
    let stage_stop = Arc::new(stage_stop);
    if let Some(limit) = saturation {
        log.saturation = Some((limit, Arc::clone(&stage_stop)));
    }
    let forward = {
        let stop = Arc::clone(&stage_stop);
        tokio::spawn(async move {
            interrupt.cancelled().await;
            stop.cancel();
        })
    };
    let log = Arc::new(log);
    let outcome = goodput_client::run(ep, cfg, workload, stage_token, log.clone()).await;
    forward.abort();
    log.bar.finish_and_clear();
    let saturated = log.saturated.load(std::sync::atomic::Ordering::SeqCst);
    let stop = if saturated { StopReason::Completed } else { outcome.stop };

    let opts = stages::options(
        &plan.load,
        &stage.load,
        plan.output.percentiles,
        plan.ignore_eos,
        plan.api == goodput_client::openai::Api::Completions,
        &plan.slo,
    );
    let (summary, summary_full) = stages::summaries(&outcome.records, &opts);
    let mut engine_stats = None;
    let mut engine_block = String::new();
    if let (Some(e), TargetPlan::Embedded { engine }) = (&embedded, &plan.target) {
        if let Some(stats) = e.state.engine().stats().await {
            engine_block = console::render_engine(engine, &stats);
            engine_stats = Some(serde_json::to_value(&stats)?);
        }
        let late = e.state.engine().late_steps.load(std::sync::atomic::Ordering::Relaxed);
        if late > 0 {
            engine_block.push_str(&format!(
                "  ! the embedded engine started {late} iterations more than 5 ms late (host CPU busy): its timing is less exact\n"
            ));
        }
    }
    if let Some(e) = embedded {
        e.shutdown().await;
    }
    let target_label =
        if target.kind == "embedded" { "embedded engine".to_string() } else { target.url.clone().unwrap_or_default() };
    let api = serde_json::to_value(plan.api).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    if sweep {
        say!("{}\n", console::stage_line(stage.name.as_deref().unwrap_or("-"), &summary));
    } else {
        let title = format!(
            "goodput bench · {target_label} · model {model} · {api} · {}{}",
            stages::describe(&stage.load),
            bounds(plan)
        );
        say!("{}", console::render(&title, &summary));
        say!("{}", engine_block);
    }
    if stop == StopReason::MaxErrors {
        say!("  stopped early: --max-errors reached\n");
    }
    let run = Run {
        name: stage.name,
        plan: serde_json::to_value(plan)?,
        target,
        interrupted: outcome.interrupted,
        summary,
        summary_full,
        engine_stats,
        requests: outcome.records,
    };
    Ok(StageResult { run, stop, saturated })
}

fn bounds(plan: &BenchPlan) -> String {
    match (plan.load.requests, plan.load.duration) {
        (Some(n), Some(d)) => format!(" · {n} requests or {:.0} s", d.as_secs_f64()),
        (Some(n), None) => format!(" · {n} requests"),
        (None, Some(d)) => format!(" · {:.0} s", d.as_secs_f64()),
        (None, None) => String::new(),
    }
}
