//! Shards (`--shard I/N`), `goodput merge`, `goodput k8s` and the Dockerfile.
//!
//! **Merge equals the whole run.** A simulated shard's engine sees only its own share of the
//! load, so on an engine where requests contend (one replica batching them) a shard's latencies
//! cannot equal the whole run's, whatever the dealing. The tests therefore check two things:
//!
//! 1. the schedule, for every N in 1..=4 and every kind of load: the merged run's requests are
//!    exactly the single process's (ids for an open loop, scheduled times, prompt and output
//!    lengths, users, sessions and turns);
//! 2. the per-request metrics and the percentiles, exactly, on a deployment where requests do
//!    not interact: 16 replicas behind a least-loaded router with prefix caching off, at a load
//!    that keeps far fewer requests in flight than replicas, so every request runs alone on an
//!    idle replica in the whole run and in every shard alike.
//!
//! Closed loops are bounded by `--duration`: a closed loop's request budget is spent by
//! whichever users ask first, which depends on timing; a duration bounds each user on its own.
//! A closed loop's sessions are dealt to shards by id, so which user sends which session differs
//! from one process's (whose users take sessions in the order they ask): the comparison is by
//! (user, scheduled time), with equal lengths (fixed lengths here).

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);
/// Requests never meet in the engine (see the module documentation).
const ALONE: [&str; 6] = ["--replicas", "16", "--router", "least-loaded", "--prefix-caching", "off"];

fn sim(dir: &std::path::Path, name: &str, args: &[&str], shard: Option<(u32, u32)>) -> std::path::PathBuf {
    let out = dir.join(name);
    let s = shard.map(|(i, n)| format!("{i}/{n}"));
    let mut a = vec!["sim"];
    a.extend_from_slice(args);
    a.extend_from_slice(&ALONE);
    if let Some(s) = &s {
        a.extend_from_slice(&["--shard", s]);
    }
    a.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
    let o = run(&a, LIMIT);
    assert_eq!(o.status.code(), Some(0), "{a:?}: {}", text(&o.stderr));
    out
}

fn merge(files: &[std::path::PathBuf], out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut a: Vec<String> = vec!["merge".into()];
    a.extend(files.iter().map(|f| f.display().to_string()));
    a.extend(["--out".into(), out.display().to_string(), "-q".into()]);
    a.extend(extra.iter().map(|s| s.to_string()));
    run(&a.iter().map(String::as_str).collect::<Vec<_>>(), LIMIT)
}

/// What a record must keep across sharding: its schedule, lengths and measured times.
fn key(r: &Value, with_ids: bool, with_session: bool) -> String {
    let f = |k: &str| r[k].to_string();
    let mut k = format!(
        "user={} sched={:.6} in={} out={} req={} sent={} events={} end={}",
        f("user"),
        r["scheduled_ms"].as_f64().unwrap(),
        f("input_tokens"),
        f("output_tokens"),
        f("requested_output_tokens"),
        f("sent_ms"),
        f("event_ms"),
        f("end_ms")
    );
    if with_ids {
        k = format!("id={} {k}", f("id"));
    }
    if with_session {
        k = format!("session={} turn={} {k}", f("session"), f("turn"));
    }
    k
}

fn keys(doc: &Value, with_ids: bool, with_session: bool) -> Vec<String> {
    let mut v: Vec<String> =
        doc["runs"][0]["requests"].as_array().unwrap().iter().map(|r| key(r, with_ids, with_session)).collect();
    v.sort();
    v
}

fn percentiles(doc: &Value) -> Vec<(String, Value)> {
    let s = &doc["runs"][0]["summary"];
    let mut v = Vec::new();
    for m in ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"] {
        for p in ["mean", "p50", "p90", "p99"] {
            v.push((format!("{m}.{p}"), s[m][p].clone()));
        }
    }
    for t in ["completed", "output_tokens", "input_tokens"] {
        v.push((t.into(), s[t].clone()));
    }
    v
}

