//! Fault injection: each case must end in a classified record, and the run must end on time.

mod common;

use std::time::{Duration, Instant};

use common::*;
use goodput_client::{Api, Load, Timeouts};
use goodput_metrics::{ErrorClass, RequestRecord};
use goodput_testkit::{Script, ScriptedServer, Step, sse};

fn short_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_token: Duration::from_millis(400),
        idle: Duration::from_millis(400),
        total: Duration::from_secs(10),
    }
}

async fn one(script: fn(usize) -> Script, limit: Duration) -> RequestRecord {
    let server = ScriptedServer::start(script).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let started = Instant::now();
    let out = run_within(limit, ep, config(2, 1), workload(8, 4)).await;
    assert!(started.elapsed() < limit);
    assert_eq!(out.records.len(), 2, "the run goes on after a failure");
    out.records.into_iter().next().unwrap()
}

fn class(r: &RequestRecord) -> ErrorClass {
    r.error.as_ref().unwrap_or_else(|| panic!("expected a failure, got success: {r:?}")).class
}

#[tokio::test]
async fn connection_refused() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ep = endpoint(&format!("http://127.0.0.1:{port}"), Api::Completions, short_timeouts());
    let out = run_within(Duration::from_secs(5), ep, config(3, 1), workload(8, 4)).await;
    assert_eq!(out.records.len(), 3);
    assert!(out.records.iter().all(|r| class(r) == ErrorClass::Connect));
}

