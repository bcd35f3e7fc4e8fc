//! SLOs, goodput and capacity from the command line.

mod common;

use std::time::Duration;

use common::*;
use goodput_testkit::{ScriptedServer, Step, sse};
use serde_json::Value;

#[test]
fn half_fast_half_slow_gives_exact_attainment_and_goodput() {
    // even requests: first token after 10 ms; odd: after 300 ms; 4 tokens each, 2 ms apart
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = rt.block_on(ScriptedServer::start(|n| {
        let first = if n % 2 == 0 { 10.0 } else { 300.0 };
        let mut s = vec![Step::SseHead];
        for i in 0..4 {
            s.push(Step::At(first + 2.0 * i as f64));
            s.push(Step::Chunk(sse::completion(" hello")));
        }
        s.extend([Step::Chunk(sse::usage(8, 4)), Step::Chunk(sse::done()), Step::End]);
        s
    }));
    let (d, stdout) = run_ok(
        "halves",
        &[
            "bench",
            "--url",
            &server.url(),
            "--model",
            "m",
            "--profile",
            "synchronous",
            "--requests",
            "10",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
            "--slo",
            "ttft<=100ms",
            "--slo",
            "tpot<=10ms",
        ],
        Duration::from_secs(60),
    );
    let s = &d["runs"][0]["summary"];
    let g = &s["slo"];
    assert_eq!(g["good"], 5);
    assert_eq!(g["attempted"], 10);
    assert_eq!(g["attainment"], 0.5);
    let window = s["duration_s"].as_f64().unwrap();
    let rg = g["request_goodput"].as_f64().unwrap();
    let tg = g["token_goodput"].as_f64().unwrap();
    assert!((rg - 5.0 / window).abs() < 1e-9, "{rg} vs {}", 5.0 / window);
    assert!((tg - 20.0 / window).abs() < 1e-9);
    assert_eq!(g["binding"], "ttft<=100ms");
    assert_eq!(g["pass_rates"][0]["pass_rate"], 0.5);
    assert_eq!(g["pass_rates"][1]["pass_rate"], 1.0);
    assert!(stdout.contains("attainment   50.0%"), "{stdout}");
    // percentiles carry confidence intervals
    assert!(s["ttft_ms"]["p50_ci"].is_array());
}

#[test]
fn presets_and_percentile_verdicts_in_sim() {
    let (d, stdout) = run_ok(
        "preset",
        &[
            "sim",
            "--rate",
            "5",
            "--requests",
            "1000",
            "--slo-preset",
            "mlperf-llama3.1-8b",
            "--slo-preset",
            "seed-online",
        ],
        Duration::from_secs(60),
    );
    let g = &d["runs"][0]["summary"]["slo"];
    assert_eq!(g["predicates"].as_array().unwrap().len(), 4);
    let verdicts: Vec<&str> =
        g["percentiles"].as_array().unwrap().iter().map(|p| p["verdict"].as_str().unwrap()).collect();
    assert_eq!(
        verdicts,
        vec!["met", "met"],
        "a lightly loaded H100 meets the MLPerf 8B targets (1000 samples bound p99)"
    );
    assert!(g["smoothed_goodput"].as_f64().unwrap() > 0.0);
    assert!(stdout.contains("goodput (SLO:"), "{stdout}");
}

#[test]
fn slo_errors_exit_2() {
    for (args, needle) in [
        (vec!["sim", "--slo", "ttft<=fast"], "--slo"),
        (vec!["sim", "--slo", "latency<=3ms"], "--slo"),
        (vec!["sim", "--slo-preset", "snappy"], "--slo-preset"),
        (vec!["sim", "--reading-pace", "20ms"], "--ttft-budget"),
        (vec!["capacity", "--sim"], "--slo"),
        (vec!["capacity", "--sim", "--slo", "ttft<=1s", "--rate", "3"], "--rate"),
        (vec!["capacity", "--sim", "--slo", "ttft<=1s", "--attainment", "1.5"], "--attainment"),
    ] {
        let o = run(&args, Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains(needle), "{args:?}: {}", text(&o.stderr));
    }
}