/// N = 1..=4 shards of `args`, merged, against one process.
fn merge_equals_whole(name: &str, args: &[&str], with_ids: bool, with_session: bool) {
    let dir = temp_dir(name);
    let whole = load_valid(&sim(&dir, "whole.json", args, None));
    let want = keys(&whole, with_ids, with_session);
    assert!(want.len() >= 20, "{name}: {} requests", want.len());
    for n in 1..=4u32 {
        let files: Vec<_> = (0..n).map(|i| sim(&dir, &format!("s{i}of{n}.json"), args, Some((i, n)))).collect();
        for (i, f) in files.iter().enumerate() {
            let doc = load_valid(f);
            assert_eq!(doc["runs"][0]["plan"]["load"]["shard"], serde_json::json!({ "index": i, "count": n }));
            assert!(doc["runs"][0]["requests"].as_array().unwrap().iter().all(|r| r["shard"] == i));
        }
        let out = dir.join(format!("merged{n}.json"));
        let o = merge(&files, &out, &[]);
        assert_eq!(o.status.code(), Some(0), "{name} {n}: {}", text(&o.stderr));
        let merged = load_valid(&out);
        assert_eq!(keys(&merged, with_ids, with_session), want, "{name}: {n} shards' records");
        assert_eq!(percentiles(&merged), percentiles(&whole), "{name}: {n} shards' percentiles");
    }
}

#[test]
fn merged_open_loop_shards_equal_the_whole_run() {
    let args = ["--rate", "1", "--requests", "40", "--input-tokens", "uniform:32..256", "--output-tokens", "16"];
    merge_equals_whole("open", &args, true, false);
}

#[test]
fn merged_closed_loop_shards_equal_the_whole_run() {
    let args = [
        "--concurrency",
        "4",
        "--think-time",
        "exp:2s",
        "--duration",
        "20s",
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
    ];
    merge_equals_whole("closed", &args, false, false);
}