#[tokio::test]
async fn http_500_with_body() {
    let r =
        one(|_| vec![Step::Status(500, r#"{"error":{"message":"engine exploded"}}"#.into())], Duration::from_secs(5))
            .await;
    assert_eq!(class(&r), ErrorClass::HttpStatus);
    let e = r.error.unwrap();
    assert_eq!(e.status, Some(500));
    assert!(e.message.contains("engine exploded"), "{}", e.message);
}

#[tokio::test]
async fn http_429() {
    let r = one(|_| vec![Step::Status(429, "slow down".into())], Duration::from_secs(5)).await;
    assert_eq!(r.error.as_ref().unwrap().status, Some(429));
    assert_eq!(class(&r), ErrorClass::HttpStatus);
}

#[tokio::test]
async fn stream_cut_mid_way() {
    let r = one(
        |_| {
            vec![
                Step::SseHead,
                Step::Chunk(sse::completion(" a")),
                Step::At(20.0),
                Step::Chunk(sse::completion(" b")),
                Step::Cut,
            ]
        },
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(class(&r), ErrorClass::StreamEndedEarly);
    assert_eq!(r.event_ms.len(), 2, "partial events are kept");
}

#[tokio::test]
async fn malformed_json_event() {
    let r = one(
        |_| {
            vec![
                Step::SseHead,
                Step::Chunk(sse::completion(" a")),
                Step::Chunk("data: {\"choices\": [\n\n".into()),
                Step::End,
            ]
        },
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(class(&r), ErrorClass::MalformedStream);
}

#[tokio::test]
async fn error_object_in_stream() {
    let r = one(
        |_| {
            vec![
                Step::SseHead,
                Step::Chunk(sse::completion(" a")),
                Step::Chunk("data: {\"error\": {\"message\": \"out of memory\", \"code\": 500}}\n\n".into()),
                Step::End,
            ]
        },
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(class(&r), ErrorClass::ServerErrorEvent);
    assert!(r.error.unwrap().message.contains("out of memory"));
}

#[tokio::test]
async fn ten_megabyte_line() {
    // a 10 MB comment line, then a 10 MB `data:` line carrying real content
    fn script(_: usize) -> Script {
        let filler = "x".repeat(10 * 1024 * 1024);
        let text = " x".repeat(5 * 1024 * 1024);
        vec![
            Step::SseHead,
            Step::Chunk(format!(": {filler}\n\n")),
            Step::Chunk(sse::completion(&text)),
            Step::Chunk(sse::completion(" a")),
            Step::Chunk(sse::completion(" b")),
            Step::Chunk(sse::usage(3, 3)),
            Step::Chunk(sse::done()),
            Step::End,
        ]
    }
    let r = one(script, Duration::from_secs(30)).await;
    assert!(r.is_success(), "{:?}", r.error);
    assert_eq!(r.event_ms.len(), 3);
    assert_eq!(r.output_tokens, Some(3));
}

#[tokio::test]
async fn one_ten_megabyte_event_without_spaces_ends_in_seconds() {
    // BPE over 10 MB without a space took over 13 minutes and held the run (and Ctrl-C) hostage
    fn script(_: usize) -> Script {
        let blob = "a".repeat(10 * 1024 * 1024);
        vec![
            Step::SseHead,
            Step::Chunk(sse::completion(&blob)),
            Step::Chunk(sse::usage(3, 1)),
            Step::Chunk(sse::done()),
            Step::End,
        ]
    }
    let started = Instant::now();
    let r = one(script, Duration::from_secs(60)).await;
    assert!(r.is_success(), "{:?}", r.error);
    assert_eq!(r.event_ms.len(), 1);
    assert_eq!(r.output_tokens, Some(1), "the server's count");
    let ours = r.output_tokens_client.expect("counted, in bounded time");
    assert!(ours > 10_000, "{ours}");
    println!("two requests with a 10 MB event each; the run took {:.2} s", started.elapsed().as_secs_f64());
}

/// Every POST the server saw is accounted for in the records: the request itself, its
/// `--retries` attempts, and its resends after a reused connection closed before any response.
fn posts(records: &[goodput_metrics::RequestRecord]) -> u64 {
    records.iter().map(|r| 1 + r.reconnects as u64 + r.stale_resends as u64).sum()
}

#[tokio::test]
async fn requests_are_sent_exactly_once_unless_retries_are_asked_for() {
    // A server that reads a request and closes the connection without a response, except every
    // third one. On a reused keep-alive connection that looks like the server closing the idle
    // connection as the request arrived (it cannot be told apart), so the request is resent once,
    // on a fresh connection, and counted in `stale_resends`; on a fresh connection the failure is
    // the server's and final. With one request at a time: request 0 succeeds on connection A;
    // request 1 meets A closed (POST 1), is resent on fresh B and cut again (POST 2): it fails;
    // request 2 succeeds on fresh C (POST 3); and so on.
    fn script(n: usize) -> Script {
        if !n.is_multiple_of(3) { vec![Step::Cut] } else { goodput_testkit::steady_stream(1.0, 0.5, 2, false) }
    }
    let server = ScriptedServer::start(script).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let out = run_within(Duration::from_secs(20), ep, config(10, 1), workload(8, 2)).await;
    let failed: Vec<_> = out.records.iter().filter(|r| !r.is_success()).collect();
    assert_eq!(failed.len(), 5, "requests 1, 3, 5, 7, 9");
    assert!(failed.iter().all(|r| class(r) == ErrorClass::StreamEndedEarly && r.attempts.is_empty()));
    assert!(failed.iter().all(|r| r.stale_resends == 1 && r.reconnects == 0));
    assert!(out.records.iter().filter(|r| r.is_success()).all(|r| r.stale_resends == 0));
    assert_eq!(server.served().len(), 15);
    assert_eq!(posts(&out.records), 15, "nothing is resent behind our back");

    // --retries 1: each failure is resent once, and the record keeps the failed attempt
    let server = ScriptedServer::start(script).await;
    let mut ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    ep.retries = 1;
    let out = run_within(Duration::from_secs(20), ep, config(10, 1), workload(8, 2)).await;
    assert!(
        out.records.iter().all(|r| r.is_success()),
        "{:?}",
        out.records.iter().map(|r| &r.error).collect::<Vec<_>>()
    );
    let retried: Vec<_> = out.records.iter().filter(|r| !r.attempts.is_empty()).collect();
    assert_eq!(retried.len(), 9, "request 0 went through; every later one met a closed connection first");
    assert_eq!(server.served().len(), 28);
    assert_eq!(posts(&out.records), 28);
    for r in retried {
        assert_eq!((r.reconnects, r.stale_resends), (1, 1));
        assert_eq!(r.attempts[0].error.class, ErrorClass::StreamEndedEarly);
        assert!(r.attempts[0].sent_ms <= r.sent_ms.unwrap());
    }
}

#[tokio::test]
async fn no_done() {
    let r = one(
        |_| vec![Step::SseHead, Step::Chunk(sse::completion(" a")), Step::Chunk(sse::usage(3, 1)), Step::End],
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(class(&r), ErrorClass::StreamEndedEarly);
    assert!(r.error.unwrap().message.contains("[DONE]"));
}

#[tokio::test]
async fn server_never_sends_a_byte() {
    let r = one(|_| vec![Step::Silence(Duration::from_secs(30))], Duration::from_secs(5)).await;
    assert_eq!(class(&r), ErrorClass::TimeoutFirstToken);
}

#[tokio::test]
async fn stalls_after_first_token() {
    let r = one(
        |_| vec![Step::SseHead, Step::Chunk(sse::completion(" a")), Step::Silence(Duration::from_secs(30))],
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(class(&r), ErrorClass::TimeoutIdle);
}

#[tokio::test]
async fn max_errors_stops_the_run() {
    let server = ScriptedServer::start(|_| vec![Step::Status(503, "down".into())]).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let mut cfg = config(1000, 2);
    cfg.max_errors = Some(5);
    let out = run_within(Duration::from_secs(10), ep, cfg, workload(8, 4)).await;
    assert_eq!(out.stop, goodput_client::StopReason::MaxErrors);
    assert!(out.records.len() >= 5 && out.records.len() < 20, "{}", out.records.len());
}

#[tokio::test]
async fn open_loop_records_schedule() {
    let server = ScriptedServer::start(|_| goodput_testkit::steady_stream(5.0, 1.0, 3, false)).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let mut cfg = config(20, 1);
    cfg.load = Load::Open { arrivals: goodput_workload::Arrivals::Constant { rate: 100.0 }, max_concurrency: None };
    let out = run_within(Duration::from_secs(10), ep, cfg, workload(8, 3)).await;
    assert_eq!(out.records.len(), 20);
    let mut sched: Vec<f64> = out.records.iter().map(|r| r.scheduled_ms).collect();
    sched.sort_by(f64::total_cmp);
    for (i, w) in sched.windows(2).enumerate() {
        assert!((w[1] - w[0] - 10.0).abs() < 1e-6, "gap {i}: {}", w[1] - w[0]);
    }
    for r in &out.records {
        assert!(r.is_success(), "{:?}", r.error);
        assert!(r.sent_ms.unwrap() >= r.scheduled_ms);
    }
}

#[tokio::test]
async fn https_with_a_private_ca() {
    let (server, ca) = ScriptedServer::start_tls(|_| goodput_testkit::steady_stream(5.0, 1.0, 3, false)).await;
    let url = format!("https://localhost:{}", server.addr.port());
    let mut ep = endpoint("http://127.0.0.1:1", Api::Completions, short_timeouts());
    ep.client =
        goodput_client::HttpClient::with_roots(&url, None, 2, Duration::from_secs(2), Some(ca.as_bytes())).unwrap();
    let out = run_within(Duration::from_secs(10), ep, config(2, 1), workload(8, 3)).await;
    assert!(out.records.iter().all(|r| r.is_success()), "{:?}", out.records[0].error);
    assert_eq!(out.records[0].event_ms.len(), 3);
    // without the CA the handshake is refused: a classified connect failure
    let mut ep = endpoint("http://127.0.0.1:1", Api::Completions, short_timeouts());
    ep.client = goodput_client::HttpClient::new(&url, None, 2, Duration::from_secs(2)).unwrap();
    let out = run_within(Duration::from_secs(10), ep, config(1, 1), workload(8, 3)).await;
    assert_eq!(class(&out.records[0]), ErrorClass::Connect);
    assert!(out.records[0].error.as_ref().unwrap().message.contains("certificate"), "{:?}", out.records[0].error);
}
