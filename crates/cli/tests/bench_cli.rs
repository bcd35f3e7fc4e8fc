//! `goodput bench` end to end against scripted servers on loopback: output files, schema, exit
//! codes, usage errors, interruption.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use goodput_testkit::{ScriptedServer, Step, steady_stream};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

#[test]
fn writes_table_json_and_jsonl() {
    let rt = rt();
    let server = rt.block_on(ScriptedServer::start(|_| steady_stream(20.0, 2.0, 8, false)));
    let dir = temp_dir("bench");
    let out = dir.join("r.json");
    let o = run(
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
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", text(&o.stderr));
    let stdout = text(&o.stdout);
    for row in ["TTFT", "TPOT", "ITL", "E2E", "throughput"] {
        assert!(stdout.contains(row), "missing {row} in:\n{stdout}");
    }
    let doc = load_valid(&out);
    let run = &doc["runs"][0];
    assert_eq!(run["summary"]["completed"], 12);
    assert_eq!(run["plan"]["model"], "scripted-model", "model picked from /v1/models");
    assert_eq!(run["target"]["kind"], "url");
    assert_eq!(run["requests"].as_array().unwrap().len(), 12);
    let jsonl = std::fs::read_to_string(dir.join("r.requests.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 12);
    for l in jsonl.lines() {
        let r: goodput_metrics::RequestRecord = serde_json::from_str(l).unwrap();
        assert!(r.is_success());
    }
}

#[test]
fn api_key_is_sent_but_never_written() {
    let rt = rt();
    let server = rt.block_on(ScriptedServer::start(|_| steady_stream(1.0, 1.0, 2, false)));
    let dir = temp_dir("key");
    let out = dir.join("k.json");
    let child = bin()
        .env("MY_SECRET_KEY", "sk-test-123456")
        .args(["bench", "--url", &server.url(), "--requests", "2", "--api-key-env", "MY_SECRET_KEY"])
        .args(["--output-tokens", "2", "--input-tokens", "4", "--out", out.to_str().unwrap(), "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_with_deadline(child, Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(0));
    for f in [out.clone(), dir.join("k.requests.jsonl")] {
        assert!(!std::fs::read_to_string(f).unwrap().contains("sk-test-123456"));
    }
    assert!(!text(&o.stdout).contains("sk-test") && !text(&o.stderr).contains("sk-test"));
}

#[test]
fn usage_errors_exit_2_with_one_line_naming_the_flag() {
    for (args, flag) in [
        (vec!["bench", "--url", "http://127.0.0.1:9", "--rate", "fast"], "--rate"),
        (vec!["bench", "--url", "http://127.0.0.1:9", "--tokenizer", "/nonexistent/tokenizer.json"], "--tokenizer"),
        (vec!["bench", "--url", "http://127.0.0.1:9", "--input-tokens", "normal:x"], "--input-tokens"),
        (vec!["bench", "--url", "http://127.0.0.1:9", "--duration", "forever"], "--duration"),
        (vec!["bench", "--url", "https://127.0.0.1:9", "--ca-cert", "/nonexistent/ca.pem"], "--ca-cert"),
    ] {
        let o = run(&args, Duration::from_secs(20));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = text(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(flag), "{err}");
    }
    let o = run(&["bench", "--no-such-flag"], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn all_failed_exits_1() {
    let rt = rt();
    let server = rt.block_on(ScriptedServer::start(|_| vec![Step::Status(500, "no".into())]));
    let dir = temp_dir("fail");
    let out = dir.join("f.json");
    let o = run(
        &["bench", "--url", &server.url(), "--model", "m", "--requests", "4", "--out", out.to_str().unwrap(), "-q"],
        Duration::from_secs(20),
    );
    assert_eq!(o.status.code(), Some(1));
    let doc = load_valid(&out);
    assert_eq!(doc["runs"][0]["summary"]["failed_by_class"]["http_status"], 4);
    assert!(text(&o.stdout).contains("failed"));
}

#[test]
fn max_errors_exits_1_and_marks_interrupted() {
    let rt = rt();
    let server = rt.block_on(ScriptedServer::start(|_| vec![Step::Status(503, "busy".into())]));
    let dir = temp_dir("maxerr");
    let out = dir.join("m.json");
    let o = run(
        &[
            "bench",
            "--url",
            &server.url(),
            "--model",
            "m",
            "--requests",
            "500",
            "--concurrency",
            "2",
            "--max-errors",
            "3",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(o.status.code(), Some(1));
    let doc = load_valid(&out);
    assert_eq!(doc["interrupted"], true);
    assert!(doc["runs"][0]["requests"].as_array().unwrap().len() < 50);
}

#[test]
fn unreachable_server_without_model_exits_1() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let o = run(&["bench", "--url", &format!("http://127.0.0.1:{port}"), "-q"], Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("cannot reach"), "{}", text(&o.stderr));
}

#[cfg(unix)]
#[test]
fn ctrl_c_keeps_what_was_measured() {
    let rt = rt();
    // slow streams: 200 tokens 20 ms apart (4 s each)
    let server = rt.block_on(ScriptedServer::start(|_| steady_stream(10.0, 20.0, 200, false)));
    let dir = temp_dir("sigint");
    let out = dir.join("i.json");
    let o = bench_interrupted(&server.url(), &out, "INT");
    assert_eq!(o.status.code(), Some(130), "stderr: {}", text(&o.stderr));
    let doc = load_valid(&out);
    assert_eq!(doc["interrupted"], true);
    let reqs = doc["runs"][0]["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 4, "the in-flight requests are kept");
    assert!(reqs.iter().all(|r| r["error"]["class"] == "cancelled" && !r["event_ms"].as_array().unwrap().is_empty()));
    let jsonl = std::fs::read_to_string(dir.join("i.requests.jsonl")).unwrap();
    assert_eq!(jsonl.lines().count(), 4);
}

#[test]
fn streams_left_open_after_done_are_counted_in_the_summary() {
    let rt = rt();
    // every stream stays open after [DONE]: the requests end at [DONE], the bodies drain apart
    let server = rt.block_on(ScriptedServer::start(|_| {
        let mut s = steady_stream(2.0, 1.0, 4, false);
        s.pop(); // no end of body
        s.push(Step::Silence(Duration::from_secs(30)));
        s
    }));
    let dir = temp_dir("bench-after-done");
    let out = dir.join("r.json");
    let started = std::time::Instant::now();
    let o = run(
        &[
            "bench",
            "--url",
            &server.url(),
            "--requests",
            "6",
            "--concurrency",
            "1",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(0), "stderr: {}", text(&o.stderr));
    // six requests one after another, none waiting for its stream to close (the grace is 2 s)
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let doc = load_valid(&out);
    let s = &doc["runs"][0]["summary"];
    assert_eq!(s["completed"], 6, "{s}");
    assert_eq!(s["streams_after_done"]["drained"], 6, "{s}");
}
