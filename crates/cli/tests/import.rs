//! `goodput import`: every real vLLM result file in `../shared/data/vllm_bench_*` (skipped with a
//! note when absent) and every fixture in `fixtures/import/` becomes a schema-valid result
//! document whose numbers agree with the tool's own.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{load_valid, run, temp_dir, text};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `goodput import FILE [--from F] --out DIR/out.json`, expecting exit 0; the checked document.
fn import_ok(name: &str, file: &Path, from: Option<&str>) -> Value {
    let dir = temp_dir(name);
    let out = dir.join("out.json");
    let mut args = vec!["import", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"];
    if let Some(f) = from {
        args.extend_from_slice(&["--from", f]);
    }
    let o = run(&args, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(0), "{args:?}\nstdout: {}\nstderr: {}", text(&o.stdout), text(&o.stderr));
    load_valid(&out)
}

fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{what}: {a} vs {b}");
}

#[test]
fn real_vllm_files_import_and_agree_with_vllms_statistics() {
    let data = repo().join("../shared/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with("vllm_bench_"))
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("serving_") && n.ends_with(".json") && !n.ends_with(".commands.json")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        eprintln!("note: no vLLM result files under {}: skipped", data.display());
        return;
    }
    for f in &files {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        let doc = import_ok(&name, f, None);
        let src: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let r0 = &doc["runs"][0];
        assert_eq!(r0["target"]["kind"], "imported");
        assert_eq!(r0["target"]["tool"], "vllm");
        assert_eq!(r0["target"]["clock"], "per_request");
        let s = &r0["summary"];
        let n = src["num_prompts"].as_u64().unwrap();
        assert_eq!(r0["requests"].as_array().unwrap().len() as u64, n, "{name}");
        assert_eq!(s["completed"], src["completed"], "{name}");
        let failed = src["errors"].as_array().unwrap().iter().filter(|e| e.as_str() != Some("")).count();
        assert_eq!(s["failed"].as_u64().unwrap(), failed as u64, "{name}");
        // vLLM's own statistics, recomputed from the imported records
        let g = |v: &Value| v.as_f64().unwrap();
        close(g(&s["ttft_ms"]["mean"]), g(&src["mean_ttft_ms"]), &format!("{name} mean TTFT"));
        close(g(&s["ttft_ms"]["p50"]), g(&src["median_ttft_ms"]), &format!("{name} median TTFT"));
        close(g(&s["ttft_ms"]["std"]), g(&src["std_ttft_ms"]), &format!("{name} std TTFT"));
        close(g(&s["ttft_ms"]["p99"]), g(&src["p99_ttft_ms"]), &format!("{name} p99 TTFT"));
        // vLLM's ITL is the raw chunk gap: our chunk ITL
        close(g(&s["chunk_itl_ms"]["mean"]), g(&src["mean_itl_ms"]), &format!("{name} mean ITL"));
        close(g(&s["chunk_itl_ms"]["p99"]), g(&src["p99_itl_ms"]), &format!("{name} p99 ITL"));
        // TPOT: vLLM's (latency − ttft)/(N − 1) reads ttft from a second clock call (µs apart)
        assert!((g(&s["tpot_ms"]["mean"]) - g(&src["mean_tpot_ms"])).abs() < 1e-3, "{name} TPOT");
        close(g(&s["duration_s"]), g(&src["duration"]), &format!("{name} duration"));
        close(g(&s["request_throughput"]), g(&src["request_throughput"]), &format!("{name} req/s"));
        assert_eq!(s["output_tokens"], src["total_output_tokens"], "{name}");
        // nothing that needs send times
        assert_eq!(s["schedule_lag_ms"]["n"], 0);
        assert_eq!(s["ttft_sched_ms"]["n"], 0);
        let notes = r0["target"]["notes"].as_array().unwrap();
        assert!(notes.iter().any(|x| x.as_str().unwrap().starts_with("send times unknown")), "{notes:?}");
        // and the imported document reads back and renders
        let out = temp_dir(&format!("{name}-report")).join("r.json");
        std::fs::write(&out, serde_json::to_string(&doc).unwrap()).unwrap();
        let o = run(&["report", out.to_str().unwrap()], Duration::from_secs(60));
        assert_eq!(o.status.code(), Some(0), "report: {}", text(&o.stderr));
        assert!(text(&o.stdout).contains("TTFT"));
    }
}

#[test]
fn every_fixture_imports_to_a_valid_document() {
    let dir = repo().join("fixtures/import");
    let cases: [(&str, &str, usize); 4] = [
        ("vllm_small.json", "vllm", 1),
        ("guidellm_small.json", "guidellm", 2),
        ("aiperf_profile_export.jsonl", "aiperf", 1),
        ("aiperf_profile_export_aiperf.json", "aiperf", 1),
    ];
    for (file, tool, runs) in cases {
        let path = dir.join(file);
        // recognized without --from, and the same with it
        let doc = import_ok(file, &path, None);
        assert_eq!(doc["runs"].as_array().unwrap().len(), runs, "{file}");
        for r in doc["runs"].as_array().unwrap() {
            assert_eq!(r["target"]["tool"], tool, "{file}");
            assert!(!r["target"]["notes"].as_array().unwrap().is_empty(), "{file}");
        }
        let again = import_ok(&format!("{file}-from"), &path, Some(tool));
        assert_eq!(again["runs"][0]["summary"]["completed"], doc["runs"][0]["summary"]["completed"]);
    }
}

#[test]
fn two_imports_of_one_workload_compare_and_check() {
    let f = repo().join("fixtures/import/vllm_small.json");
    let a = temp_dir("import-cmp-a").join("a.json");
    let b = temp_dir("import-cmp-b").join("b.json");
    for out in [&a, &b] {
        let o = run(&["import", f.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"], Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    // the file name is the target's, not the workload's: the same workload compares
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
    let o = run(
        &["check", b.to_str().unwrap(), "--baseline", a.to_str().unwrap(), "--max-regress", "p99(ttft)=10%"],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
}

#[test]
fn an_slo_is_evaluated_on_import() {
    let f = repo().join("fixtures/import/aiperf_profile_export.jsonl");
    let dir = temp_dir("import-slo");
    let out = dir.join("o.json");
    let o = run(
        &["import", f.to_str().unwrap(), "--slo", "ttft<=40ms,tpot<=50ms", "--out", out.to_str().unwrap(), "-q"],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc = load_valid(&out);
    let slo = &doc["runs"][0]["summary"]["slo"];
    // TTFTs 41.96 and 33.25 ms, one failure: 1 of 3 good
    assert_eq!((slo["attempted"].as_u64(), slo["good"].as_u64()), (Some(3), Some(1)), "{slo}");
    // summary statistics only: refused, naming the flag
    let f = repo().join("fixtures/import/aiperf_profile_export_aiperf.json");
    let o = run(
        &["import", f.to_str().unwrap(), "--slo", "ttft<=40ms", "--out", out.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--slo"), "{}", text(&o.stderr));
}

#[test]
fn bad_usage_and_bad_files_exit_2_naming_them() {
    let dir = temp_dir("import-bad");
    let out = dir.join("o.json");
    let f = repo().join("fixtures/import/vllm_small.json");
    let o = run(
        &["import", f.to_str().unwrap(), "--from", "locust", "--out", out.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--from"), "{}", text(&o.stderr));
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"ttfts\": [0.1, \"x\"]}").unwrap();
    let o = run(&["import", bad.to_str().unwrap(), "--out", out.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(e.contains("bad.json") && e.contains("ttfts[1]"), "{e}");
    assert!(!out.exists());
}
