//! `bench` against `serve` and the embedded engine, and `sim`, with the same workload and seed:
//! mean TTFT and TPOT agree within 5% (Poisson), and within a wider band on a reduced version of
//! `scripts/bench-agreement.sh`'s matrix (a closed loop of 16 users, multi-turn sessions with
//! think time and shared prefixes). Its own test binary, so nothing else runs beside it.

mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `goodput serve` on a free port and waits until it answers.
fn serve(extra: &[&str]) -> (Killed, String) {
    let port = free_port();
    let child = bin()
        .args(["serve", "--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "goodput serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Killed(child), url)
}

fn mean(doc: &serde_json::Value, metric: &str) -> f64 {
    doc["runs"][0]["summary"][metric]["mean"].as_f64().unwrap()
}

#[test]
fn bench_serve_and_sim_agree_on_the_same_workload() {
    // real-time runs: not beside each other (a sessions run beside another measured its TTFT
    // mean 7.6% low)
    let _serial = goodput_testkit::timing_lock();
    let dir = temp_dir("agree");
    // vLLM V0's policy, as the agreement matrix: under chunked prefill a prompt joins the first
    // iteration after it arrives, and real arrivals land ~0.5 ms after virtual ones, which moves
    // TTFT by a few percent (docs/engine.md, Bench against sim)
    let workload =
        ["--rate", "5", "--requests", "40", "--input-tokens", "2048", "--output-tokens", "48", "--seed", "3"];
    let run_to = |name: &str, args: &[&str]| {
        let out = dir.join(name);
        let mut a: Vec<&str> = args.to_vec();
        a.extend_from_slice(&workload);
        a.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
        let o = run(&a, Duration::from_secs(120));
        assert_eq!(o.status.code(), Some(0), "{a:?}: {}", text(&o.stderr));
        load_valid(&out)
    };
    let policy = ["--scheduling", "prefill-first"];
    let sim = run_to("sim.json", &["sim", policy[0], policy[1]]);
    let embedded = run_to("embedded.json", &["bench", policy[0], policy[1]]);
    let (_server, url) = serve(&policy);
    let served = run_to("served.json", &["bench", "--url", &url]);

    assert_eq!(sim["runs"][0]["target"]["kind"], "sim");
    assert_eq!(embedded["runs"][0]["target"]["kind"], "embedded");
    assert_eq!(embedded["runs"][0]["target"]["engine"]["config"]["gpu"]["name"], "h100");
    assert_eq!(served["runs"][0]["target"]["kind"], "url");
    for (name, doc) in [("embedded", &embedded), ("served", &served)] {
        for metric in ["ttft_ms", "tpot_ms"] {
            let (m, s) = (mean(doc, metric), mean(&sim, metric));
            assert!((m / s - 1.0).abs() <= 0.05, "{name} {metric}: measured {m:.2} vs simulated {s:.2} (over 5%)");
        }
        assert_eq!(doc["runs"][0]["summary"]["completed"], 40);
    }
    assert!(sim["runs"][0]["engine_stats"]["steps"].as_u64().unwrap() > 40);
}

fn stat(doc: &serde_json::Value, metric: &str, stat: &str) -> f64 {
    doc["runs"][0]["summary"][metric][stat].as_f64().unwrap()
}

#[test]
fn the_reduced_agreement_matrix() {
    let _serial = goodput_testkit::timing_lock();
    let dir = temp_dir("matrix");
    let cases: [(&str, &[&str]); 2] = [
        // the 12% case of the architecture issue, its answers of 96-160 tokens. Equal requests
        // in a closed loop move in synchronized bursts, and which iterations a burst splits over
        // is decided by microseconds: the run is bistable (bursts in lockstep, mean TTFT about
        // 152 ms, or split for the rest of the run, about 123 ms), and a busy CI host split 4 of
        // 7 real-time runs where this machine split 1 in 10. Answers of unequal length spread
        // the users' sends as a deployment's do: no lockstep, and bench and sim agree on mean
        // TTFT within 1% at each of three seeds here (36 ms)
        (
            "closed16",
            &[
                "--scheduling",
                "prefill-first",
                "--concurrency",
                "16",
                "--requests",
                "160",
                "--input-tokens",
                "256",
                "--output-tokens",
                "uniform:96..160",
            ],
        ),
        (
            "sessions",
            &[
                "--sessions",
                "--turns",
                "4",
                "--think-time",
                "100ms",
                "--prefix-groups",
                "4",
                "--prefix-tokens",
                "500",
                "--concurrency",
                "16",
                "--requests",
                "128",
                "--input-tokens",
                "256",
                "--output-tokens",
                "64",
            ],
        ),
    ];
    for (name, flags) in cases {
        // which iterations a burst of equal requests splits over is decided by microseconds, in
        // the simulator too (its front-end draws): under chunked prefill one run of the sessions
        // moves its mean TTFT by about ±9% from seed to seed (scripts/bench-front-end.sh). The
        // sessions' first wave of 16 prefills is bistable in real time (p90 TTFT about 360 ms,
        // simulated 360-361) and split in 1 of 63 recorded runs here (p90 215 ms) and in a CI
        // run, which failed a mean of three seeds. So each case's figures are the medians over
        // five seeds, bench and sim alike. Mean TTFT within 10% (the digital-twin issue asks 5%:
        // docs/engine.md, Bench against sim, has where it stands), every other figure within 6%
        let seeds: &[&str] = if name == "sessions" { &["5", "6", "7", "8", "9"] } else { &["7", "8", "9", "10", "11"] };
        let go = |cmd: &str, k: usize| {
            let out = dir.join(format!("{name}-{cmd}-{k}.json"));
            let mut a = vec![cmd];
            a.extend_from_slice(flags);
            a.extend_from_slice(&["--seed", seeds[k]]);
            a.extend_from_slice(&["--out", out.to_str().unwrap(), "-q"]);
            let o = run(&a, Duration::from_secs(180));
            assert_eq!(o.status.code(), Some(0), "{a:?}: {}", text(&o.stderr));
            load_valid(&out)
        };
        let b: Vec<serde_json::Value> = (0..seeds.len()).map(|k| go("bench", k)).collect();
        let s: Vec<serde_json::Value> = (0..seeds.len()).map(|k| go("sim", k)).collect();
        // the seeds' median, and each seed's figure
        let over_seeds = |docs: &[serde_json::Value], metric: &str, st: &str| {
            let xs: Vec<f64> = docs.iter().map(|d| stat(d, metric, st)).collect();
            let mut sorted = xs.clone();
            sorted.sort_by(f64::total_cmp);
            (sorted[sorted.len() / 2], xs)
        };
        for metric in ["ttft_ms", "tpot_ms"] {
            let mean_band = if metric == "ttft_ms" { 0.10 } else { 0.06 };
            for (st, band) in [("mean", mean_band), ("p90", 0.10)] {
                let ((x, xs), (y, ys)) = (over_seeds(&b, metric, st), over_seeds(&s, metric, st));
                assert!(
                    (x / y - 1.0).abs() <= band,
                    "{name} {metric} {st}: bench {x:.2} (runs {xs:.2?}) vs sim {y:.2} (runs {ys:.2?}) (over {band})"
                );
            }
        }
    }
}

/// A reasoning model on the embedded engine: 256 thinking tokens before a 64-token answer, over
/// the chat API (streamed as `reasoning_content`), eight users. Mean TTFO (the first answer
/// token) of `bench` and `sim` agree within 5%, as medians over three seeds.
#[test]
fn bench_and_sim_agree_on_the_first_answer_token_of_a_reasoning_model() {
    let _serial = goodput_testkit::timing_lock();
    let flags = [
        "--reasoning-tokens",
        "256",
        "--output-tokens",
        "64",
        "--input-tokens",
        "256",
        "--concurrency",
        "8",
        "--requests",
        "32",
    ];
    let seeds = ["1", "2", "3"];
    let go = |cmd: &str, seed: &str| {
        let mut a = vec![cmd];
        if cmd == "bench" {
            a.extend_from_slice(&["--api", "chat"]);
        }
        a.extend_from_slice(&flags);
        a.extend_from_slice(&["--seed", seed]);
        run_ok(&format!("agree-reasoning-{cmd}-{seed}"), &a, Duration::from_secs(180)).0
    };
    let median = |cmd: &str, what: &dyn Fn(&serde_json::Value) -> f64| {
        let mut xs: Vec<f64> = seeds.iter().map(|s| what(&go(cmd, s))).collect();
        xs.sort_by(f64::total_cmp);
        (xs[1], xs)
    };
    let ttfo = |d: &serde_json::Value| {
        let r = &d["runs"][0]["summary"]["reasoning"];
        assert_eq!(r["requests"], 32, "{r}");
        assert_eq!(r["reasoning_tokens"], 32 * 256);
        r["ttfo_ms"]["mean"].as_f64().unwrap()
    };
    let ((b, bs), (s, ss)) = (median("bench", &ttfo), median("sim", &ttfo));
    assert!((b / s - 1.0).abs() <= 0.05, "mean TTFO: bench {b:.1} (runs {bs:.1?}) vs sim {s:.1} (runs {ss:.1?})");
    // the answer arrives after the thinking: TTFO is TTFT plus 256 tokens of decode
    assert!(s > 256.0 * 5.0, "{s}");
}

/// An agent on the embedded engine, its prefix cache on and off: 2 users, sessions of 4 calls
/// (a 2,048-token prompt, then 1,024 tokens of tool output after 200 ms per call). Mean TTFT by
/// call index of `bench` and `sim` agree within 10%, pooled over two seeds of 20 sessions each.
/// Both engines compute the same prefix hits and prefill tokens to the block; what differs is
/// timing (with 4 users a call index's mean turned on a few queueing coincidences, up to ±25%
/// between one bench run and its sim; with 2, within 6%). Pooled they agreed within 2%, once the
/// embedded server tokenized each prompt once: tokenizing a long context twice (to count it and
/// to hash its blocks) had put later calls 6-8% above `sim`. With the cache on, a later call
/// prefills only its new tokens; with it off, its whole growing context.
#[test]
fn bench_and_sim_agree_on_ttft_by_call_of_an_agent_with_its_prefix_cache_on_and_off() {
    let _serial = goodput_testkit::timing_lock();
    let flags = [
        "--agentic",
        "--calls",
        "4",
        "--tool-time",
        "200ms",
        "--tool-output-tokens",
        "1024",
        "--input-tokens",
        "2048",
        "--output-tokens",
        "uniform:48..80",
        "--concurrency",
        "2",
        "--requests",
        "80",
    ];
    // mean TTFT of calls 0..4 over both seeds (weighted by each run's calls at that index)
    let by_call = |cmd: &str, caching: &str| -> Vec<f64> {
        let mut sums = [(0.0, 0.0); 4];
        for seed in ["1", "2"] {
            let mut a = vec![cmd];
            a.extend_from_slice(&flags);
            a.extend_from_slice(&["--prefix-caching", caching, "--seed", seed]);
            let d = run_ok(&format!("agree-agentic-{cmd}-{caching}-{seed}"), &a, Duration::from_secs(240)).0;
            let rows = d["runs"][0]["summary"]["sessions"]["ttft_by_call"].as_array().unwrap().clone();
            assert_eq!(rows.len(), 4, "{rows:?}");
            for (i, r) in rows.iter().enumerate() {
                let n = r["n"].as_f64().unwrap();
                assert_eq!(n, 20.0, "call {i}: {r}");
                sums[i].0 += n * r["mean"].as_f64().unwrap();
                sums[i].1 += n;
            }
        }
        sums.iter().map(|(s, n)| s / n).collect()
    };
    for caching in ["on", "off"] {
        let (b, s) = (by_call("bench", caching), by_call("sim", caching));
        for i in 0..4 {
            assert!(
                (b[i] / s[i] - 1.0).abs() <= 0.10,
                "--prefix-caching {caching}, call {i}: bench {:.1?} vs sim {:.1?} ms",
                b,
                s
            );
        }
        // the cache's effect: a later call costs less than the first with it, more without it
        if caching == "on" {
            assert!(s[3] < 0.7 * s[0] && b[3] < 0.7 * b[0], "on: bench {b:.1?} sim {s:.1?}");
        } else {
            assert!(s[3] > 2.0 * s[0] && b[3] > 2.0 * b[0], "off: bench {b:.1?} sim {s:.1?}");
        }
    }
}
