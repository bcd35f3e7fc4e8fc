//! `bench` and `sim` send the same requests for the same plan and seed: one load state machine
//! decides both. Against an instant server (`bench`) and the engine model in virtual time (`sim`),
//! the requests (session, turn, prompt length, requested length) are the same; open-loop arrival
//! times are equal to the bit; closed-loop users pause for the same draws; natural stop lengths
//! (`--no-ignore-eos`) are the same on the embedded engine and in the simulator.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use goodput_testkit::fast::FastServer;
use serde_json::Value;

/// `bench` against `url` and `sim`, with the same workload flags; returns both documents.
fn both(name: &str, url: &str, flags: &[&str]) -> (Value, Value) {
    let mut b = vec!["bench", "--url", url, "--model", "fast"];
    b.extend_from_slice(flags);
    let mut s = vec!["sim"];
    s.extend_from_slice(flags);
    let (bench, _) = run_ok(&format!("{name}-bench"), &b, Duration::from_secs(120));
    let (sim, _) = run_ok(&format!("{name}-sim"), &s, Duration::from_secs(120));
    (bench, sim)
}

fn requests(doc: &Value, run: usize) -> Vec<Value> {
    doc["runs"][run]["requests"].as_array().unwrap().clone()
}

fn input(r: &Value) -> u64 {
    // bench counts the prompt with our tokenizer; the simulator knows it
    r["input_tokens_client"].as_u64().or(r["input_tokens"].as_u64()).unwrap()
}

/// (session, turn, prompt tokens, requested tokens), sorted: what was sent, whatever the timing.
fn sent(doc: &Value, run: usize) -> Vec<(u64, u64, u64, u64)> {
    let mut v: Vec<_> = requests(doc, run)
        .iter()
        .map(|r| {
            (
                r["session"].as_u64().unwrap_or(u64::MAX),
                r["turn"].as_u64().unwrap_or(0),
                input(r),
                r["requested_output_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Open loop: (id, scheduled time, prompt, requested), in send order.
fn schedule(doc: &Value, run: usize) -> Vec<(u64, f64, u64, u64)> {
    requests(doc, run)
        .iter()
        .map(|r| {
            let id = r["id"].as_u64().unwrap();
            (id, r["scheduled_ms"].as_f64().unwrap(), input(r), r["requested_output_tokens"].as_u64().unwrap())
        })
        .collect()
}

/// Per closed-loop user, each pause: from the end of its previous request to its next one's
/// scheduled time (think time drawn from the user's own stream).
fn pauses(doc: &Value, run: usize) -> BTreeMap<u64, Vec<f64>> {
    let mut by_user: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for r in requests(doc, run) {
        let u = r["user"].as_u64().expect("closed-loop records carry their user");
        by_user.entry(u).or_default().push((r["scheduled_ms"].as_f64().unwrap(), r["end_ms"].as_f64().unwrap()));
    }
    by_user
        .into_iter()
        .map(|(u, mut v)| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            (u, v.windows(2).map(|w| w[1].0 - w[0].1).collect())
        })
        .collect()
}

fn assert_pauses_equal(bench: &Value, sim: &Value) {
    let (b, s) = (pauses(bench, 0), pauses(sim, 0));
    assert_eq!(b.keys().collect::<Vec<_>>(), s.keys().collect::<Vec<_>>());
    for (u, bp) in &b {
        let sp = &s[u];
        let n = bp.len().min(sp.len());
        assert!(n > 0, "user {u} paused");
        for (x, y) in bp[..n].iter().zip(&sp[..n]) {
            // the same draw; bench's end times are wall-clock milliseconds, so allow float noise
            assert!((x - y).abs() < 1e-6, "user {u}: pauses {bp:?} vs {sp:?}");
        }
    }
}

#[test]
fn bench_and_sim_send_the_same_requests() {
    let server = FastServer::start(0, 16, || {}).unwrap();
    let url = server.url();
    let lengths = ["--input-tokens", "uniform:10..100", "--output-tokens", "uniform:4..20", "--seed", "5"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = extra.to_vec();
        v.extend_from_slice(&lengths);
        v
    };

    // closed loop with think time: the same requests, and each user pauses for the same draws
    let (b, s) = both("closed", &url, &with(&["--concurrency", "4", "--think-time", "exp:30ms", "--requests", "40"]));
    assert_eq!(sent(&b, 0), sent(&s, 0));
    assert_pauses_equal(&b, &s);

    // open loops: arrival times equal to the bit, in the same order
    for (name, flags) in [
        ("poisson", vec!["--rate", "200", "--requests", "60"]),
        ("gamma", vec!["--profile", "gamma", "--rate", "200", "--burstiness", "0.5", "--requests", "60"]),
    ] {
        let (b, s) = both(name, &url, &with(&flags));
        assert_eq!(schedule(&b, 0), schedule(&s, 0), "{name}");
    }

    // sessions with shared prefixes and think time between turns: each turn resends the
    // conversation (the replies included), so the prompt lengths agree turn by turn
    let (b, s) = both(
        "sessions",
        &url,
        &with(&[
            "--sessions",
            "--turns",
            "3",
            "--think-time",
            "20ms",
            "--prefix-groups",
            "2",
            "--prefix-tokens",
            "50",
            "--concurrency",
            "3",
            "--requests",
            "30",
        ]),
    );
    assert_eq!(sent(&b, 0), sent(&s, 0));
    assert!(sent(&b, 0).iter().any(|r| r.1 == 2), "third turns were sent");
    assert_pauses_equal(&b, &s);

    // --no-ignore-eos: the same requested lengths (the server decides where to stop)
    let (b, s) = both("eos", &url, &with(&["--no-ignore-eos", "--rate", "200", "--requests", "30"]));
    assert_eq!(schedule(&b, 0), schedule(&s, 0));

    // a sweep: its first two stages (synchronous, throughput) are the same requests; later
    // stages' rates come from what those measured, so they differ between server and model
    let (b, s) = both(
        "sweep",
        &url,
        &with(&["--profile", "sweep", "--sweep-points", "1", "--requests", "20", "--duration", "5s"]),
    );
    assert_eq!(sent(&b, 0), sent(&s, 0));
    assert_eq!(schedule(&b, 1), schedule(&s, 1));
}

#[test]
fn natural_stops_are_the_same_on_the_embedded_engine_and_in_the_simulator() {
    let flags =
        ["--no-ignore-eos", "--concurrency", "2", "--requests", "12", "--input-tokens", "64", "--output-tokens", "40"];
    let mut b = vec!["bench"];
    b.extend_from_slice(&flags);
    let mut s = vec!["sim"];
    s.extend_from_slice(&flags);
    let (bench, _) = run_ok("eos-embedded", &b, Duration::from_secs(120));
    let (sim, _) = run_ok("eos-sim", &s, Duration::from_secs(120));
    let lengths = |d: &Value| {
        let mut v: Vec<u64> = requests(d, 0).iter().map(|r| r["output_tokens"].as_u64().unwrap()).collect();
        v.sort();
        v
    };
    let (lb, ls) = (lengths(&bench), lengths(&sim));
    assert_eq!(lb, ls);
    assert!(lb.iter().any(|&n| n < 40), "some stopped early: {lb:?}");
}
