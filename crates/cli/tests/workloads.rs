//! Every profile and dataset end to end, against the embedded engine and in `sim`; measurement
//! windows; schedule-anchored latency under a concurrency cap; the client self-check; exporting
//! and replaying a schedule.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use goodput_testkit::{ScriptedServer, steady_stream};
use serde_json::Value;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(name).display().to_string()
}

fn doc(name: &str, args: &[&str]) -> Value {
    run_ok(name, args, Duration::from_secs(120)).0
}

fn summary(d: &Value) -> &Value {
    &d["runs"][0]["summary"]
}

/// Fast engine settings so that bench runs against the embedded engine take a second or two.
const FAST: &[&str] = &["--gpu", "b200", "--dtype", "fp8", "--input-tokens", "64", "--output-tokens", "8"];

fn both(name: &str, args: &[&str], check: impl Fn(&str, &Value)) {
    for cmd in ["sim", "bench"] {
        let mut a = vec![cmd];
        a.extend_from_slice(args);
        a.extend_from_slice(FAST);
        let d = doc(&format!("{name}-{cmd}"), &a);
        check(cmd, &d);
    }
}

#[test]
fn every_load_profile_runs_in_bench_and_sim() {
    both("sync", &["--profile", "synchronous", "--requests", "6"], |cmd, d| {
        assert_eq!(summary(d)["completed"], 6, "{cmd}");
        assert!(summary(d)["mean_concurrency"].as_f64().unwrap() <= 1.01, "{cmd}: one at a time");
    });
    both(
        "concurrent",
        &["--profile", "concurrent", "--concurrency", "4", "--think-time", "20ms", "--requests", "12"],
        |cmd, d| {
            assert_eq!(summary(d)["completed"], 12, "{cmd}");
            assert_eq!(d["runs"][0]["plan"]["load"]["think_time"], "0.02s");
        },
    );
    both("constant", &["--profile", "constant", "--rate", "40", "--requests", "12"], |cmd, d| {
        let r = &d["runs"][0]["requests"];
        let a: Vec<f64> = r.as_array().unwrap().iter().map(|x| x["scheduled_ms"].as_f64().unwrap()).collect();
        let mut a = a.clone();
        a.sort_by(f64::total_cmp);
        assert!(a.windows(2).all(|w| (w[1] - w[0] - 25.0).abs() < 0.01), "{cmd}: evenly spaced 25 ms apart: {a:?}");
        assert_eq!(summary(d)["offered_rate"], 40.0);
    });
    both("poisson", &["--profile", "poisson", "--rate", "50", "--requests", "15"], |cmd, d| {
        assert_eq!(summary(d)["completed"], 15, "{cmd}");
    });
    both("gamma", &["--profile", "gamma", "--rate", "50", "--burstiness", "0.5", "--requests", "15"], |cmd, d| {
        assert_eq!(d["runs"][0]["plan"]["load"]["load"]["arrivals"]["burstiness"], 0.5, "{cmd}");
    });
    both("throughput", &["--profile", "throughput", "--max-concurrency", "3", "--requests", "9"], |cmd, d| {
        let reqs = d["runs"][0]["requests"].as_array().unwrap();
        assert!(reqs.iter().all(|r| r["scheduled_ms"].as_f64().unwrap() < 1.0), "{cmd}: all scheduled at t0");
        assert!(
            reqs.iter().filter(|r| r["cap_wait_ms"].as_f64().unwrap() > 0.0).count() >= 6,
            "{cmd}: 6 wait for a slot"
        );
    });
    both(
        "ramp",
        &["--profile", "ramp", "--rate-start", "10", "--rate", "60", "--ramp-duration", "0.5s", "--requests", "20"],
        |cmd, d| {
            assert_eq!(summary(d)["completed"], 20, "{cmd}");
        },
    );
    both(
        "replay",
        &[
            "--profile",
            "replay",
            "--dataset",
            &format!("azure:{}", fixture("azure_conv_300.csv")),
            "--time-scale",
            "0.002",
            "--requests",
            "15",
            "--chunked-prefill",
        ],
        |cmd, d| {
            // scaled trace times: the 15th Azure arrival of the slice, times 0.002
            assert_eq!(summary(d)["completed"], 15, "{cmd}");
            assert_eq!(d["runs"][0]["requests"][1]["input_tokens"], 396, "{cmd}: the second row of the trace");
            assert_eq!(d["runs"][0]["requests"][1]["requested_output_tokens"], 109);
        },
    );
}

