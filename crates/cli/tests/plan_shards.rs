//! `goodput plan --shard I/N` and `goodput merge` of plan shards: a search split into 2 or 3
//! shards and merged ranks the same candidates, with the same numbers, in the same order, with
//! the same Pareto front, as the whole search in one process; merges of shards of different
//! searches, duplicate shards and missing shards are refused (missing ones allowed with
//! --allow-partial, which says which candidates are missing).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// A tiny search: 2 GPUs × 2 TPs × 2 engines = 8 candidates, 2 of which do not fit (ties in the
/// ranking, which the merge must break as the whole search does: by grid order).
fn plan(dir: &Path, name: &str, model: &str, shard: Option<&str>) -> PathBuf {
    let out = dir.join(name);
    let mut argv = vec![
        "plan",
        "--model",
        model,
        "--gpus",
        "h100,h200",
        "--tp",
        "1,4",
        "--dtype",
        "fp8",
        "--engines",
        "vllm,sglang",
        "--input-tokens",
        "256",
        "--output-tokens",
        "64",
        "--slo",
        "ttft<=1s,tpot<=100ms",
        "--attainment",
        "0.9",
        "--step-time",
        "5s",
        "--precision",
        "0.25",
        "--target-rate",
        "20",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ];
    if let Some(s) = shard {
        argv.extend(["--shard", s]);
    }
    let o = run(&argv, Duration::from_secs(300));
    assert_eq!(o.status.code(), Some(0), "{argv:?}\n{}\n{}", text(&o.stdout), text(&o.stderr));
    out
}

fn merge(files: &[&Path], out: &Path, extra: &[&str]) -> std::process::Output {
    let mut argv: Vec<&str> = vec!["merge"];
    argv.extend(files.iter().map(|f| f.to_str().unwrap()));
    argv.extend(["--out", out.to_str().unwrap(), "-q"]);
    argv.extend_from_slice(extra);
    run(&argv, Duration::from_secs(60))
}

#[test]
fn merged_plan_shards_equal_the_whole_search() {
    let dir = temp_dir("plan-shards-merge");
    let whole = load_valid(&plan(&dir, "whole.json", "llama-3.1-70b", None));
    let whole = &whole["plan"];
    let candidates = whole["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 8, "{whole}");
    assert_eq!(whole["grid_size"], 8);
    assert!(whole.get("shard").is_none(), "{whole}");
    assert!(candidates.iter().filter(|c| c["fits"] == false).count() >= 2, "ties to break: {whole}");
    for n in [2u32, 3] {
        let mut files = Vec::new();
        for i in 0..n {
            let f = plan(&dir, &format!("shard-{i}-of-{n}.json"), "llama-3.1-70b", Some(&format!("{i}/{n}")));
            let doc = load_valid(&f);
            let p = &doc["plan"];
            assert_eq!((p["shard"]["index"].as_u64(), p["shard"]["count"].as_u64()), (Some(i as u64), Some(n as u64)));
            assert_eq!(p["grid_size"], 8);
            // only its own candidates: grid index k with k mod N = I
            let ks: Vec<u64> =
                p["candidates"].as_array().unwrap().iter().map(|c| c["grid_index"].as_u64().unwrap()).collect();
            let mut sorted = ks.clone();
            sorted.sort();
            assert_eq!(sorted, (0..8u64).filter(|k| k % n as u64 == i as u64).collect::<Vec<_>>(), "{p}");
            files.push(f);
        }
        // any order of the files
        files.reverse();
        let out = dir.join(format!("merged-{n}.json"));
        let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let o = merge(&refs, &out, &[]);
        assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
        assert!(text(&o.stdout).contains("8 of 8 candidates"), "{}", text(&o.stdout));
        let merged = load_valid(&out);
        let m = &merged["plan"];
        assert_eq!(m["candidates"], whole["candidates"], "N = {n}: the ranked candidates");
        assert_eq!(m["pareto"], whole["pareto"], "N = {n}: the Pareto front");
        for field in ["model", "workload", "slo", "attainment_target", "target_rate", "seed", "grid_size"] {
            assert_eq!(m[field], whole[field], "N = {n}: {field}");
        }
        assert!(m.get("shard").is_none() && m.get("missing_candidates").is_none(), "{m}");
        // elapsed: the longest shard's
        let longest = files.iter().map(|f| load_valid(f)["plan"]["elapsed_s"].as_f64().unwrap()).fold(0.0, f64::max);
        assert_eq!(m["elapsed_s"].as_f64().unwrap(), longest);
    }
}

#[test]
fn plan_merge_refuses_other_searches_duplicates_and_missing_shards() {
    let dir = temp_dir("plan-shards-refuse");
    let s0 = plan(&dir, "s0.json", "llama-3.1-70b", Some("0/2"));
    let s1 = plan(&dir, "s1.json", "llama-3.1-70b", Some("1/2"));
    let other = plan(&dir, "other.json", "llama-3.1-8b", Some("1/2"));
    let out = dir.join("all.json");
    let refused = |files: &[&Path], extra: &[&str], want: &[&str]| {
        let o = merge(files, &out, extra);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{files:?}: {err}");
        assert!(err.starts_with("goodput: merge refused: "), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        for w in want {
            assert!(err.contains(w), "{files:?}: want {w:?} in {err}");
        }
        assert!(!out.exists(), "nothing written on refusal");
    };
    refused(&[&s0, &other], &[], &["other.json", "another search", "model"]);
    refused(&[&s0, &s1, &s0], &[], &["s0.json: shard 0/2 is already given by"]);
    refused(&[&s0], &[], &["shard 1/2 missing", "--allow-partial"]);
    // a partial merge says which candidates are missing: the odd grid indices
    let o = merge(&[&s0], &out, &["--allow-partial"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("grid indices 1, 3, 5, 7 (of 8)"), "{}", text(&o.stderr));
    let doc = load_valid(&out);
    assert_eq!(doc["plan"]["missing_candidates"], serde_json::json!([1, 3, 5, 7]));
    assert_eq!(doc["plan"]["candidates"].as_array().unwrap().len(), 4);
}

#[test]
fn a_bad_plan_shard_exits_2_naming_the_flag() {
    for bad in ["2/2", "0/0", "1"] {
        let o = run(&["plan", "--preset", "chat", "--shard", bad], Duration::from_secs(20));
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
        assert!(text(&o.stderr).starts_with("goodput: --shard:"), "{bad}: {}", text(&o.stderr));
    }
}
