//! `goodput fit` against ground truth: the embedded engine served with settings the fit is not
//! told (llama-2-13b on an A100, `--max-num-seqs 12`, prefill-first or chunked prefill). Three
//! short training loads (concurrency 1 at two prompt lengths, 16 users: beyond the limit, so
//! requests queue), then three held-out loads it never saw (4 users, 24 users with outputs of
//! 16-48 tokens, Poisson at about 60% of capacity): mean TTFT, mean TPOT, p90 TPOT and output
//! throughput within ±10%, the sequence limit recovered exactly and the policy right. And the
//! refusals: runs of two servers, a simulated run, a run without per-token timestamps.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(300);

/// Runs `bench` on the embedded engine with the hidden settings and `load`, into `dir/name.json`.
/// `load` may name its own `--output-tokens` (32 where it does not).
fn measure(dir: &Path, name: &str, scheduling: &str, load: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}.json"));
    let mut args = vec!["bench", "--model", "llama-2-13b", "--gpu", "a100", "--max-num-seqs", "12"];
    args.extend_from_slice(&["--scheduling", scheduling]);
    if !load.contains(&"--output-tokens") {
        args.extend_from_slice(&["--output-tokens", "32"]);
    }
    args.extend_from_slice(load);
    args.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
    let o = run(&args, LIMIT);
    assert_eq!(o.status.code(), Some(0), "{name}: {}\n{}", text(&o.stdout), text(&o.stderr));
    out
}

fn twin_schema_errors(twin: &serde_json::Value) -> Vec<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/twin.schema.json");
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema).expect("schema compiles");
    v.iter_errors(twin).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

