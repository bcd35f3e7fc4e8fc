//! The load generator applies the load it is asked for, or says it did not: a closed loop against
//! a server faster than the client, with the client alone on one core and with a CPU hog beside
//! it. Numbers are never reported as `ok` when the requested concurrency was not applied.
//!
//! The server runs on its own thread pinned to CPU 1, `goodput` as a child process pinned to
//! CPU 0 (on a one-core machine both share it; the assertions hold either way).

mod common;

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use goodput_testkit::fast::{FastServer, pin_to};

const USERS: f64 = 64.0;

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// `goodput bench` at `--concurrency 64` for a few seconds against `url`, pinned to CPU 0.
fn bench_pinned(url: &str, name: &str) -> serde_json::Value {
    let dir = temp_dir(name);
    let out = dir.join("r.json");
    let mut cmd = bin();
    cmd.args([
        "bench",
        "--url",
        url,
        "--concurrency",
        "64",
        "--duration",
        "4s",
        "--input-tokens",
        "16",
        "--output-tokens",
        "16",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    unsafe {
        cmd.pre_exec(|| {
            pin_to(0);
            Ok(())
        });
    }
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let o = wait_with_deadline(child, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(0), "stdout: {}\nstderr: {}", text(&o.stdout), text(&o.stderr));
    let doc = load_valid(&out);
    println!("{}", text(&o.stdout));
    doc["runs"][0]["summary"].clone()
}

/// Either the run kept (almost) all its users in flight, or it says `client_bound`: never `ok`
/// over a lighter load than asked for.
fn assert_truthful(s: &serde_json::Value) {
    let verdict = s["verdict"].as_str().unwrap();
    let check = &s["load_check"];
    assert_eq!(check["requested_concurrency"], 64);
    let in_flight = check["mean_in_flight"].as_f64().expect("a steady span with every user active");
    let gap_share = check["gap_share"].as_f64().unwrap();
    assert!(s["completed"].as_u64().unwrap() > 500, "{s}");
    if in_flight < 0.9 * USERS {
        assert_eq!(verdict, "client_bound", "only {in_flight:.1} of 64 users in flight, yet the verdict is {verdict}");
    }
    if verdict == "ok" {
        assert!(gap_share <= 0.05, "{gap_share}");
        assert!(in_flight >= 0.9 * USERS, "{in_flight}");
    }
    // the summary's own mean concurrency tells the same story
    let mean = s["mean_concurrency"].as_f64().unwrap();
    if verdict == "ok" {
        assert!(mean >= 0.85 * USERS, "mean concurrency {mean:.1} with verdict ok");
    }
}

#[test]
fn a_server_faster_than_the_client_gets_its_64_users() {
    let _serial = goodput_testkit::timing_lock();
    let server = FastServer::start(0, 16, || {
        pin_to(1);
    })
    .unwrap();
    let s = bench_pinned(&server.url(), "fast");
    assert_truthful(&s);
    if cores() >= 2 {
        // with the client alone on its core, the users are kept busy
        let in_flight = s["load_check"]["mean_in_flight"].as_f64().unwrap();
        println!("mean in flight {in_flight:.1} of 64, verdict {}", s["verdict"]);
        // the load loop never waits for bookkeeping: the users are kept in flight (when it
        // did, about one of 64 was). A client saturated by a faster server still, rightly, falls
        // short and says client_bound: a reply ends when its last bytes arrived (the kernel's
        // stamp), and the time it then waits to be read is the client's, not the server's. How
        // far short depends on how much faster than the client the server is, and on the
        // machine's noise: 46-63 of 64 in a debug build on an AMD EPYC host, where this server
        // (a write per token) was itself near its limit; 8.7-9.0 on a Sapphire Rapids host, where
        // it outpaced the debug client (19k req/s, each user waiting about 3 ms for the client to
        // read its reply and send again). The bound only tells the two designs apart;
        // bench-ceiling.sh measures the rest.
        assert!(in_flight >= USERS / 16.0, "only {in_flight:.1} of 64 users in flight");
    }
}

#[test]
fn a_cpu_hog_beside_the_client_never_gives_ok_with_wrong_numbers() {
    let _serial = goodput_testkit::timing_lock();
    let server = FastServer::start(0, 16, || {
        pin_to(1);
    })
    .unwrap();
    // an ordinary busy loop (nice 0) on the client's core
    let stop = Arc::new(AtomicBool::new(false));
    let hog = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            pin_to(0);
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        })
    };
    let s = bench_pinned(&server.url(), "hog");
    stop.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    assert_truthful(&s);
}

/// A server that closes each connection right after its streamed response, as llama.cpp's does:
/// a closed loop sends its next request the moment a stream ends, often into the pooled
/// connection the server is closing. Such a request never reached the server: it is resent on a
/// fresh connection (counted in `stale_resends`), never failed, and never sent twice.
#[test]
fn a_server_that_closes_each_connection_loses_no_request() {
    // not beside the timed runs above: its load would be theirs
    let _serial = goodput_testkit::timing_lock();
    let server = FastServer::start_closing(8).unwrap();
    let dir = temp_dir("closing");
    let out = dir.join("r.json");
    let o = run(
        &[
            "bench",
            "--url",
            &server.url(),
            "--concurrency",
            "4",
            "--requests",
            "400",
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--out",
            out.to_str().unwrap(),
            "-q",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let doc = load_valid(&out);
    let run = &doc["runs"][0];
    assert_eq!(run["summary"]["completed"], 400, "{}", text(&o.stdout));
    // each request reached the server exactly once
    assert_eq!(server.served.load(Ordering::Relaxed), 400);
    let resends: u64 =
        run["requests"].as_array().unwrap().iter().map(|r| r["stale_resends"].as_u64().unwrap_or(0)).sum();
    println!("stale resends: {resends} of 400 requests");
    // the summary counts every POST, and says keep-alive went off once the server was seen
    // closing connections after its responses
    let sends = &run["summary"]["sends"];
    assert_eq!(sends["requests"], 400);
    // the first attempts of the resends never reached the server: one POST per request
    assert_eq!(sends["posts"].as_u64().unwrap(), 400);
    assert_eq!(sends["stale_resends"].as_u64().unwrap(), resends);
    let c = &sends["connections"];
    let shown = ["unwritten", "closed_before_write", "reset"].iter().map(|k| c[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(shown, resends, "every resend was shown not to have reached the server: {c}");
    if resends > 0 {
        assert!(c["keep_alive_off_ms"].as_f64().is_some(), "{c}");
        assert!(text(&o.stdout).contains("keep-alive off"), "{}", text(&o.stdout));
    }
    assert!(text(&o.stdout).contains("400 POSTs reached the server for 400 requests"), "{}", text(&o.stdout));
    for r in run["requests"].as_array().unwrap() {
        assert_eq!(r["reconnects"].as_u64().unwrap_or(0), 0, "no --retries, no retry");
    }
}