#[test]
fn sweep_measures_synchronous_throughput_and_rates_between() {
    both("sweep", &["--profile", "sweep", "--sweep-points", "2", "--requests", "8", "--duration", "5s"], |cmd, d| {
        let names: Vec<&str> = d["runs"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names.len(), 4, "{cmd}: {names:?}");
        assert_eq!(&names[..2], &["synchronous", "throughput"]);
        assert!(names[2].starts_with("constant@") && names[3].starts_with("constant@"));
        let lo = d["runs"][0]["summary"]["request_throughput"].as_f64().unwrap();
        let hi = d["runs"][1]["summary"]["request_throughput"].as_f64().unwrap();
        let r1 = d["runs"][2]["summary"]["offered_rate"].as_f64().unwrap();
        assert!(
            (r1 - (lo + (hi - lo) / 3.0)).abs() < 0.01 * hi,
            "{cmd}: first rate a third of the way: {lo} {hi} {r1}"
        );
    });
}

#[test]
fn every_dataset_runs_in_bench_and_sim() {
    let sg = fixture("sharegpt_v3_first_prompt_200.json");
    both("sharegpt", &["--dataset", &format!("sharegpt:{sg}"), "--requests", "10", "--concurrency", "4"], |cmd, d| {
        assert_eq!(summary(d)["completed"], 10, "{cmd}");
        // no replies in this file: max_tokens from --output-tokens
        assert!(d["runs"][0]["requests"].as_array().unwrap().iter().all(|r| r["requested_output_tokens"] == 8));
    });
    let multi = fixture("sharegpt_v3_multiturn_8conv.json");
    both(
        "sessions",
        &[
            "--dataset",
            &format!("sharegpt:{multi}"),
            "--sessions",
            "--requests",
            "12",
            "--concurrency",
            "2",
            "--chunked-prefill",
        ],
        |cmd, d| {
            let reqs = d["runs"][0]["requests"].as_array().unwrap();
            assert!(
                reqs.iter().all(|r| r["session"].is_u64() && r["turn"].is_u64()),
                "{cmd}: per-turn records carry session and turn"
            );
            assert!(reqs.iter().any(|r| r["turn"].as_u64().unwrap() >= 1));
            let s = summary(d);
            assert!(
                s["ttft_first_turn_ms"]["n"].as_u64().unwrap() >= 1
                    && s["ttft_later_turns_ms"]["n"].as_u64().unwrap() >= 1
            );
            // later turns resend the conversation: their prompts are longer than the first turn's
            let first = reqs.iter().find(|r| r["turn"] == 0).unwrap()["input_tokens"].as_u64().unwrap();
            let s0 = reqs.iter().find(|r| r["turn"] == 0).unwrap()["session"].clone();
            let second =
                reqs.iter().find(|r| r["turn"] == 1 && r["session"] == s0).map(|r| r["input_tokens"].as_u64().unwrap());
            if let Some(second) = second {
                assert!(second > first, "{cmd}: {second} > {first}");
            }
        },
    );
    let jl = fixture("replay_small.jsonl");
    both("jsonl", &["--dataset", &format!("jsonl:{jl}"), "--profile", "replay"], |cmd, d| {
        let reqs = d["runs"][0]["requests"].as_array().unwrap();
        assert_eq!(reqs.len(), 4, "{cmd}: the whole file, once");
        let want = [24, 16, 8, 12];
        for (r, w) in reqs.iter().zip(want) {
            assert_eq!(r["requested_output_tokens"], w);
        }
    });
    let mc = fixture("mooncake_conversation_60.jsonl");
    both(
        "mooncake",
        &[
            "--dataset",
            &format!("mooncake:{mc}"),
            "--profile",
            "replay",
            "--time-scale",
            "0.0005",
            "--requests",
            "6",
            "--chunked-prefill",
        ],
        |cmd, d| {
            let reqs = d["runs"][0]["requests"].as_array().unwrap();
            assert_eq!(reqs.len(), 6, "{cmd}");
            // the trace's first line (three arrive together at t = 0, sent in any order)
            let first = reqs.iter().find(|r| r["input_tokens"] == 6758).expect("the first line's request");
            assert_eq!(first["requested_output_tokens"], 500, "{cmd}");
        },
    );
}