/// The capacity found has attainment ≥ target; a rate at most 20% higher falls below it.
fn check_capacity(d: &Value, target: f64) -> f64 {
    let c = &d["capacity"];
    let rate = c["rate"].as_f64().expect("a capacity was found");
    assert_eq!(c["attainment_target"], target);
    let curve = c["curve"].as_array().unwrap();
    let at = curve.iter().find(|p| p["rate"].as_f64().unwrap() == rate).unwrap();
    assert!(at["attainment"].as_f64().unwrap() >= target);
    let above = curve.iter().find(|p| {
        let r = p["rate"].as_f64().unwrap();
        r > rate && r <= 1.2 * rate && (p["attainment"].as_f64().unwrap() < target || p["saturated"] == true)
    });
    assert!(above.is_some(), "a rate within 20% above {rate} falls below the target or saturates: {curve:?}");
    // one run per step: a rate run again longer keeps its last step on the curve
    assert!(d["runs"].as_array().unwrap().len() >= curve.len());
    assert!(c["answer"].as_str().unwrap().starts_with("At most"));
    rate
}

#[test]
fn capacity_in_virtual_time() {
    let (d, stdout) = run_ok(
        "capsim",
        &[
            "capacity",
            "--sim",
            "--slo",
            "ttft<=200ms,tpot<=30ms",
            "--attainment",
            "0.99",
            "--input-tokens",
            "512",
            "--output-tokens",
            "128",
        ],
        Duration::from_secs(120),
    );
    let rate = check_capacity(&d, 0.99);
    assert_eq!(d["capacity"]["per_gpu"].as_f64().unwrap(), rate, "one GPU");
    assert!(stdout.contains("keeps 99% of requests within TTFT ≤ 200 ms and TPOT ≤ 30 ms"), "{stdout}");
}

/// The planner issue's case: a 70B model on two H100s under TensorRT-LLM's preset, whose batch
/// admits every request at once, so that above its capacity TTFT stays low for minutes while
/// completions fall behind arrivals, the streams slow down and then pile up. With 120 s steps the
/// search used to report 19.5 req/s, where a 600 s run saturated (TTFT p50 22 s). With the
/// calibrated efficiencies of TensorRT-LLM FP8 it now reports 21.0 ±0.25 req/s, and 600 s runs at
/// 22 still keep 100% of requests within the SLO (seeds 1–3, p99 TTFT 0.32–0.40 s); at 22.5 one
/// seed of two kept 84% (p99 TTFT 6.6 s), and at 23 one kept 52%. Before the requests in flight
/// joined the judgement, the search passed 23 req/s: its 120 s steps served 17–20 req/s of the 23
/// offered while every latency stayed in budget.
#[test]
fn a_reported_capacity_holds_for_ten_minutes() {
    let w = [
        "--model",
        "llama-2-70b",
        "--gpu",
        "h100",
        "--tp",
        "2",
        "--dtype",
        "fp8",
        "--engine",
        "trtllm",
        "--slo-preset",
        "mlperf-llama2-70b",
        "--input-tokens",
        "lognormal:300,150",
        "--output-tokens",
        "lognormal:294,250",
    ];
    let mut args = vec!["capacity", "--sim", "--start-rate", "8", "--step-time", "120s"];
    args.extend_from_slice(&w);
    let (d, stdout) = run_ok("cap70", &args, Duration::from_secs(300));
    let rate = d["capacity"]["rate"].as_f64().unwrap();
    // bisected to ±2%
    assert!(d["capacity"]["uncertainty"].as_f64().unwrap() <= 0.02 * rate + 1e-9, "{stdout}");
    let curve = d["capacity"]["curve"].as_array().unwrap();
    assert!(curve.iter().all(|p| p["queue_trend"].is_string()), "every step judged");
    for seed in ["1", "2", "3"] {
        holds_for_ten_minutes("cap70-600", &w, rate, seed, &stdout);
    }
}

