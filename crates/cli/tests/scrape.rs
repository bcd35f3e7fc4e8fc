//! `--scrape-metrics` end to end: the embedded engine's `/metrics` scraped beside a bench run
//! (samples on the run's clock, the generated-token cross-check, the report's server charts); a
//! scripted server with no `/metrics` (404) and a URL serving garbage: the run completes, the
//! failures are counted and warned about once.

mod common;

use std::time::Duration;

use common::browser::{assert_charts, assert_offline, browser_check};
use common::*;
use goodput_testkit::{ScriptedServer, steady_stream};

const LIMIT: Duration = Duration::from_secs(120);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

fn warnings(run: &serde_json::Value, code: &str) -> Vec<String> {
    run["summary"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == code)
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn embedded_engine_is_always_scraped_and_its_tokens_agree() {
    let dir = temp_dir("scrape-embedded");
    let html = dir.join("r.html");
    let (doc, stdout) = run_ok(
        "scrape-embedded",
        &[
            "bench",
            "--model",
            "llama-3.2-1b",
            "--requests",
            "40",
            "--concurrency",
            "8",
            "--input-tokens",
            "64",
            "--output-tokens",
            "32",
            "--scrape-interval",
            "100ms",
            "--html",
            html.to_str().unwrap(),
        ],
        LIMIT,
    );
    let run = &doc["runs"][0];
    let m = &run["server_metrics"];
    assert_eq!(m["flavour"], "goodput", "{m}");
    assert_eq!(m["interval_s"], 0.1);
    assert_eq!(m["errors"], 0, "{m}");
    assert!(m["url"].as_str().unwrap().ends_with("/metrics"));
    assert_eq!(m["sources"]["running"], "vllm:num_requests_running");
    assert_eq!(m["sources"]["generation_tokens"], "vllm:generation_tokens_total");
    let samples = m["samples"].as_array().unwrap();
    // one before the load, one after it, and the periodic ones between
    assert!(samples.len() >= 2, "{m}");
    let first = samples[0]["t_ms"].as_f64().unwrap();
    let last = samples.last().unwrap()["t_ms"].as_f64().unwrap();
    assert!(first <= 0.0, "the first scrape precedes the run's clock start: {first}");
    let end = run["requests"].as_array().unwrap().iter().filter_map(|r| r["end_ms"].as_f64()).fold(0.0, f64::max);
    assert!(last >= end, "the last scrape follows the last request: {last} < {end}");
    assert!(samples.iter().all(|s| s["kv_usage"].as_f64().is_some_and(|k| (0.0..=1.0).contains(&k))));
    assert_eq!(samples[0]["running"], 0.0, "nothing runs before the load");
    // the embedded server counts exactly the tokens it streams: 40 × 32
    let t = &m["tokens"];
    assert_eq!(t["client"], 1280, "{t}");
    assert!(t["agrees"].as_bool().unwrap(), "{t}");
    assert!(t["rel_diff"].as_f64().unwrap().abs() <= 0.05, "{t}");
    assert!(warnings(run, "server_token_mismatch").is_empty());
    assert!(stdout.contains("server metrics: goodput (embedded)"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_offline(&page);
    let charts = ["chart-server-queue", "chart-server-kv", "chart-server-tokens", "chart-engine-batch"];
    assert_charts(&page, &charts);
    browser_check(&html, "scrape-report.png", &charts);
}

#[test]
fn a_server_without_metrics_is_counted_and_warned_once() {
    let rt = rt();
    let server = rt.block_on(ScriptedServer::start(|_| steady_stream(5.0, 2.0, 8, false)));
    let (doc, stdout) = run_ok(
        "scrape-404",
        &[
            "bench",
            "--url",
            &server.url(),
            "--requests",
            "12",
            "--concurrency",
            "3",
            "--input-tokens",
            "32",
            "--output-tokens",
            "8",
            "--scrape-metrics",
            "--scrape-interval",
            "20ms",
        ],
        LIMIT,
    );
    let run = &doc["runs"][0];
    assert_eq!(run["summary"]["completed"], 12, "the run is unaffected");
    let m = &run["server_metrics"];
    assert_eq!(m["url"], format!("{}/metrics", server.url()));
    let (scrapes, errors) = (m["scrapes"].as_u64().unwrap(), m["errors"].as_u64().unwrap());
    assert!(scrapes >= 2 && errors == scrapes, "{m}");
    assert!(m["first_error"].as_str().unwrap().contains("HTTP 404"), "{m}");
    assert!(m["samples"].as_array().unwrap().is_empty());
    assert!(m["flavour"].is_null() && m.get("tokens").is_none());
    let w = warnings(run, "scrape_failed");
    assert_eq!(w.len(), 1, "one warning however many scrapes failed: {w:?}");
    assert!(w[0].contains(&format!("{errors} of {scrapes} scrapes")), "{}", w[0]);
    assert!(stdout.contains("scrapes failed"), "{stdout}");
    // the scrapes were GETs of /metrics beside the load, never scripted requests
    assert_eq!(server.served().len(), 12);
}

#[test]
fn garbage_at_the_scrape_url_is_a_counted_error() {
    let rt = rt();
    let server = rt.block_on(ScriptedServer::start(|_| steady_stream(5.0, 2.0, 4, false)));
    // a plain HTTP server answering every request with a page that is not the text format
    let garbage = rt.block_on(async {
        let app = axum::Router::new().fallback(|| async { "<html><body>not metrics {{{</body></html>" });
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        format!("http://{addr}/stats")
    });
    let (doc, _) = run_ok(
        "scrape-garbage",
        &[
            "bench",
            "--url",
            &server.url(),
            "--requests",
            "6",
            "--concurrency",
            "2",
            "--input-tokens",
            "32",
            "--output-tokens",
            "4",
            "--scrape-metrics",
            &garbage,
        ],
        LIMIT,
    );
    let run = &doc["runs"][0];
    assert_eq!(run["summary"]["completed"], 6);
    let m = &run["server_metrics"];
    assert_eq!(m["url"], garbage);
    assert!(m["errors"].as_u64().unwrap() >= 2 && m["errors"] == m["scrapes"], "{m}");
    assert!(m["first_error"].as_str().unwrap().contains("not the Prometheus text format"), "{m}");
    assert_eq!(warnings(run, "scrape_failed").len(), 1);
}

#[test]
fn bad_scrape_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (&["bench", "--url", "http://127.0.0.1:9", "--scrape-metrics", "ftp://x/metrics"][..], "--scrape-metrics"),
        (&["bench", "--scrape-interval", "0s"][..], "--scrape-interval"),
        (&["bench", "--scrape-interval", "soon"][..], "--scrape-interval"),
    ] {
        let o = run(args, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(flag), "{args:?}: {}", text(&o.stderr));
    }
}
