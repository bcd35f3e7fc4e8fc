//! The HTML report of a 100k-request run: how long it takes to render and how large it is
//! (targets: under 2 s and under 10 MB). `cargo bench -p goodput-render --bench html_size`.
//!
//! The run is the simulated fixture's plan with 100,000 synthetic records (a Poisson-like
//! schedule, 128-token streams with a stall now and then) summarized like any run.

use std::path::Path;
use std::time::Instant;

use goodput_metrics::{RequestRecord, TokenSource};
use goodput_results::{ResultDoc, summaries, summary_options};

fn synthetic(n: usize) -> Vec<RequestRecord> {
    // a small deterministic generator (xorshift), so the bench needs no random crate
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut t = 0.0;
    (0..n)
        .map(|i| {
            t += -next().ln() * 10.0; // 100 req/s
            let sent = t + next() * 0.05;
            let ttft = 40.0 + next() * 200.0;
            let out = 128u32;
            let mut c = sent + ttft;
            let event_ms: Vec<f64> = (0..out)
                .map(|k| {
                    if k > 0 {
                        c += 8.0 + next() * 4.0 + if next() < 0.01 { 150.0 } else { 0.0 };
                    }
                    c
                })
                .collect();
            RequestRecord {
                id: i as u64,
                scheduled_ms: t,
                sent_ms: Some(sent),
                headers_ms: Some(sent + 1.0),
                end_ms: Some(c + 0.2),
                event_tokens: vec![1; out as usize],
                event_ms,
                event_tokens_source: Some(TokenSource::Server),
                input_tokens: Some(512),
                input_tokens_source: Some(TokenSource::Server),
                output_tokens: Some(u64::from(out)),
                output_tokens_source: Some(TokenSource::Server),
                requested_output_tokens: Some(u64::from(out)),
                finish_reason: Some("length".into()),
                ..Default::default()
            }
        })
        .collect()
}

fn main() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../fixtures/results/v1-sim-before-run-ids.json");
    let mut doc = ResultDoc::read(&fixture).expect("fixture");
    let run = &mut doc.runs[0];
    run.requests = synthetic(100_000);
    let load = run.load.clone().unwrap_or_else(|| run.plan.load.load.clone());
    let (s, full) = summaries(&run.requests, &summary_options(&run.plan, &load));
    run.summary = s;
    run.summary_full = full;
    for _ in 0..2 {
        let t = Instant::now();
        let html = goodput_render::html_report(&doc, "synthetic-100k.json");
        let took = t.elapsed().as_secs_f64();
        let mb = html.len() as f64 / 1e6;
        println!(
            "html report of 100,000 requests: {took:.3} s, {mb:.2} MB (targets: < 2 s, < 10 MB){}",
            if took < 2.0 && mb < 10.0 { "" } else { "  OVER TARGET" }
        );
    }
    // where the time goes
    let run = &doc.runs[0];
    let part = |name: &str, f: &dyn Fn() -> usize| {
        let t = Instant::now();
        let n = f();
        println!("  {name:<22} {:.3} s ({n})", t.elapsed().as_secs_f64());
    };
    use goodput_render::charts;
    for (id, _) in charts::METRICS {
        part(&format!("samples {id}"), &|| charts::samples(run, id).len());
    }
    part("over time", &|| charts::time_charts(run, "").len());
    part("ITL by position", &|| charts::itl_position_chart(run, "").series.len());
    part("console text", &|| goodput_render::render_run("report", run).len());
    let t = Instant::now();
    let csv = goodput_render::requests_csv(&doc);
    println!("requests csv: {:.3} s, {:.2} MB", t.elapsed().as_secs_f64(), csv.len() as f64 / 1e6);
}
