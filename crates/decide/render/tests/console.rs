//! The console report on the checked-in result documents: both ITLs labelled (token-level and
//! chunk ITL, vLLM's "ITL"), a simulated run without the client-only lines, the sweep table's
//! SLO columns, and the note that names the rows read off a sketch.

use std::path::Path;

use goodput_metrics::{Estimate, EstimateMethod};
use goodput_render::{ITL_NOTE, ITL_PER_CHUNK, ITL_PER_TOKEN, render_run, render_sweep};
use goodput_results::ResultDoc;

fn fixture(name: &str) -> ResultDoc {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/results").join(name);
    ResultDoc::read(&p).expect("fixture reads")
}

/// The console line that starts with `label` (after the indent).
fn line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label} line in\n{text}"))
}

#[test]
fn both_itls_are_shown_and_labelled() {
    let doc = fixture("v1-bench-before-run-ids.json");
    let run = &doc.runs[0];
    let text = render_run("bench", run);
    let s = &run.summary;
    // each row holds its own distribution: mean, p50 and n
    let fmt = |x: Option<f64>| format!("{:.2}", x.unwrap());
    let token = line(&text, ITL_PER_TOKEN);
    assert!(token.contains(&fmt(s.itl_ms.mean)) && token.ends_with(&s.itl_ms.n.to_string()), "{token}");
    let chunk = line(&text, ITL_PER_CHUNK);
    assert!(chunk.contains(&fmt(s.chunk_itl_ms.p50)) && chunk.ends_with(&s.chunk_itl_ms.n.to_string()), "{chunk}");
    assert!(text.contains(ITL_NOTE) && ITL_NOTE.contains("vLLM reports as ITL"));
    // no bare "ITL" row any more
    assert!(!text.lines().any(|l| l.trim_start().starts_with("ITL ") && !l.contains("(per ")), "{text}");
}

#[test]
fn sketched_rows_are_named_with_their_error_bound() {
    let doc = fixture("v1-bench-before-run-ids.json");
    let mut run = doc.runs[0].clone();
    // an exact run has no such line
    assert!(!render_run("bench", &run).contains("estimated:"));
    let sketch = Some(Estimate { method: EstimateMethod::LogLinear, relative_error: 1.0 / 128.0 });
    run.summary.itl_ms.estimate = sketch;
    run.summary.chunk_itl_ms.estimate = sketch;
    let text = render_run("bench", &run);
    let note = line(&text, "estimated:");
    // both sketched rows, in table order; 1/128 = 0.78125% shown to two places
    assert!(note.contains(&format!("estimated: {ITL_PER_TOKEN}, {ITL_PER_CHUNK} (")), "{note}");
    assert!(note.contains("within 0.78% of exact") && note.contains("n, mean, min and max are exact"), "{note}");
    assert!(!note.contains("TTFT"), "{note}");
}

#[test]
fn a_simulated_run_has_no_client_only_lines() {
    let sim = render_run("sim", &fixture("v1-sim-before-run-ids.json").runs[0]);
    assert!(!sim.contains("our tokenizer vs server usage"), "{sim}");
    assert!(!sim.contains("schedule lag"), "{sim}");
    assert!(line(&sim, "tokens").contains("input ") && line(&sim, "tokens").contains("output "));
    // a measured run keeps them
    let bench = render_run("bench", &fixture("v1-bench-before-run-ids.json").runs[0]);
    assert!(bench.contains("our tokenizer vs server usage"), "{bench}");
    assert!(bench.contains("schedule lag p50"), "{bench}");
}

#[test]
fn the_sweep_table_has_slo_columns_when_an_slo_is_set() {
    let doc = fixture("v1-sim-before-run-ids.json");
    let mut a = doc.runs[0].clone();
    a.name = Some("rate 2".into());
    let mut b = a.clone();
    b.name = Some("rate 8".into());
    {
        let g = b.summary.slo.as_mut().unwrap();
        g.attainment = 0.875;
        g.request_goodput = 7.0;
    }
    let a_good = a.summary.slo.as_ref().unwrap().request_goodput;
    let text = render_sweep(&[&a, &b]);
    let head = line(&text, "stage");
    assert!(head.contains("attain") && head.contains("good req/s"), "{head}");
    assert!(text.contains("sweep (SLO: p99(ttft)<=200ms)"), "{text}");
    let row_a = line(&text, "rate 2");
    assert!(row_a.contains("100.0%") && row_a.contains(&format!("{a_good:.2}")), "{row_a}");
    let row_b = line(&text, "rate 8");
    assert!(row_b.contains("87.5%") && row_b.contains("7.00"), "{row_b}");
    // the columns line up with the header
    assert_eq!(head.len(), row_b.len(), "\n{head}\n{row_b}");
    // without an SLO: no such columns
    a.summary.slo = None;
    b.summary.slo = None;
    let text = render_sweep(&[&a, &b]);
    assert!(!line(&text, "stage").contains("attain"), "{text}");
}
