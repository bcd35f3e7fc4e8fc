//! The digital twin of a real server nobody here wrote: llama.cpp's `llama-server` (4 slots, one
//! thread). Fitted from short runs at concurrency 1 (two prompt lengths) and 4, told its slot
//! count (`--max-num-seqs 4`, its `-np`), it predicts concurrency 2, concurrency 8 (beyond its
//! slots: requests queue) and a Poisson run: mean TTFT, mean TPOT and output throughput within
//! ±15%. Its own test binary, so nothing else runs beside the measurements.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::llama::start;
use common::*;

const LIMIT: Duration = Duration::from_secs(600);

fn measure(url: &str, dir: &Path, name: &str, load: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}.json"));
    let mut args = vec!["bench", "--url", url, "--output-tokens", "32"];
    args.extend_from_slice(load);
    args.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
    let o = run(&args, LIMIT);
    assert_eq!(o.status.code(), Some(0), "{name}: {}\n{}", text(&o.stdout), text(&o.stderr));
    out
}

#[test]
#[ignore = "not yet within ±15% on llama.cpp (docs/twin.md, Validation tables): run with --ignored to measure"]
fn a_twin_of_llama_server_predicts_loads_it_never_ran_within_15_percent() {
    let Some((_server, url)) = start() else { return };
    let dir = temp_dir("llama-twin");
    // a first request warms the server up (its first prompt is slower)
    measure(&url, &dir, "warm", &["--concurrency", "1", "--requests", "2", "--input-tokens", "32"]);
    let train = [
        measure(&url, &dir, "c1a", &["--concurrency", "1", "--requests", "12", "--input-tokens", "64", "--seed", "1"]),
        measure(&url, &dir, "c1b", &["--concurrency", "1", "--requests", "12", "--input-tokens", "256", "--seed", "2"]),
        measure(&url, &dir, "c4", &["--concurrency", "4", "--requests", "24", "--input-tokens", "128", "--seed", "3"]),
    ];
    let held = [
        measure(&url, &dir, "h2", &["--concurrency", "2", "--requests", "16", "--input-tokens", "128", "--seed", "4"]),
        measure(&url, &dir, "h8", &["--concurrency", "8", "--requests", "24", "--input-tokens", "128", "--seed", "5"]),
        measure(&url, &dir, "hp", &["--rate", "0.5", "--requests", "16", "--input-tokens", "128", "--seed", "6"]),
    ];
    let twin = dir.join("twin.json");
    let report = dir.join("validation.json");
    let mut args: Vec<&str> = vec!["fit"];
    args.extend(train.iter().map(|p| p.to_str().unwrap()));
    args.extend_from_slice(&["--max-num-seqs", "4", "--out", twin.to_str().unwrap(), "--validate"]);
    args.extend(held.iter().map(|p| p.to_str().unwrap()));
    args.extend_from_slice(&["--report", report.to_str().unwrap()]);
    let o = run(&args, LIMIT);
    let shown = format!("{}\n{}", text(&o.stdout), text(&o.stderr));
    println!("{shown}");
    assert_eq!(o.status.code(), Some(0), "{shown}");
    let doc = load_valid(&report);
    for r in doc["validation"]["runs"].as_array().unwrap() {
        for (metric, stat) in [("ttft_ms", "mean"), ("tpot_ms", "mean"), ("output_tokens_per_s", "value")] {
            let m = r["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == metric && m["stat"] == stat);
            let ratio = m.and_then(|m| m["ratio"].as_f64()).unwrap_or(f64::NAN);
            assert!((ratio - 1.0).abs() <= 0.15, "{} {metric} {stat}: ×{ratio:.3}\n{shown}", r["file"]);
        }
    }
}