#[test]
fn merged_session_shards_equal_the_whole_run() {
    let dataset = format!("sharegpt:{}/../../fixtures/sharegpt_v3_multiturn_8conv.json", env!("CARGO_MANIFEST_DIR"));
    let args = ["--dataset", &dataset, "--sessions", "--think-time", "3s", "--rate", "0.2", "--requests", "30"];
    merge_equals_whole("sessions", &args, false, true);
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn three_bench_processes_with_a_shared_start_merge_to_the_planned_rate() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server =
        bin().args(["serve", "--port", &port.to_string()]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let _server = Killed(server);
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "goodput serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://127.0.0.1:{port}");
    let dir = temp_dir("bench-shards");
    let at_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 2000;
    let at = at_ms.to_string();
    let (rate, requests) = (60.0, 240u64);
    let children: Vec<(Child, std::path::PathBuf)> = (0..3)
        .map(|i| {
            let out = dir.join(format!("shard-{i}.json"));
            let shard = format!("{i}/3");
            let child = bin()
                .args(["bench", "--url", &url, "--profile", "constant", "--rate", &rate.to_string()])
                .args(["--requests", &requests.to_string(), "--input-tokens", "32", "--output-tokens", "8"])
                .args(["--shard", &shard, "--start-at", &at, "--out", out.to_str().unwrap(), "-q"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut files = Vec::new();
    for (child, out) in children {
        let o = wait_with_deadline(child, LIMIT);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let doc = load_valid(&out);
        let clock = &doc["runs"][0]["plan"]["load"]["start_at"]["clock"];
        assert!(clock["late_ms"].as_f64().unwrap().abs() < 1000.0, "{clock}");
        assert!(clock["clock_uncertainty_ms"].as_f64().unwrap() >= 0.0);
        files.push(out);
    }
    let merged_path = dir.join("all.json");
    let o = merge(&files, &merged_path, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let merged = load_valid(&merged_path);
    let run = &merged["runs"][0];
    let recs = run["requests"].as_array().unwrap();
    assert_eq!(recs.len() as u64, requests);
    let mut ids: Vec<u64> = recs.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, (0..requests).collect::<Vec<_>>(), "global ids, each once");
    // the send rate over the union of the shards (first to last send) against the plan's
    let sent: Vec<f64> = recs.iter().filter_map(|r| r["sent_ms"].as_f64()).collect();
    let span_s = (sent.iter().copied().fold(f64::MIN, f64::max) - sent.iter().copied().fold(f64::MAX, f64::min)) / 1e3;
    let achieved = (requests - 1) as f64 / span_s;
    let lag = &run["summary"]["schedule_lag_ms"];
    println!(
        "3 shards: {achieved:.2} req/s sent (plan {rate}); merged schedule lag p50 {} ms, p99 {} ms, max {} ms",
        lag["p50"], lag["p99"], lag["max"]
    );
    assert!((achieved / rate - 1.0).abs() <= 0.02, "achieved {achieved:.3} req/s against {rate}");
    assert!(lag["p99"].is_number(), "the merged schedule lag is reported: {lag}");
}

/// A sharded sim document, quick to make, for the refusal cases.
fn shard_doc(dir: &std::path::Path, name: &str, shard: &str, extra: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    let mut a = vec!["sim", "--rate", "5", "--requests", "12", "--shard", shard];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
    let o = run(&a, LIMIT);
    assert_eq!(o.status.code(), Some(0), "{a:?}: {}", text(&o.stderr));
    out
}

#[test]
fn merge_refuses_with_one_line_naming_the_file() {
    let dir = temp_dir("refusals");
    let s0 = shard_doc(&dir, "s0.json", "0/3", &[]);
    let s1 = shard_doc(&dir, "s1.json", "1/3", &[]);
    let s2 = shard_doc(&dir, "s2.json", "2/3", &[]);
    let s1_seed = shard_doc(&dir, "s1-seed.json", "1/3", &["--seed", "9"]);
    let s1_plan = shard_doc(&dir, "s1-plan.json", "1/3", &["--output-tokens", "7"]);
    let s1_of4 = shard_doc(&dir, "s1of4.json", "1/4", &[]);
    let whole = dir.join("whole.json");
    assert_eq!(
        run(&["sim", "--rate", "5", "--requests", "12", "--out", whole.to_str().unwrap(), "-q"], LIMIT).status.code(),
        Some(0)
    );
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let missing = dir.join("missing.json");
    let out = dir.join("out.json");
    let name = |p: &std::path::PathBuf| p.display().to_string();
    let cases: Vec<(Vec<std::path::PathBuf>, String)> = vec![
        (vec![s0.clone(), missing.clone()], format!("cannot read {}: ", name(&missing))),
        (vec![s0.clone(), garbage.clone()], format!("{} is not a goodput result document: ", name(&garbage))),
        (vec![s0.clone(), whole.clone()], format!("{}: not a shard (written without --shard I/N)", name(&whole))),
        (
            vec![s0.clone(), s1_seed.clone(), s2.clone()],
            format!("{}: seed 9, but {} has seed 0", name(&s1_seed), name(&s0)),
        ),
        (
            vec![s0.clone(), s1_plan.clone(), s2.clone()],
            format!("{}: another plan than {} (the flags differ)", name(&s1_plan), name(&s0)),
        ),
        (
            vec![s0.clone(), s1.clone(), s1.clone()],
            format!("{}: shard 1/3 is already given by {}", name(&s1), name(&s1)),
        ),
        (
            vec![s0.clone(), s1_of4.clone()],
            format!("{}: shard 1/4 does not go with {} (shard 0/3): mixed shard counts", name(&s1_of4), name(&s0)),
        ),
        (vec![s0.clone(), s2.clone()], "shard 1/3 missing (merge them too, or pass --allow-partial)".into()),
        (vec![s0.clone()], "shards 1/3, 2/3 missing (merge them too, or pass --allow-partial)".into()),
    ];
    for (files, want) in cases {
        let o = merge(&files, &out, &[]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{files:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        let line = err.trim_end().strip_prefix("goodput: merge refused: ").unwrap_or_else(|| panic!("{err}"));
        assert!(line.starts_with(&want), "got:  {line}\nwant: {want}");
        assert!(!out.exists(), "nothing is written on a refusal");
    }
    // usage: no files, or --out over a shard
    assert_eq!(run(&["merge", "--out", out.to_str().unwrap()], LIMIT).status.code(), Some(2));
    let o = merge(&[s0.clone(), s1.clone(), s2.clone()], &s0, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // a partial merge says what is missing, on stderr and in the merged run
    let o = merge(&[s0.clone(), s2.clone()], &out, &["--allow-partial"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("shard 1/3 missing"), "{}", text(&o.stderr));
    let doc = load_valid(&out);
    let warnings = doc["runs"][0]["summary"]["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w["code"] == "shards_missing" && w["message"].as_str().unwrap().contains("1/3")));
    // and a full merge of the three is the whole run's 12 requests
    let o = merge(&[s2, s0, s1], &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let ids: Vec<u64> =
        load_valid(&out)["runs"][0]["requests"].as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..12).collect::<Vec<_>>());
}

#[test]
fn shard_and_start_at_are_validated_naming_the_flag() {
    for (args, want) in [
        (vec!["sim", "--shard", "3/3"], "goodput: --shard: I must be in 0..N (3 is not below 3)"),
        (vec!["sim", "--shard", "0/0"], "goodput: --shard: N must be at least 1, got 0"),
        (vec!["sim", "--shard", "one"], "goodput: --shard: expected I/N (e.g. 0/4), got \"one\""),
        (vec!["sim", "--start-at", "1000"], "goodput: --start-at: bench only"),
        (vec!["bench", "--start-at", "1000"], "goodput: --start-at: 1000 is "),
        (
            vec!["bench", "--start-at", "4102444800000"],
            "goodput: --start-at: 4102444800000 is more than 24 h in the future",
        ),
        (vec!["bench", "--start-at", "soon"], "goodput: --start-at: expected an RFC 3339 time"),
    ] {
        let o = run(&args, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(text(&o.stderr).starts_with(want), "{args:?}: {}", text(&o.stderr));
    }
}

#[test]
fn k8s_manifests_parse_and_carry_the_job_and_configmap_fields() {
    let o = run(
        &[
            "k8s",
            "--plan-from",
            "--url",
            "http://vllm:8000",
            "--concurrency",
            "2000",
            "--duration",
            "5m",
            "--shards",
            "4",
            "--image",
            "registry.example/goodput:1",
            "--namespace",
            "load",
            "--start-at",
            &(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 600_000)
                .to_string(),
        ],
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let yaml = text(&o.stdout);
    let docs: Vec<serde_norway::Value> = serde_norway::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
        .collect();
    let docs: Vec<Value> = docs.into_iter().map(|d| serde_json::to_value(d).unwrap()).collect();
    assert_eq!(docs.len(), 2, "{yaml}");
    let (cm, job) = (&docs[0], &docs[1]);
    assert_eq!((cm["apiVersion"].as_str(), cm["kind"].as_str()), (Some("v1"), Some("ConfigMap")));
    assert_eq!(cm["metadata"]["namespace"], "load");
    assert_eq!(cm["data"]["args"], "--url\nhttp://vllm:8000\n--concurrency\n2000\n--duration\n5m\n");
    let plan: Value = serde_json::from_str(cm["data"]["plan.json"].as_str().unwrap()).unwrap();
    assert_eq!(plan["shards"], 4);

    assert_eq!((job["apiVersion"].as_str(), job["kind"].as_str()), (Some("batch/v1"), Some("Job")));
    assert_eq!(job["metadata"]["namespace"], "load");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!((spec["completions"].as_u64(), spec["parallelism"].as_u64()), (Some(4), Some(4)));
    assert_eq!(spec["backoffLimit"], 0);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/goodput:1");
    assert_eq!(c["command"], serde_json::json!(["/bin/sh", "-c"]));
    let script = c["args"][0].as_str().unwrap();
    assert!(script.contains("goodput bench \"$@\" --shard \"$I/$SHARDS\" --start-at \"$START_AT\""), "{script}");
    assert!(script.contains("I=\"$JOB_COMPLETION_INDEX\""));
    assert!(script.contains("=== goodput shard $I begin ===") && script.contains("=== goodput shard $I end ==="));
    let env: Vec<(&str, &str)> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert_eq!(env[0], ("SHARDS", "4"));
    assert_eq!(env[1].0, "START_AT");
    assert!(env[1].1.ends_with('Z'));
    // 2,000 users over 4 shards: 500 streams each: 1.25 CPU (rounded up to 1300 m), 256 + 125 MiB
    assert_eq!(c["resources"]["requests"], serde_json::json!({ "cpu": "1300m", "memory": "381Mi" }));
    assert_eq!(c["resources"]["limits"], serde_json::json!({ "memory": "762Mi" }));
    assert_eq!(pod["volumes"][0]["configMap"]["name"], cm["metadata"]["name"]);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/etc/goodput");

    // every string is a string to any YAML reader: the start time is quoted (unquoted, YAML 1.1
    // tools read it as a timestamp, and the Kubernetes schema refuses it)
    assert!(yaml.contains(&format!("value: \"{}\"", env[1].1)), "{yaml}");

    // the flags are checked, naming the flag
    let o = run(&["k8s", "--plan-from", "--rate", "1", "--image", "g"], LIMIT);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).starts_with("goodput: --shards: required"), "{}", text(&o.stderr));
}

/// The manifests validate against the Kubernetes schema (`kubernetes-validate`, from PyPI; CI
/// installs it and sets GOODPUT_REQUIRE_K8S_VALIDATE).
#[test]
fn k8s_manifests_validate_against_the_kubernetes_schema() {
    let importable = std::process::Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !importable {
        assert!(
            std::env::var_os("GOODPUT_REQUIRE_K8S_VALIDATE").is_none(),
            "kubernetes-validate is required here (pip install kubernetes-validate)"
        );
        eprintln!("note: kubernetes-validate not installed (pip install kubernetes-validate): schema check skipped");
        return;
    }
    let dir = temp_dir("k8s-validate");
    for (i, extra) in [&["--namespace", "load", "--name", "bench-1"][..], &[][..]].iter().enumerate() {
        let mut args = vec!["k8s", "--plan-from", "--url", "http://vllm:8000", "--rate", "200", "--duration", "5m"];
        args.extend_from_slice(&["--shards", "3", "--image", "registry.example/goodput:1"]);
        args.extend_from_slice(extra);
        let o = run(&args, LIMIT);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let file = dir.join(format!("m{i}.yaml"));
        std::fs::write(&file, &o.stdout).unwrap();
        let v = std::process::Command::new("python3")
            .args(["-m", "kubernetes_validate", "--strict", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(v.status.success(), "{}\n{}\n{}", text(&v.stdout), text(&v.stderr), text(&o.stdout));
        assert!(text(&v.stdout).matches("passed").count() == 2, "{}", text(&v.stdout));
    }
}

/// The pod's script, run by a real shell against a stand-in `goodput`, prints the document
/// between the markers (what `kubectl logs` then collects); a document too large for the log
/// stays in the pod, which says so and waits to be copied from.
#[test]
fn the_pod_script_prints_the_result_between_markers() {
    let o = run(&["k8s", "--plan-from", "--requests", "5", "--shards", "2", "--image", "g"], LIMIT);
    assert_eq!(o.status.code(), Some(0));
    let docs: Vec<serde_norway::Value> = serde_norway::Deserializer::from_str(&text(&o.stdout))
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let job = serde_json::to_value(&docs[1]).unwrap();
    let script = job["spec"]["template"]["spec"]["containers"][0]["args"][0].as_str().unwrap().to_string();
    let dir = temp_dir("pod");
    let (etc, results, binp) = (dir.join("etc"), dir.join("results"), dir.join("bin"));
    for d in [&etc, &results, &binp] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(etc.join("args"), "--requests\n5\n").unwrap();
    // a stand-in goodput: writes its arguments as the "document" to the --out path
    let fake = "#!/bin/sh\nout=\"\"\nprev=\"\"\nfor a in \"$@\"; do [ \"$prev\" = --out ] && out=\"$a\"; prev=\"$a\"; done\necho \"{\\\"args\\\": \\\"$*\\\"}\" > \"$out\"\n";
    std::fs::write(binp.join("goodput"), fake).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(binp.join("goodput"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.replace("/etc/goodput", etc.to_str().unwrap()).replace("/results", results.to_str().unwrap());
    let o = std::process::Command::new("/bin/sh")
        .args(["-c", &script])
        .env("PATH", format!("{}:/usr/bin:/bin", binp.display()))
        .env("JOB_COMPLETION_INDEX", "1")
        .env("SHARDS", "2")
        .env("START_AT", "2030-01-01T00:00:00Z")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let log = text(&o.stdout);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.first(), Some(&"=== goodput shard 1 begin ==="), "{log}");
    assert_eq!(lines.last(), Some(&"=== goodput shard 1 end ==="), "{log}");
    let doc: Value = serde_json::from_str(lines[1]).unwrap();
    let args = doc["args"].as_str().unwrap();
    assert!(args.starts_with("bench --requests 5 --shard 1/2 --start-at 2030-01-01T00:00:00Z --out "), "{args}");

    // over the log's limit (made tiny here): not printed; the pod names the file and waits for
    // `/results/collected` (already there: no wait)
    let limit = goodput_k8s::LOG_LIMIT_BYTES.to_string();
    assert!(script.contains(&limit));
    let small = script.replace(&limit, "10");
    std::fs::write(results.join("collected"), "").unwrap();
    let o = std::process::Command::new("/bin/sh")
        .args(["-c", &small])
        .env("PATH", format!("{}:/usr/bin:/bin", binp.display()))
        .env("JOB_COMPLETION_INDEX", "1")
        .env("SHARDS", "2")
        .env("START_AT", "2030-01-01T00:00:00Z")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let log = text(&o.stdout);
    assert!(!log.contains("begin ==="), "{log}");
    assert!(log.contains("=== goodput shard 1 in ") && log.contains("kubectl cp"), "{log}");
}

#[test]
fn the_dockerfile_builds_the_binary_in_one_stage_and_runs_it_slim_in_another() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let froms: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "two stages: {froms:?}");
    assert!(froms[0].starts_with("FROM rust:1.") && froms[0].ends_with(" AS builder"), "{}", froms[0]);
    assert!(froms[1].starts_with("FROM debian:bookworm-slim") || froms[1].starts_with("FROM gcr.io/distroless/cc"));
    let run = lines.iter().find(|l| l.starts_with("RUN cargo build")).expect("a cargo build step");
    assert!(run.contains("--release") && run.contains("-p goodput"), "{run}");
    assert!(
        lines.iter().any(|l| l.starts_with("COPY --from=builder ") && l.contains("goodput")),
        "the binary is copied"
    );
    let user = lines.iter().rposition(|l| l.starts_with("USER ")).expect("a USER");
    assert!(!lines[user].ends_with(" root") && !lines[user].ends_with(" 0"), "non-root: {}", lines[user]);
    assert_eq!(lines.iter().find(|l| l.starts_with("ENTRYPOINT")), Some(&"ENTRYPOINT [\"goodput\"]"));
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target/"), "target/ stays out of the build context");
}
