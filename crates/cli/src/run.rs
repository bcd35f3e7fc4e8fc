//! What `bench` and `sim` share: the target a plan names, Ctrl-C, and running the plan's stages
//! with the console and files as they go.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use goodput_client::{Cancel, HttpClient, cancel_pair};
use goodput_metrics::{StopReason, Warning, WarningCode};
use goodput_results::Run;
use goodput_results::plan::TargetPlan;
use goodput_stage::{AnyTarget, Control, EmbeddedTarget, SimTarget, Stage, UrlTarget, sweep};

use crate::outcome::Outcome;
use crate::output::{LiveLog, export_schedule, result_doc, write_html};
use crate::plan::{Planned, jsonl_path};

/// Resolves when the process is asked to stop: Ctrl-C (SIGINT), or SIGTERM (what `timeout`,
/// Docker and Kubernetes send); the signal's number.
pub async fn stop_signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        if let Ok(mut term) = term {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => 2,
                _ = term.recv() => 15,
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    2
}

/// Ctrl-C or SIGTERM: stop sending, let in-flight requests finish within the grace period, keep
/// results (the exit code is 130 or 143); a second signal exits at once, the JSONL log keeping
/// every record finished so far.
pub fn interrupt_on_ctrl_c() -> Cancel {
    let (interrupt, token) = cancel_pair();
    tokio::spawn(async move {
        let sig = stop_signal().await;
        crate::outcome::INTERRUPT_SIGNAL.store(sig, std::sync::atomic::Ordering::Relaxed);
        let name = if sig == 15 { "SIGTERM" } else { "Ctrl-C" };
        warn!("\ninterrupted ({name}): no new requests; in-flight ones get the grace period (again: stop now)");
        interrupt.cancel();
        let again = stop_signal().await;
        warn!("interrupted again: stopping now (the JSONL log has every record finished so far)");
        crate::jsonl::flush_open_logs();
        std::process::exit(128 + again);
    });
    token
}

/// The target a plan names: a URL (the model resolved now: `--model`, else the first id the
/// server lists), the embedded engine, or the simulator. The plan records the model.
pub async fn target(p: &mut Planned) -> anyhow::Result<AnyTarget> {
    let res = p.res.clone();
    Ok(match (p.plan.target.clone(), p.plan.engine.clone()) {
        (Some(TargetPlan::Url { url }), _) => {
            let key_env = p.plan.api_key_env.clone().unwrap_or_default();
            let key = std::env::var(&key_env).ok().filter(|k| !k.is_empty());
            let model = match &p.plan.model {
                Some(m) => m.clone(),
                None => {
                    let timeouts = p.plan.timeouts.unwrap_or_default();
                    let client =
                        HttpClient::with_roots(&url, key.as_deref(), 1, timeouts.connect, p.ca_pem.as_deref())?;
                    let ids =
                        client.models(Duration::from_secs(30)).await.context("cannot pick a model (pass --model)")?;
                    ids.into_iter().next().context("the server lists no models at /v1/models (pass --model)")?
                }
            };
            p.plan.model = Some(model.clone());
            AnyTarget::Url(UrlTarget { url, model, api_key: key, ca_pem: p.ca_pem.clone(), res })
        }
        (Some(TargetPlan::Embedded { engine }), _) => {
            p.plan.model = Some(engine.config.model.name.clone());
            let (quiet, describe) = (p.quiet, engine.describe());
            let mut first = true;
            let on_start: Box<dyn FnMut(&str) + Send> = Box::new(move |url: &str| {
                if !quiet && std::mem::replace(&mut first, false) {
                    warn!("embedded engine: {describe} at {url}");
                }
            });
            AnyTarget::Embedded(EmbeddedTarget { engine: *engine, res, on_start: Some(on_start) })
        }
        (None, Some(engine)) => AnyTarget::Sim(SimTarget { engine, res }),
        (None, None) => anyhow::bail!("the plan names no target"),
    })
}

/// A stage's control: the interrupt, and the JSONL log / exported schedule / progress bar when
/// measuring (later stages of a sweep append to the same log).
pub fn control(p: &Planned, stage: &Stage, interrupt: &Cancel, first: &mut bool, measured: bool) -> Control {
    let mut ctl = Control { interrupt: interrupt.clone(), ..Control::quiet() };
    if !measured {
        return ctl;
    }
    let append = !std::mem::replace(first, false);
    let log = LiveLog::new(
        jsonl_path(&stage.plan.output).as_deref(),
        stage.plan.load.export_schedule.as_deref(),
        stage.name.clone(),
        append,
        stage.plan.load.requests,
        p.quiet,
    );
    match log {
        Ok(log) => ctl.observer = Arc::new(log),
        Err(e) => warn!("goodput: {e:#} (this stage's records are kept in the result document only)"),
    }
    ctl
}