#[test]
fn synthetic_sessions_with_shared_prefixes() {
    let args = [
        "--sessions",
        "--turns",
        "3",
        "--think-time",
        "5ms",
        "--prefix-groups",
        "2",
        "--prefix-tokens",
        "32",
        "--concurrency",
        "2",
        "--requests",
        "12",
        "--api",
        "chat",
    ];
    for cmd in ["sim", "bench"] {
        let mut a = vec![cmd];
        a.extend_from_slice(&args);
        a.extend_from_slice(FAST);
        if cmd == "sim" {
            a.retain(|x| *x != "--api" && *x != "chat");
        }
        let d = doc(&format!("synth-sessions-{cmd}"), &a);
        let reqs = d["runs"][0]["requests"].as_array().unwrap();
        assert_eq!(reqs.len(), 12, "{cmd}");
        assert!(reqs.iter().all(|r| r["error"].is_null()), "{cmd}");
        // four sessions of three turns
        for session in 0..4u64 {
            let turns: Vec<&Value> = reqs.iter().filter(|r| r["session"] == session).collect();
            let mut idx: Vec<u64> = turns.iter().map(|r| r["turn"].as_u64().unwrap()).collect();
            idx.sort();
            assert_eq!(idx, [0, 1, 2], "{cmd}: session {session}");
            // each turn resends the conversation so far: prompts grow
            let len = |t: u64| turns.iter().find(|r| r["turn"] == t).unwrap()["input_tokens"].as_u64().unwrap();
            assert!(len(0) < len(1) && len(1) < len(2), "{cmd}: {} {} {}", len(0), len(1), len(2));
            // the first turn: a 32-token shared system prompt and a 64-token user message (the chat
            // template adds a few)
            assert!((96..=120).contains(&len(0)), "{cmd}: {}", len(0));
        }
        let s = summary(&d);
        assert_eq!(s["ttft_first_turn_ms"]["n"], 4, "{cmd}");
        assert_eq!(s["ttft_later_turns_ms"]["n"], 8, "{cmd}");
    }
}

#[test]
fn warmup_and_cooldown_narrow_the_window() {
    both("window", &["--concurrency", "2", "--requests", "12", "--warmup", "2", "--cooldown", "2"], |cmd, d| {
        let s = summary(d);
        assert_eq!(s["excluded"], 4, "{cmd}");
        assert_eq!(s["attempted"], 8, "{cmd}");
        assert_eq!(d["runs"][0]["summary_full"]["attempted"], 12, "{cmd}");
    });
}

#[test]
fn a_concurrency_cap_shows_in_schedule_anchored_latency_not_in_lag() {
    // arrivals every 5 ms on average, two slots of ~25 ms each: most arrivals wait for a slot
    both("cap", &["--profile", "poisson", "--rate", "200", "--max-concurrency", "2", "--requests", "16"], |cmd, d| {
        let s = summary(d);
        let (ttft, sched) = (s["ttft_ms"]["mean"].as_f64().unwrap(), s["ttft_sched_ms"]["mean"].as_f64().unwrap());
        assert!(sched > 2.0 * ttft, "{cmd}: schedule-anchored TTFT {sched:.1} ms vs service TTFT {ttft:.1} ms");
        let e2e = s["e2e_ms"]["mean"].as_f64().unwrap();
        assert!(s["e2e_sched_ms"]["mean"].as_f64().unwrap() > e2e, "{cmd}");
        // the wait for a slot is client queueing, not lag (timing-sensitive checks stay loose:
        // other tests run beside this one)
        let queue = s["client_queue_ms"]["mean"].as_f64().unwrap();
        let lag = s["schedule_lag_ms"]["p50"].as_f64().unwrap();
        assert!(queue > 10.0 && lag < 0.1 * queue, "{cmd}: queue {queue:.2} ms, lag p50 {lag:.3} ms");
        if cmd == "sim" {
            assert_eq!(s["verdict"], "ok", "waiting for a cap is not the client's fault");
        }
    });
}

