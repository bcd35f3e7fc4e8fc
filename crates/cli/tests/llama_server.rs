//! Against a real inference server nobody here wrote: llama.cpp's `llama-server` serving
//! SmolLM2-135M-Instruct (built by `scripts/llama-server.sh build`).
//!
//! Skipped (with a note) when the server is not built, unless `GOODPUT_REQUIRE_LLAMA=1` (CI sets
//! it), in which case a missing server fails the test.

mod common;

use std::time::Duration;

use common::browser::*;
use common::llama::{start, start_with};
use common::*;

fn check(url: &str, api: &str) {
    let dir = temp_dir(&format!("llama-{api}"));
    let out = dir.join("r.json");
    let html = dir.join("r.html");
    let o = run(
        &[
            "bench",
            "--url",
            url,
            "--api",
            api,
            "--requests",
            "6",
            "--concurrency",
            "2",
            "--input-tokens",
            "64",
            "--output-tokens",
            "16",
            // started with --metrics: its /metrics is scraped beside the load
            "--scrape-metrics",
            "--scrape-interval",
            "250ms",
            "--out",
            out.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(240),
    );
    assert_eq!(o.status.code(), Some(0), "{api}: {}\n{}", text(&o.stdout), text(&o.stderr));
    let doc = load_valid(&out);
    let run = &doc["runs"][0];
    assert_eq!(run["plan"]["model"], "SmolLM2-135M-Instruct");
    let s = &run["summary"];
    assert_eq!(s["completed"], 6, "{api}: {}", text(&o.stdout));
    // llama.cpp's server closes each connection after its response: no request fails for it,
    // and the server received exactly one POST per request
    assert_eq!(s["failed"], 0, "{api}: {}", text(&o.stdout));
    assert_eq!(s["sends"]["posts"], 6, "{api}: {}", s["sends"]);
    println!("{api}: {}", text(&o.stdout).lines().find(|l| l.contains("POSTs")).unwrap_or(""));
    for r in run["requests"].as_array().unwrap() {
        let rec: goodput_metrics::RequestRecord = serde_json::from_value(r.clone()).unwrap();
        assert!(rec.is_success(), "{api}: {:?}", rec.error);
        assert_eq!(rec.output_tokens_source, Some(goodput_metrics::TokenSource::Server), "{api}: usage-based counts");
        assert_eq!(rec.input_tokens_source, Some(goodput_metrics::TokenSource::Server));
        assert_eq!(rec.output_tokens, Some(16), "{api}: ignore_eos is honoured");
        assert_eq!(rec.event_tokens.iter().map(|&m| m as u64).sum::<u64>(), 16);
        let m = goodput_metrics::RequestMetrics::of(&rec);
        assert!(m.ttft.unwrap() > 0.0 && m.ttft.unwrap() < m.e2e.unwrap(), "{api}: TTFT < E2E");
        assert!(m.tpot.unwrap() > 0.0, "{api}: TPOT > 0");
        assert!(rec.headers_ms.unwrap() <= rec.event_ms[0]);
    }
    let ttft = s["ttft_ms"]["mean"].as_f64().unwrap();
    let e2e = s["e2e_ms"]["mean"].as_f64().unwrap();
    assert!(ttft < e2e);
    assert!(s["output_throughput"].as_f64().unwrap() > 0.0);
    // llama.cpp's own counters, scraped during the run
    let m = &run["server_metrics"];
    assert_eq!(m["flavour"], "llamacpp", "{api}: {m}");
    assert_eq!(m["errors"], 0, "{api}: {m}");
    assert!(m["samples"].as_array().unwrap().len() >= 2, "{api}: {m}");
    assert_eq!(m["sources"]["running"], "llamacpp:requests_processing");
    assert_eq!(m["sources"]["generation_tokens"], "llamacpp:tokens_predicted_total");
    assert!(m["tokens"]["server"].as_f64().unwrap() > 0.0, "{api}: {m}");
    // the report of a real server's run: offline, every client-side chart drawn, and it opens in
    // headless Chromium without errors (no engine charts: the server is not our model)
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let mut charts: Vec<&str> = RUN_CHARTS.iter().copied().filter(|c| !c.starts_with("chart-engine")).collect();
    charts.extend(["chart-server-queue", "chart-server-tokens"]);
    assert_charts(&page, &charts);
    browser_check(&html, &format!("llama-{api}-report.png"), &charts);
}

#[test]
fn bench_llama_server_completions_and_chat() {
    let Some((_server, url)) = start() else {
        return;
    };
    check(&url, "completions");
    check(&url, "chat");
}

/// An agent against llama.cpp with its prompt cache off and on (`--cache-prompt`): one user,
/// sessions of 4 calls over the chat API, each resending the conversation plus 128 tokens of
/// tool output. With the cache on, a later call prefills only what its slot has not seen; its
/// mean TTFT falls by about the share of its prompt tokens the server computed (read from
/// `llamacpp:prompt_tokens_cached_total` and `prompt_tokens_total`, scraped beside the load),
/// not below it, and not more than twice above it (a small prefill over a cached context costs
/// more per token: llama.cpp's own prompt-eval timings show 9-12 ms per token against 7).
#[test]
fn llama_servers_prompt_cache_cuts_an_agents_later_calls_by_the_share_it_serves() {
    let _serial = goodput_testkit::timing_lock();
    let dir = temp_dir("llama-agentic");
    let mut results = Vec::new();
    for cache in [false, true] {
        let Some((_server, url)) = start_with(cache) else { return };
        let out = dir.join(format!("cache-{cache}.json"));
        let args = [
            "bench",
            "--url",
            &url,
            "--api",
            "chat",
            "--agentic",
            "--calls",
            "4",
            "--tool-time",
            "100ms",
            "--tool-output-tokens",
            "128",
            "--input-tokens",
            "256",
            "--output-tokens",
            "16",
            "--concurrency",
            "1",
            "--requests",
            "8",
            "--scrape-metrics",
            "--scrape-interval",
            "250ms",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ];
        let o = run(&args, Duration::from_secs(240));
        assert_eq!(o.status.code(), Some(0), "cache {cache}: {}\n{}", text(&o.stdout), text(&o.stderr));
        let doc = load_valid(&out);
        let run = doc["runs"][0].clone();
        assert_eq!(run["summary"]["completed"], 8, "cache {cache}");
        results.push(run);
    }
    // mean TTFT of calls 1-3 (call 0 has nothing cached), and their prompt tokens
    let later = |run: &serde_json::Value| {
        let rows = run["summary"]["sessions"]["ttft_by_call"].as_array().unwrap();
        let (mut sum, mut n) = (0.0, 0.0);
        for r in &rows[1..] {
            sum += r["mean"].as_f64().unwrap() * r["n"].as_f64().unwrap();
            n += r["n"].as_f64().unwrap();
        }
        sum / n
    };
    let tokens = |run: &serde_json::Value, later: bool| -> f64 {
        run["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| (r["turn"].as_u64().unwrap() > 0) == later)
            .map(|r| r["input_tokens"].as_f64().unwrap())
            .sum()
    };
    let last = |run: &serde_json::Value, key: &str| {
        let s = run["server_metrics"]["samples"].as_array().unwrap();
        s.last().unwrap()[key].as_f64().unwrap_or(0.0)
    };
    let (off, on) = (&results[0], &results[1]);
    assert_eq!(last(off, "prefix_hits"), 0.0, "with the cache off nothing is served from it");
    // the server computed the first calls whole and, of the later calls, only what it had not seen
    let computed_later = last(on, "prompt_tokens") - tokens(on, false);
    let share = computed_later / tokens(on, true);
    assert!(last(on, "prefix_hits") > 0.0 && share > 0.1 && share < 0.5, "computed share of later prompts {share:.3}");
    let ratio = later(on) / later(off);
    println!(
        "llama.cpp agent: later calls' mean TTFT {:.0} ms (cache off) -> {:.0} ms (on): x{ratio:.3}; the server computed \
         {:.1}% of their prompt tokens ({computed_later:.0} of {:.0})",
        later(off),
        later(on),
        share * 100.0,
        tokens(on, true),
    );
    assert!(ratio >= 0.8 * share && ratio <= 2.0 * share, "TTFT x{ratio:.3} against a computed share of {share:.3}");
}