/// Runs `bench` or `sim`: the plan's stages on `target`, each printed as it ends (a table, or a
/// line per sweep stage and the sweep's table), then the result document.
pub async fn run_plan(command: &str, target: &mut AnyTarget, p: &Planned) -> anyhow::Result<Outcome> {
    let sweep = p.plan.load.sweep_points.is_some();
    let measured = !matches!(target, AnyTarget::Sim(_));
    // a simulation runs to its end in moments and has nothing in flight: Ctrl-C ends it at once
    let interrupt = if measured { interrupt_on_ctrl_c() } else { Cancel::never() };
    if measured {
        // the log must be writable before any request is sent: a run whose records cannot be
        // kept as they finish is refused, not half-logged
        for path in [jsonl_path(&p.plan.output), p.plan.load.export_schedule.clone()].into_iter().flatten() {
            std::fs::File::create(&path).with_context(|| {
                format!("cannot create {} (choose a writable --out / --export-schedule)", path.display())
            })?;
        }
    }
    for n in &p.extrapolated {
        warn!("goodput: twin: {n}");
    }
    let mut first = true;
    let mut runs = sweep::run(
        target,
        &p.plan,
        |stage| control(p, stage, &interrupt, &mut first, measured),
        |run| {
            if sweep {
                say!("{}\n", goodput_render::stage_line(run.name.as_deref().unwrap_or("-"), &run.summary));
            } else {
                say!("{}", goodput_render::render_run(command, run));
            }
            say!("{}", records_note(run));
            say!("{}", stopped_early(run));
        },
    )
    .await?;
    for r in &mut runs {
        for n in &p.extrapolated {
            r.summary.warnings.push(Warning { code: WarningCode::Extrapolated, message: format!("twin: {n}") });
        }
    }
    if sweep {
        say!("{}", goodput_render::render_sweep(&runs.iter().collect::<Vec<_>>()));
    }
    if !measured && let Some(path) = &p.plan.load.export_schedule {
        export_schedule(path, &runs[0])?;
    }
    let outcome = outcome(&runs);
    if p.plan.output.out.is_none() && p.html.is_none() {
        return Ok(outcome);
    }
    // one document for both files, the runs moved into it (a large run's records are hundreds
    // of megabytes: no copy of them)
    let doc = result_doc(runs, None);
    if let Some(path) = &p.plan.output.out {
        crate::output::write_result(&doc, path)?;
        let jsonl = if measured { jsonl_path(&p.plan.output) } else { None };
        say!("  results      {}{}\n", path.display(), jsonl.map(|j| format!(" · {}", j.display())).unwrap_or_default());
    }
    if let Some(path) = &p.html {
        write_html(path, &doc, &source_name(p, command))?;
    }
    Ok(outcome)
}

/// What an HTML report of a command's results is called in its title: the result file's name,
/// else the command.
pub fn source_name(p: &Planned, command: &str) -> String {
    p.plan
        .output
        .out
        .as_deref()
        .and_then(|o| o.file_name())
        .map_or_else(|| format!("goodput {command}"), |n| n.to_string_lossy().into_owned())
}

/// A line when the result document holds fewer records than the run produced (`--records`).
pub fn records_note(run: &Run) -> String {
    let Some(k) = &run.summary.records_kept else { return String::new() };
    let mode = run.plan.output.records;
    format!(
        "  records      the result document keeps {} of {} records (--records {mode}{}; the summary counts all){}\n",
        k.kept,
        k.total,
        if mode == goodput_metrics::RecordsMode::All {
            format!(": a seeded sample past {}", goodput_metrics::DEFAULT_RECORD_CAP)
        } else {
            String::new()
        },
        if matches!(run.target, goodput_results::Target::Sim { .. }) { "" } else { "; the JSONL log has every one" }
    )
}

/// Why a run stopped before its plan's end, when it did.
pub fn stopped_early(run: &Run) -> String {
    match run.stop {
        StopReason::MaxErrors => "  stopped early: --max-errors reached\n".into(),
        StopReason::OverSaturated => {
            "  stopped early: the server was over-saturated (--stop-over-saturated; the warning says why)\n".into()
        }
        StopReason::Completed
            if matches!(run.target, goodput_results::Target::Sim { .. })
                && run.plan.load.requests.is_none()
                && run.record_count() >= goodput_stage::MAX_SIM_REQUESTS =>
        {
            format!("  stopped early: {} requests, the most one simulated run keeps\n", goodput_stage::MAX_SIM_REQUESTS)
        }
        _ => String::new(),
    }
}

/// The exit outcome of a whole run.
pub fn outcome(runs: &[Run]) -> Outcome {
    if runs.iter().any(|r| r.stop == StopReason::MaxErrors) {
        Outcome::Failed
    } else if runs.iter().any(|r| r.stop == StopReason::Interrupted) {
        Outcome::Interrupted
    } else if runs.iter().all(|r| r.summary.completed == 0) {
        Outcome::Failed
    } else {
        Outcome::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use goodput_metrics::RecordsKept;
    use goodput_results::ResultDoc;

    fn fixture_run(name: &str) -> Run {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/results").join(name);
        ResultDoc::read(&p).expect("fixture reads").runs.remove(0)
    }

    #[test]
    fn the_records_line_says_what_the_document_keeps_and_where_the_rest_is() {
        let mut bench = fixture_run("v1-bench-before-run-ids.json");
        bench.summary.records_kept = None;
        assert_eq!(records_note(&bench), "");
        bench.summary.records_kept = Some(RecordsKept { mode: "all".into(), kept: 100_000, total: 250_000 });
        assert_eq!(
            records_note(&bench),
            "  records      the result document keeps 100000 of 250000 records (--records all: a seeded sample \
             past 100000; the summary counts all); the JSONL log has every one\n"
        );
        // a simulated run has no JSONL log; a sample asked for is not explained as the default's
        let mut sim = fixture_run("v1-sim-before-run-ids.json");
        sim.plan.output.records = goodput_metrics::RecordsMode::Sample(500);
        sim.summary.records_kept = Some(RecordsKept { mode: "sample".into(), kept: 500, total: 2_000 });
        assert_eq!(
            records_note(&sim),
            "  records      the result document keeps 500 of 2000 records (--records sample:500; the summary counts all)\n"
        );
    }
}
