//! Against a real inference server nobody here wrote: llama.cpp's `llama-server` serving
//! SmolLM2-135M-Instruct (built by `scripts/llama-server.sh build`).
//!
//! Skipped (with a note) when the server is not built, unless `GOODPUT_REQUIRE_LLAMA=1` (CI sets
//! it), in which case a missing server fails the test.

mod common;

use std::time::Duration;

use common::browser::*;
use common::llama::start;
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