/// A 600 s simulation of the plan `w` at `rate` (seed `seed`) keeps at least 97% of requests
/// within the SLO, with p99 TTFT under 5 s; `context` goes with a failure.
fn holds_for_ten_minutes(name: &str, w: &[&str], rate: f64, seed: &str, context: &str) {
    let r = format!("{rate}");
    let mut a = vec!["sim", "--rate", &r, "--duration", "600s", "--seed", seed];
    a.extend_from_slice(w);
    let (s, _) = run_ok(name, &a, Duration::from_secs(300));
    let sum = &s["runs"][0]["summary"];
    let att = sum["slo"]["attainment"].as_f64().unwrap();
    assert!(att >= 0.97, "600 s at the reported {rate} req/s: attainment {att}\n{context}");
    assert!(sum["ttft_ms"]["p99"].as_f64().unwrap() < 5000.0, "{sum}\n{context}");
}

/// The property behind the test above, over plans drawn at random (seeded; set
/// `GOODPUT_PROPERTY_SEED` to draw others): whatever the model, GPU, engine, format and lengths,
/// a 600 s run at the capacity the search reports (120 s steps) keeps the SLO.
#[test]
fn a_reported_capacity_holds_for_ten_minutes_over_random_plans() {
    let seed: u64 = std::env::var("GOODPUT_PROPERTY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261205);
    let mut draws = 0u64;
    let mut pick = |n: usize| {
        draws += 1;
        (goodput_workload::seed::mix(&[seed, draws]) % n as u64) as usize
    };
    // (model, tp, dtype) that fit every GPU below; engines; lengths (input, output)
    let models = [
        ("llama-3.1-8b", "1", "bf16"),
        ("llama-3.1-70b", "2", "fp8"),
        ("mixtral-8x7b", "2", "fp8"),
        ("qwen3-30b-a3b", "1", "fp8"),
    ];
    let gpus = ["h100", "h200", "b200", "mi300x"];
    let lengths =
        [("lognormal:300,150", "lognormal:294,250"), ("lognormal:1000,300", "lognormal:200,100"), ("128", "512")];
    for case in 0..3 {
        let (model, tp, dtype) = models[pick(models.len())];
        let gpu = gpus[pick(gpus.len())];
        let engines: &[&str] = if gpu == "mi300x" { &["vllm", "sglang"] } else { &["vllm", "sglang", "trtllm"] };
        let engine = engines[pick(engines.len())];
        let (input, output) = lengths[pick(lengths.len())];
        let w = [
            "--model",
            model,
            "--gpu",
            gpu,
            "--tp",
            tp,
            "--dtype",
            dtype,
            "--engine",
            engine,
            "--slo-preset",
            "mlperf-llama2-70b",
            "--input-tokens",
            input,
            "--output-tokens",
            output,
        ];
        let plan = w.join(" ");
        let mut args = vec!["capacity", "--sim", "--step-time", "120s"];
        args.extend_from_slice(&w);
        let (d, stdout) = run_ok(&format!("capprop{case}"), &args, Duration::from_secs(300));
        let rate =
            d["capacity"]["rate"].as_f64().unwrap_or_else(|| panic!("seed {seed}, {plan}: no capacity\n{stdout}"));
        holds_for_ten_minutes(&format!("capprop{case}-600"), &w, rate, "1", &format!("seed {seed}, {plan}\n{stdout}"));
    }
}

#[test]
fn capacity_on_the_embedded_engine() {
    // one-second real-time steps beside this binary's long simulations: recorded runs found
    // 55-440 req/s (a busy host's steps turn "growing" early), so the search starts at 20 req/s
    // (the fewest a 1 s step allows: 20 arrivals), well below the lowest, so that its first step
    // holds
    let (d, _) = run_ok(
        "capemb",
        &[
            "capacity",
            "--slo",
            "ttft<=100ms,tpot<=12ms",
            "--attainment",
            "0.9",
            "--gpu",
            "b200",
            "--dtype",
            "fp8",
            "--input-tokens",
            "128",
            "--output-tokens",
            "16",
            "--requests",
            "60",
            "--start-rate",
            "20",
            "--step-time",
            "1s",
            "--precision",
            "0.1",
        ],
        Duration::from_secs(300),
    );
    check_capacity(&d, 0.9);
}
