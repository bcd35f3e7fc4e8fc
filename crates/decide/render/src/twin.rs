//! A digital twin for people: what `goodput fit` learnt (every parameter with its uncertainty,
//! what the runs could not pin down, the fit's error on each training run), and a validation:
//! measured against predicted, run by run, as a table and as charts with the ±10% band.

use std::fmt::Write;

use goodput_results::twin::{Param, Twin};
use goodput_results::validation::TwinValidation;

use crate::svg::{Chart, Mark, Series};

fn param(name: &str, p: &Param, scale: f64, unit: &str) -> String {
    format!(
        "  {name:<22} {:>12.4} {unit:<3} ± {:<10.4}{}\n",
        p.value * scale,
        p.stderr * scale,
        if p.identified { "" } else { "  (not identified)" }
    )
}

/// The twin: server, step cost, front end, scheduler, ranges, training errors, and what is
/// not identified.
pub fn render_twin(t: &Twin) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\ndigital twin of {}{}",
        t.server,
        t.model.as_ref().map_or(String::new(), |m| format!(" (model {m})"))
    );
    let s = &t.step;
    let _ = writeln!(o, "\nstep cost (fitted over {} iterations, rmse {:.3} ms)", s.iterations, s.rmse_s * 1e3);
    o.push_str(&param("decode step", &s.step_overhead_s, 1e3, "ms"));
    o.push_str(&param("prefill step", &s.prefill_overhead_s, 1e3, "ms"));
    o.push_str(&param("per prompt token", &s.per_prefill_token_s, 1e6, "µs"));
    o.push_str(&param("per decoding sequence", &s.per_decode_seq_s, 1e3, "ms"));
    o.push_str(&param("per context token", &s.per_context_token_s, 1e6, "µs"));
    let f = &t.front_end;
    let _ = writeln!(o, "\nfront end (from {} requests that found the server idle)", f.requests);
    o.push_str(&param("latency", &f.latency_s, 1e3, "ms"));
    let _ = writeln!(o, "  {:<22} {:>12.4} µs", "per prompt token", f.per_prompt_token_s * 1e6);
    let _ = writeln!(o, "  {:<22} {:>12.4} ms", "jitter (std)", f.jitter_s * 1e3);
    let c = &t.scheduler;
    let _ = writeln!(o, "\nscheduler");
    let limit = |v: u64, identified: bool| if identified { v.to_string() } else { format!("≥ {v} (not identified)") };
    let _ = writeln!(o, "  {:<22} {:>12}", "max sequences", limit(c.max_num_seqs.value, c.max_num_seqs.identified));
    let _ = writeln!(
        o,
        "  {:<22} {:>12}{}",
        "prefill",
        match c.scheduling {
            goodput_results::Scheduling::PrefillFirst => "prefill-first",
            _ => "chunked",
        },
        if c.scheduling_identified { "" } else { "  (not identified)" }
    );
    let _ = writeln!(
        o,
        "  {:<22} {:>12}",
        "tokens per iteration",
        limit(c.max_batched_tokens.value, c.max_batched_tokens.identified)
    );
    let _ = writeln!(o, "  {:<22} {:>12}", "tokens per event", c.tokens_per_event);
    let r = &t.ranges;
    let _ = writeln!(o, "\nmeasured ranges");
    if let Some([lo, hi]) = r.concurrency {
        let _ = writeln!(o, "  {:<22} {lo}–{hi}", "concurrency");
    }
    if let Some([lo, hi]) = r.rate {
        let _ = writeln!(o, "  {:<22} {lo:.3}–{hi:.3} req/s", "rate");
    }
    let _ = writeln!(o, "  {:<22} {}–{}", "prompt tokens", r.prompt_tokens[0], r.prompt_tokens[1]);
    let _ = writeln!(o, "  {:<22} {}–{}", "output tokens", r.output_tokens[0], r.output_tokens[1]);
    let _ = writeln!(o, "  {:<22} {}", "sequences running", r.running);
    let _ = writeln!(o, "\nfit on its training runs (predicted ÷ measured)");
    let _ = writeln!(o, "  {:<28}{:>9}{:>10}{:>10}{:>12}", "run", "requests", "TTFT", "TPOT", "output/s");
    let ratio = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("×{v:.2}"));
    for tr in &t.training {
        let _ = writeln!(
            o,
            "  {:<28}{:>9}{:>10}{:>10}{:>12}",
            format!("{} ({})", tr.file, tr.load),
            tr.requests,
            ratio(tr.ttft_mean_ratio),
            ratio(tr.tpot_mean_ratio),
            ratio(tr.throughput_ratio)
        );
    }
    if !t.unidentified.is_empty() {
        let _ = writeln!(o, "\nnot identified by these runs");
        for u in &t.unidentified {
            let _ = writeln!(o, "  - {u}");
        }
    }
    if !t.warnings.is_empty() {
        let _ = writeln!(o, "\nwarnings");
        for w in &t.warnings {
            let _ = writeln!(o, "  - {w}");
        }
    }
    o
}

/// The validation table: each held-out run, metric by metric.
pub fn render_validation(v: &TwinValidation) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\nvalidation of {} on held-out runs (predicted ÷ measured)", v.twin);
    for r in &v.runs {
        let _ = writeln!(o, "\n{} · {} · {}", r.file, r.load, r.target);
        let _ = writeln!(o, "  {:<22}{:>12}{:>12}{:>9}  verdict", "metric", "measured", "predicted", "ratio");
        for m in &r.metrics {
            let _ = writeln!(
                o,
                "  {:<22}{:>12.3}{:>12.3}{:>9}  {}",
                format!("{} {}", m.metric, m.stat),
                m.measured,
                m.predicted,
                m.ratio.map_or("-".into(), |x| format!("×{x:.3}")),
                m.verdict.as_str()
            );
        }
        for e in &r.extrapolated {
            let _ = writeln!(o, "  note: {e}");
        }
    }
    o
}

/// Predicted against measured, one chart per metric (means and throughput), each point a
/// held-out run, with the diagonal and the ±10% band.
pub fn validation_charts(v: &TwinValidation) -> Vec<Chart> {
    let metrics = [
        ("ttft_ms", "mean", "TTFT mean (ms)"),
        ("tpot_ms", "mean", "TPOT mean (ms)"),
        ("itl_ms", "mean", "ITL mean (ms)"),
        ("output_tokens_per_s", "value", "output tokens/s"),
    ];
    metrics
        .iter()
        .filter_map(|(metric, stat, label)| {
            // each point a held-out run, named by its file and load
            let pts: Vec<(f64, f64, String)> = v
                .runs
                .iter()
                .filter_map(|r| {
                    let m = r.metrics.iter().find(|m| m.metric == *metric && m.stat == *stat)?;
                    Some((m.measured, m.predicted, format!("{} ({})", r.file, r.load)))
                })
                .collect();
            let hi = pts.iter().map(|(x, y, _)| x.max(*y)).fold(0.0, f64::max) * 1.1;
            (!pts.is_empty() && hi > 0.0).then(|| {
                Chart::new(
                    format!("validation-{metric}"),
                    format!("{label}: predicted vs measured"),
                    "measured",
                    "predicted",
                )
                .with(Series::new("exact", Mark::Line, vec![(0.0, 0.0), (hi, hi)]))
                .with(Series::new("+10%", Mark::Line, vec![(0.0, 0.0), (hi / 1.1, hi)]))
                .with(Series::new("−10%", Mark::Line, vec![(0.0, 0.0), (hi, hi * 0.9)]))
                .with(Series::labelled("held-out runs", Mark::Dots, pts, false))
            })
        })
        .collect()
}