fn ground_truth(scheduling: &str, policy: &str) {
    // real-time runs, and a ±10% band: not beside the other ground truth's on two cores (its
    // measurements, fit and headless browser ran in step with these; recorded chunked runs put
    // the Poisson load's TTFT ratio at up to ×1.074)
    let _serial = goodput_testkit::timing_lock();
    let dir = temp_dir(&format!("twin-{scheduling}"));
    let train = [
        measure(
            &dir,
            "c1a",
            scheduling,
            &["--concurrency", "1", "--requests", "12", "--input-tokens", "128", "--seed", "1"],
        ),
        measure(
            &dir,
            "c1b",
            scheduling,
            &["--concurrency", "1", "--requests", "12", "--input-tokens", "1024", "--seed", "2"],
        ),
        measure(
            &dir,
            "c16",
            scheduling,
            &["--concurrency", "16", "--requests", "64", "--input-tokens", "256", "--seed", "3"],
        ),
    ];
    let held = [
        measure(
            &dir,
            "h4",
            scheduling,
            &["--concurrency", "4", "--requests", "24", "--input-tokens", "256", "--seed", "4"],
        ),
        // outputs of 16-48 tokens: 24 users of equal requests on 12 sequences move in cohorts,
        // and their p90 TPOT (of 72 requests) sat between two of a few discrete levels; a
        // real-time run rarely landed the other way (chunked, ×0.861 against ×0.943-0.948 in
        // about 20 recorded runs). Unequal outputs spread continuously; 144 requests steady the
        // p90 (5 runs each: chunked ×1.007-1.033, prefill-first ×1.026-1.039; 72 requests gave
        // up to ×1.065)
        measure(
            &dir,
            "h24",
            scheduling,
            &[
                "--concurrency",
                "24",
                "--requests",
                "144",
                "--input-tokens",
                "256",
                "--output-tokens",
                "uniform:16..48",
                "--seed",
                "5",
            ],
        ),
        measure(&dir, "hp", scheduling, &["--rate", "4", "--requests", "40", "--input-tokens", "256", "--seed", "6"]),
    ];
    let twin = dir.join("twin.json");
    let report = dir.join("validation.json");
    let html = dir.join("validation.html");
    let mut args: Vec<&str> = vec!["fit"];
    args.extend(train.iter().map(|p| p.to_str().unwrap()));
    args.extend_from_slice(&["--out", twin.to_str().unwrap(), "--validate"]);
    args.extend(held.iter().map(|p| p.to_str().unwrap()));
    args.extend_from_slice(&["--report", report.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    let o = run(&args, LIMIT);
    let shown = format!("{}\n{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{shown}");
    println!("{shown}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&twin).unwrap()).unwrap();
    assert!(twin_schema_errors(&t).is_empty(), "{:?}", twin_schema_errors(&t));
    assert_eq!(t["scheduler"]["max_num_seqs"]["value"], 12, "{shown}");
    assert_eq!(t["scheduler"]["max_num_seqs"]["identified"], true, "{shown}");
    assert_eq!(t["scheduler"]["scheduling"], policy, "{shown}");
    let doc = load_valid(&report);
    let runs = doc["validation"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        for (metric, stat) in
            [("ttft_ms", "mean"), ("tpot_ms", "mean"), ("tpot_ms", "p90"), ("output_tokens_per_s", "value")]
        {
            let m = r["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == metric && m["stat"] == stat);
            let ratio = m.and_then(|m| m["ratio"].as_f64()).unwrap_or(f64::NAN);
            assert!((ratio - 1.0).abs() <= 0.10, "{} {metric} {stat}: ×{ratio:.3}\n{shown}", r["file"]);
        }
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Twin validation: predicted vs measured") && page.contains("<svg"), "validation page");
    // the table holds the document's figures; each chart's points are the held-out runs, named
    let first = &runs[0]["metrics"][0];
    let key = format!(
        "data-metric=\"{}\" data-stat=\"{}-predicted\">",
        first["metric"].as_str().unwrap(),
        first["stat"].as_str().unwrap()
    );
    let cell = &page[page.find(&key).unwrap() + key.len()..];
    let shown: f64 = cell[..cell.find('<').unwrap()].parse().unwrap();
    assert!((shown - first["predicted"].as_f64().unwrap()).abs() < 0.0005 + 1e-9);
    let charts = ["validation-ttft_ms", "validation-tpot_ms", "validation-output_tokens_per_s"];
    common::browser::assert_offline(&page);
    common::browser::assert_charts(&page, &charts);
    common::browser::browser_check(&html, "twin-validation.png", &charts);
    // the twin runs where the engine model runs, flags as what-ifs, beyond-range loads flagged
    let o = run(&["sim", "--twin", twin.to_str().unwrap(), "--concurrency", "48", "--requests", "96"], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("concurrency 48 is beyond the measured 1–16: extrapolated"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_prefill_first_server_is_recovered_and_predicted_within_10_percent() {
    ground_truth("prefill-first", "prefill_first");
}

#[test]
fn a_chunked_prefill_server_is_recovered_and_predicted_within_10_percent() {
    ground_truth("chunked", "chunked");
}

#[test]
fn runs_of_two_servers_simulated_runs_and_runs_without_token_times_are_refused() {
    // its runs load the machine: not beside a ground truth's measurements
    let _serial = goodput_testkit::timing_lock();
    let dir = temp_dir("twin-refusals");
    let a = measure(&dir, "a", "chunked", &["--concurrency", "2", "--requests", "4", "--input-tokens", "64"]);
    let b = dir.join("b.json");
    let o = run(
        &[
            "bench",
            "--model",
            "llama-3.1-8b",
            "--requests",
            "4",
            "--output-tokens",
            "8",
            "--out",
            b.to_str().unwrap(),
            "-q",
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = run(&["fit", a.to_str().unwrap(), b.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("b.json") && e.contains("one fit is one server and model"), "{e}");
    let s = dir.join("s.json");
    let o = run(&["sim", "--requests", "4", "--out", s.to_str().unwrap(), "-q"], LIMIT);
    assert_eq!(o.status.code(), Some(0));
    let o = run(&["fit", s.to_str().unwrap()], LIMIT);
    assert!(text(&o.stderr).contains("a simulated run"), "{}", text(&o.stderr));
    // vLLM's own result file, imported: no per-token timestamps
    let vllm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/import");
    if let Some(f) = std::fs::read_dir(&vllm).ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains("vllm") && p.extension().is_some_and(|x| x == "json"))
    }) {
        let imported = dir.join("imported.json");
        let o = run(&["import", f.to_str().unwrap(), "--out", imported.to_str().unwrap()], LIMIT);
        if o.status.code() == Some(0) {
            let o = run(&["fit", imported.to_str().unwrap()], LIMIT);
            assert_eq!(o.status.code(), Some(2));
            assert!(text(&o.stderr).contains("per-token timestamps"), "{}", text(&o.stderr));
        }
    }
    // one request at a time, one prompt length: the twin is written, what it cannot know is named
    let one = measure(&dir, "one", "chunked", &["--concurrency", "1", "--requests", "4", "--input-tokens", "64"]);
    let twin = dir.join("t.json");
    let o = run(&["fit", one.to_str().unwrap(), "--out", twin.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&twin).unwrap()).unwrap();
    let named =
        t["unidentified"].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()).collect::<Vec<_>>();
    for p in ["per_prefill_token_s", "per_decode_seq_s", "max_num_seqs", "scheduling"] {
        assert!(named.iter().any(|u| u.starts_with(p)), "{p}: {named:?}");
    }
    assert!(text(&o.stdout).contains("not identified"), "{}", text(&o.stdout));
    // a run the client could not keep up with: the twin is written, and says it models the client
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    doc["runs"][0]["summary"]["verdict"] = "client_bound".into();
    let bound = dir.join("bound.json");
    std::fs::write(&bound, serde_json::to_string(&doc).unwrap()).unwrap();
    let o = run(&["fit", bound.to_str().unwrap(), "--out", twin.to_str().unwrap()], LIMIT);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("bound.json: the run was client-bound"), "{}", text(&o.stdout));
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&twin).unwrap()).unwrap();
    assert!(twin_schema_errors(&t).is_empty(), "{:?}", twin_schema_errors(&t));
    assert!(t["warnings"][0].as_str().unwrap().contains("client-bound"), "{t}");
}
