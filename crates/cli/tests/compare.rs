//! `goodput compare` and `goodput check` end to end on simulated runs: the same workload and
//! seed with `--max-num-seqs 8` against 256 (a queue forms: a significant TTFT regression), a
//! same-config rerun (not flagged), and a different workload (refused unless `--force`).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{load_valid, run, temp_dir};

const LIMIT: Duration = Duration::from_secs(120);

fn sim(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut args =
        vec!["sim", "--concurrency", "32", "--requests", "300", "--seed", "3", "-q", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = run(&args, LIMIT);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    load_valid(&out);
    out
}

fn text(o: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn compare_and_check_flag_a_real_regression_and_not_a_rerun() {
    let dir = temp_dir("compare");
    let fast = sim(&dir, "fast.json", &["--max-num-seqs", "256"]);
    let again = sim(&dir, "again.json", &["--max-num-seqs", "256"]);
    let slow = sim(&dir, "slow.json", &["--max-num-seqs", "8"]);
    let other = sim(&dir, "other.json", &["--max-num-seqs", "256", "--input-tokens", "256"]);
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let cmp_json = dir.join("cmp.json");

    // compare: slow against fast flags TTFT; again against fast flags nothing
    let o = run(&["compare", &s(&fast), &s(&slow), &s(&again), "--out", &s(&cmp_json)], LIMIT);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cmp_json).unwrap()).unwrap();
    assert_eq!(doc["kind"], "comparison");
    let cmps = doc["comparisons"].as_array().unwrap();
    assert_eq!(cmps.len(), 2);
    let metric = |c: &serde_json::Value, m: &str| {
        c["metrics"].as_array().unwrap().iter().find(|d| d["metric"] == m).unwrap().clone()
    };
    for m in ["p50(ttft)", "p99(ttft)"] {
        let d = metric(&cmps[0], m);
        assert_eq!(d["significance"], "significant", "{m}: {d}");
        assert_eq!(d["regression"], true, "{m}: {d}");
        assert!(d["delta"].as_f64().unwrap() > 0.0);
    }
    assert!(cmps[1]["metrics"].as_array().unwrap().iter().all(|d| d["regression"] == false), "{}", cmps[1]);
    assert!(out.contains("significant regressions: ") && out.contains("p99(ttft)"), "{out}");
    assert!(out.contains("no significant regression"), "{out}");

    // check: the slow run fails its gate with one line per violated bound
    let gate = "p99(ttft)=10%,output_throughput=-5%,p50(tpot)=+50%";
    let o = run(&["check", &s(&slow), "--baseline", &s(&fast), "--max-regress", gate, "--require-significant"], LIMIT);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("REGRESSION p99(ttft): ") && lines[1].starts_with("REGRESSION output_throughput: "));
    // the rerun passes it
    let o = run(&["check", &s(&again), "--baseline", &s(&fast), "--max-regress", gate, "--require-significant"], LIMIT);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("all 3 bounds hold"), "{out}");
    // from a file, with its line named when a bound is wrong
    let file = dir.join("bounds.txt");
    std::fs::write(&file, "# latency\np99(ttft)=+20%\n").unwrap();
    let o = run(&["check", &s(&slow), "--baseline", &s(&fast), "--bounds-file", &s(&file)], LIMIT);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    std::fs::write(&file, "# latency\np99(ttft)=+20%\np99(ttft)=-20%\n").unwrap();
    let o = run(&["check", &s(&slow), "--baseline", &s(&fast), "--bounds-file", &s(&file)], LIMIT);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:3: ", file.display())), "{err}");
    let o = run(&["check", &s(&slow), "--baseline", &s(&fast), "--max-regress", "attainment=-1pt"], LIMIT);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("attainment is not available (the run has no SLO)"), "{err}");

    // a different workload is refused, naming the fields, unless --force
    let o = run(&["compare", &s(&fast), &s(&other)], LIMIT);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("input lengths (planned): 256 vs 512") && err.contains("--force"), "{err}");
    let o = run(&["check", &s(&other), "--baseline", &s(&fast), "--max-regress", "p99(ttft)=10%"], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["compare", &s(&fast), &s(&other), "--force"], LIMIT);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("compared although the workloads differ (--force)"), "{out}");

    // bad usage
    let o = run(&["compare", &s(&fast)], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["compare", &s(&fast), &s(&dir.join("missing.json"))], LIMIT);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.json"), "{err}");
    let o = run(&["check", &s(&slow), "--baseline", &s(&fast)], LIMIT);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--max-regress"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
