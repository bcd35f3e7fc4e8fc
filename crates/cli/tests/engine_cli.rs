//! The engine model from the command line: `bench` with no URL, `serve`, `sim`, and their
//! agreement on the same workload.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn bench_without_url_runs_the_embedded_engine() {
    let o = run(&["bench", "--requests", "24", "--concurrency", "8", "-q"], Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("embedded engine") && out.contains("TTFT") && out.contains("engine model"), "{out}");
}

#[test]
fn impossible_engines_and_unknown_names_exit_2() {
    let o = run(&["sim", "--model", "llama-2-70b"], Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr).trim(),
        "goodput: llama-2-70b in bf16 needs 138 GB of weights; one h100 offers 72 GB at 0.9 utilization: use --tp 2 or more, or --dtype fp8"
    );
    let o = run(&["bench", "--gpu", "tpu-v9"], Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("tpu-v9") && e.contains("a100, b200, h100, h200, l40s, m2-ultra, mi300x, rtx5090"), "{e}");
    let o = run(&["serve", "--model", "gpt-5"], Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("llama-3.1-8b"));
}

#[test]
fn sim_reports_engine_statistics() {
    let dir = temp_dir("sim");
    let out = dir.join("s.json");
    let o = run(
        &[
            "sim",
            "--rate",
            "inf",
            "--requests",
            "2000",
            "--input-tokens",
            "200",
            "--output-tokens",
            "200",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    for needle in ["mean running", "compute-bound", "kv cache", "preemptions"] {
        assert!(stdout.contains(needle), "missing {needle}: {stdout}");
    }
    let doc = load_valid(&out);
    let stats = &doc["runs"][0]["engine_stats"];
    assert!(stats["mean_running"].as_f64().unwrap() > 200.0, "all at once fills the batch");
    assert_eq!(doc["runs"][0]["summary"]["completed"], 2000);
}

/// Speculative decoding on the embedded engine streams several tokens in one SSE event: the
/// records split each event's tokens, token-level ITL has more samples than chunk gaps, and
/// the engine statistics (console, JSON, /metrics names) count drafts and acceptances.
#[test]
fn speculative_decoding_streams_several_tokens_per_event() {
    let dir = temp_dir("spec");
    let out = dir.join("s.json");
    let o = run(
        &[
            "bench",
            "--speculative",
            "ngram,k=4,acceptance=0.8",
            "--prefix-caching",
            "on",
            "--requests",
            "8",
            "--concurrency",
            "2",
            "--input-tokens",
            "64",
            "--output-tokens",
            "48",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("speculative") && stdout.contains("acceptance"), "{stdout}");
    let doc = load_valid(&out);
    let run = &doc["runs"][0];
    let mut multi = 0;
    for r in run["requests"].as_array().unwrap() {
        let split: Vec<u64> = r["event_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(split.iter().sum::<u64>(), 48, "every token counted once");
        assert_eq!(r["output_tokens"], 48);
        multi += split.iter().filter(|&&n| n > 1).count();
    }
    assert!(multi > 0, "some events carry several tokens");
    let s = &run["summary"];
    assert!(s["itl_ms"]["n"].as_u64().unwrap() > s["chunk_itl_ms"]["n"].as_u64().unwrap());
    let stats = &run["engine_stats"];
    let (drafts, drafted, accepted) = (
        stats["spec_drafts"].as_u64().unwrap(),
        stats["spec_draft_tokens"].as_u64().unwrap(),
        stats["spec_accepted_tokens"].as_u64().unwrap(),
    );
    assert!(drafts > 0 && drafted == 4 * drafts && accepted <= drafted, "{stats}");
}
