//! Measured against predicted: a held-out run's plan and seed simulated with the twin, metric
//! by metric, with the ratio and a verdict (within ±10%, within ±25%, outside).

use goodput_metrics::Distribution;
use goodput_results::validation::{MetricCheck, RunCheck, Verdict};
use goodput_results::{Run, Target};
use goodput_stage::{Control, Resources, SimTarget, Stage, StageError, Target as _};
use goodput_tokenizer::Tokenizer;

use goodput_results::twin::Twin;

use super::TwinEngine;

/// The twin's prediction of `run`: the same plan (load, workload, seed) simulated on the twin's
/// engine.
pub fn predict(twin: &Twin, run: &Run) -> Result<Run, StageError> {
    let spec = twin.engine_spec();
    // the fitted step cost prices the iterations: the catalog model only carries the name
    let mut model = goodput_engine::Catalog::builtin().model("llama-3.1-8b").expect("built in").clone();
    model.name = twin.model_name();
    let gpu = goodput_engine::Catalog::builtin().gpu("h100").expect("built in").clone();
    let engine = goodput_results::EnginePlan::new(spec.build(model, gpu)).map_err(StageError::Engine)?;
    let mut plan = run.plan.clone();
    plan.target = None;
    plan.engine = Some(engine.clone());
    // the measured run's plan: its synthetic lengths, seed and load (a dataset's text is not
    // reloaded: its plan's lengths stand in)
    let tokenizer = Tokenizer::cl100k().map_err(|e| StageError::Runtime(std::io::Error::other(e.to_string())))?;
    let stage = Stage {
        name: run.name.clone(),
        load: run.load.clone().unwrap_or_else(|| plan.load.load.clone()),
        seed: plan.load.seed,
        plan,
    };
    let mut target = SimTarget { engine, res: Resources { tokenizer, dataset: None } };
    let rt = tokio::runtime::Builder::new_current_thread().build().map_err(StageError::Runtime)?;
    rt.block_on(target.run(&stage, &Control::quiet()))
}

/// The verdict of a predicted ÷ measured ratio.
pub fn verdict(ratio: f64) -> Verdict {
    let off = (ratio - 1.0).abs();
    if off <= 0.10 + 1e-9 {
        Verdict::Within10
    } else if off <= 0.25 + 1e-9 {
        Verdict::Within25
    } else {
        Verdict::Outside
    }
}

fn checks(metric: &str, m: &Distribution, p: &Distribution) -> Vec<MetricCheck> {
    [("mean", m.mean, p.mean), ("p50", m.p50, p.p50), ("p90", m.p90, p.p90), ("p99", m.p99, p.p99)]
        .into_iter()
        .filter_map(|(stat, m, p)| {
            let (m, p) = (m?, p?);
            let ratio = (m > 0.0).then(|| p / m);
            Some(MetricCheck {
                metric: metric.into(),
                stat: stat.into(),
                measured: m,
                predicted: p,
                ratio,
                verdict: verdict(ratio.unwrap_or(f64::NAN)),
            })
        })
        .collect()
}

/// `measured` against the twin's prediction of it, from `file`.
pub fn check(twin: &Twin, file: &str, measured: &Run) -> Result<(RunCheck, Run), StageError> {
    let predicted = predict(twin, measured)?;
    let (m, p) = (&measured.summary, &predicted.summary);
    let mut metrics = checks("ttft_ms", &m.ttft_ms, &p.ttft_ms);
    metrics.extend(checks("tpot_ms", &m.tpot_ms, &p.tpot_ms));
    metrics.extend(checks("itl_ms", &m.itl_ms, &p.itl_ms));
    for (name, m, p) in [
        ("output_tokens_per_s", m.output_throughput, p.output_throughput),
        ("requests_per_s", m.request_throughput, p.request_throughput),
    ] {
        let ratio = (m > 0.0).then(|| p / m);
        let verdict = verdict(ratio.unwrap_or(f64::NAN));
        metrics.push(MetricCheck {
            metric: name.into(),
            stat: "value".into(),
            measured: m,
            predicted: p,
            ratio,
            verdict,
        });
    }
    let load = measured.load.clone().unwrap_or_else(|| measured.plan.load.load.clone());
    let (max_prompt, max_output) = measured.requests.iter().fold((0, 0), |(a, b), r| {
        (a.max(super::observe::prompt_sent(r).unwrap_or(0)), b.max(r.output_tokens.unwrap_or(0)))
    });
    let target = match &measured.target {
        Target::Url { url, .. } => url.clone(),
        t => t.label(),
    };
    let check = RunCheck {
        file: file.into(),
        run_id: measured.id.clone(),
        target,
        load: goodput_render::describe(&load),
        extrapolated: twin.beyond(&load, max_prompt, max_output, false),
        metrics,
    };
    Ok((check, predicted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_by_hand() {
        assert_eq!(verdict(1.10), Verdict::Within10);
        assert_eq!(verdict(0.9), Verdict::Within10);
        assert_eq!(verdict(1.2), Verdict::Within25);
        assert_eq!(verdict(0.74), Verdict::Outside);
        assert_eq!(verdict(f64::NAN), Verdict::Outside);
    }
}