#[test]
fn a_starved_client_is_flagged() {
    // 100,000 req/s of real HTTP requests is far beyond what two cores can send
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = rt.block_on(ScriptedServer::start(|_| steady_stream(0.0, 0.0, 1, false)));
    let dir = temp_dir("starved");
    let out = dir.join("s.json");
    let o = run(
        &[
            "bench",
            "--url",
            &server.url(),
            "--model",
            "m",
            "--rate",
            "100000",
            "--requests",
            "3000",
            "--input-tokens",
            "8",
            "--output-tokens",
            "1",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let d = load_valid(&out);
    assert_eq!(summary(&d)["verdict"], "client_bound");
    // the warning says what it measured against what (rates, lag against TTFT) and what it distorts
    let out = text(&o.stdout);
    assert!(out.contains("req/s offered;"), "{out}");
    assert!(out.contains("distorted by up to") || out.contains("lighter load than asked for"), "{out}");
}

#[test]
fn an_exported_schedule_replays_exactly() {
    let dir = temp_dir("export");
    let sched = dir.join("schedule.jsonl");
    let first = doc(
        "export-1",
        &[
            "bench",
            "--rate",
            "30",
            "--requests",
            "12",
            "--export-schedule",
            sched.to_str().unwrap(),
            "--gpu",
            "b200",
            "--input-tokens",
            "uniform:20..80",
            "--output-tokens",
            "uniform:2..9",
            "--seed",
            "4",
        ],
    );
    let lines = std::fs::read_to_string(&sched).unwrap();
    assert_eq!(lines.lines().count(), 12);
    let replay = doc(
        "export-2",
        &["bench", "--dataset", &format!("jsonl:{}", sched.display()), "--profile", "replay", "--gpu", "b200"],
    );
    let a = first["runs"][0]["requests"].as_array().unwrap();
    let b = replay["runs"][0]["requests"].as_array().unwrap();
    assert_eq!(a.len(), b.len());
    let t0 = a.iter().map(|r| r["scheduled_ms"].as_f64().unwrap()).fold(f64::MAX, f64::min);
    let u0 = b.iter().map(|r| r["scheduled_ms"].as_f64().unwrap()).fold(f64::MAX, f64::min);
    let mut x: Vec<(f64, u64, u64)> = a
        .iter()
        .map(|r| {
            (
                r["scheduled_ms"].as_f64().unwrap() - t0,
                r["input_tokens"].as_u64().unwrap(),
                r["requested_output_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut y: Vec<(f64, u64, u64)> = b
        .iter()
        .map(|r| {
            (
                r["scheduled_ms"].as_f64().unwrap() - u0,
                r["input_tokens"].as_u64().unwrap(),
                r["requested_output_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    x.sort_by(|p, q| p.0.total_cmp(&q.0));
    y.sort_by(|p, q| p.0.total_cmp(&q.0));
    for (p, q) in x.iter().zip(&y) {
        assert!((p.0 - q.0).abs() < 0.01, "same schedule: {p:?} vs {q:?}");
        assert_eq!((p.1, p.2), (q.1, q.2), "same prompts and lengths");
    }
}

#[test]
fn workload_errors_name_the_input() {
    let dir = temp_dir("bad");
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"ok\"}\n{\"prompt\": 7}\n").unwrap();
    for (args, needle) in [
        (
            vec!["sim".to_string(), "--dataset".into(), format!("jsonl:{}", bad.display())],
            "bad.jsonl, line 2: field `prompt`".to_string(),
        ),
        (vec!["sim".into(), "--dataset".into(), "parquet:x".into()], "--dataset".into()),
        (vec!["sim".into(), "--profile".into(), "replay".into()], "replay needs arrival times".into()),
        (vec!["sim".into(), "--profile".into(), "gamma".into(), "--rate".into(), "5".into()], "--burstiness".into()),
        (vec!["sim".into(), "--profile".into(), "poisson".into()], "--rate".into()),
        (
            vec!["sim".into(), "--concurrency".into(), "4".into(), "--max-concurrency".into(), "2".into()],
            "--max-concurrency".into(),
        ),
        (vec!["sim".into(), "--warmup".into(), "soon".into()], "--warmup".into()),
        (vec!["sim".into(), "--think-time".into(), "sometimes".into()], "--think-time".into()),
        (vec!["sim".into(), "--turns".into(), "all".into()], "--turns".into()),
        (vec!["sim".into(), "--prefix-groups".into(), "3".into()], "--prefix-tokens".into()),
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&a, Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", text(&o.stderr));
        let e = text(&o.stderr);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains(&needle), "{a:?}: {e}");
    }
}

/// `--stop-over-saturated`: a server offered more than it serves is stopped once its queue grows
/// (its own stop reason, a warning that says why), and one that keeps up runs to its end. The
/// LoadMachine judges it for `bench` and `sim` alike; `bench` is run on the steady side here (an
/// over-saturated real-time run takes the detector's 30 s at least).
#[test]
fn an_over_saturated_server_stops_the_run_and_a_steady_one_does_not() {
    let flags = ["--duration", "300s", "--input-tokens", "256", "--output-tokens", "32", "--stop-over-saturated"];
    let over = doc("oversat", &[&["sim", "--rate", "100"][..], &flags].concat());
    let r = &over["runs"][0];
    assert_eq!(r["stop"], "over_saturated");
    // what was in flight was cancelled, as after --max-errors
    assert_eq!(r["interrupted"], true);
    let end = r["virtual_end_s"].as_f64().unwrap();
    assert!((30.0..120.0).contains(&end), "stopped at {end} s of 300");
    let w = r["summary"]["warnings"].as_array().unwrap();
    let why = w.iter().find(|w| w["code"] == "over_saturated").expect("an over_saturated warning");
    assert!(why["message"].as_str().unwrap().starts_with("over-saturated: "), "{why}");
    let steady = doc("steady", &[&["sim", "--rate", "20"][..], &flags].concat());
    assert_eq!(steady["runs"][0]["stop"], "duration");
    let bench = doc("steady-bench", &["bench", "--rate", "20", "--duration", "3s", "--stop-over-saturated"]);
    assert_eq!(bench["runs"][0]["stop"], "duration");
    assert!(bench["runs"][0]["summary"]["warnings"].as_array().unwrap().iter().all(|w| w["code"] != "over_saturated"));
}

/// A real public agentic trace replayed end to end: two Claude Code conversations of
/// kv-cache-tester (one whole, one slice with a sub-agent; fixtures/README.md), every call's
/// prompt built block by block from its hash ids, so the engine's prefix cache serves what the
/// calls share.
#[test]
fn a_public_agentic_trace_replays_with_its_sub_agent_and_its_prefix_reuse() {
    let d = doc(
        "weka",
        &["sim", "--dataset", &format!("weka:{}", fixture("weka")), "--concurrency", "2", "--requests", "16"],
    );
    let r = &d["runs"][0];
    assert_eq!(r["summary"]["completed"], 16);
    let s = &r["summary"]["sessions"];
    assert!(s["sessions"].as_u64().unwrap() >= 2, "{s}");
    assert!(s["with_sub_agents"].as_u64().unwrap() >= 1, "the slice's sub-agent ran: {s}");
    let reqs = r["requests"].as_array().unwrap();
    assert!(reqs.iter().any(|q| q["agent"].is_u64()), "a sub-agent's calls carry their agent");
    // later calls resend their context: the prefix cache serves most of every prompt
    let e = &r["engine_stats"]["prefix_cache"];
    let hit = e["hit_blocks"].as_f64().unwrap() / e["queried_blocks"].as_f64().unwrap();
    assert!(hit > 0.8, "prefix cache hit rate {hit}");
}

/// A trace's pauses are its own (tens of seconds between a Claude Code session's calls):
/// `--time-scale` shrinks them for a run that must end sooner, and a run without sessions is
/// told it has none to scale.
#[test]
fn time_scale_shrinks_a_traces_pauses_between_calls() {
    let weka = format!("weka:{}", fixture("weka"));
    let tool_s = |name: &str, extra: &[&str]| {
        let mut a = vec!["sim", "--dataset", weka.as_str(), "--concurrency", "1", "--requests", "6"];
        a.extend_from_slice(extra);
        let d = doc(name, &a);
        assert_eq!(d["runs"][0]["summary"]["completed"], 6);
        d["runs"][0]["summary"]["sessions"]["tool_s"].as_f64().unwrap()
    };
    let (whole, tenth) = (tool_s("weka-whole", &[]), tool_s("weka-tenth", &["--time-scale", "0.1"]));
    assert!(whole > 1.0 && (tenth / whole - 0.1).abs() < 0.02, "tool time {whole} s, at x0.1 {tenth} s");
    let o = run(&["sim", "--time-scale", "0.5", "--requests", "5", "-q"], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--time-scale") && text(&o.stderr).contains("sessions"), "{}", text(&o.stderr));
}
