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
        stall: None,
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

/// Every POST the server saw is accounted for in the records (`posts`: the request and its
/// `--retries` attempts that got a connection; a stale resend's first attempt never reached it).
fn posts(records: &[goodput_metrics::RequestRecord]) -> u64 {
    records.iter().map(|r| u64::from(r.posts.expect("the client counts its POSTs"))).sum()
}

#[tokio::test]
async fn requests_are_sent_exactly_once_unless_retries_are_asked_for() {
    // A server that reads every other POST and closes the connection without a response. On a
    // reused keep-alive connection that looks, to HTTP, like a server that closed the idle
    // connection as the request arrived; but the server took this request (its close is a FIN
    // after the request was read, not a reset), so it is a failure and is not sent again.
    fn script(n: usize) -> Script {
        if n % 2 == 1 { vec![Step::Cut] } else { goodput_testkit::steady_stream(1.0, 0.5, 2, false) }
    }
    let server = ScriptedServer::start(script).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let out = run_within(Duration::from_secs(20), ep, config(10, 1), workload(8, 2)).await;
    let failed: Vec<_> = out.records.iter().filter(|r| !r.is_success()).collect();
    assert_eq!(failed.len(), 5, "requests 1, 3, 5, 7, 9");
    assert!(failed.iter().all(|r| class(r) == ErrorClass::StreamEndedEarly && r.attempts.is_empty()));
    assert!(out.records.iter().all(|r| r.stale_resends == 0 && r.reconnects == 0));
    assert_eq!(server.served().len(), 10, "the server received exactly one POST per request");
    assert_eq!(posts(&out.records), 10, "nothing is resent behind our back");
    assert!(failed[0].error.as_ref().unwrap().message.contains("may have read the request"), "{:?}", failed[0].error);

    // --retries 1: each failure is resent once (after the backoff), and the record keeps the
    // failed attempt: request 0 goes through on POST 0; every later request k meets the cut on
    // POST 2k-1 and goes through on POST 2k
    let server = ScriptedServer::start(script).await;
    let mut ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    ep.retries = 1;
    let out = run_within(Duration::from_secs(30), ep, config(10, 1), workload(8, 2)).await;
    assert!(
        out.records.iter().all(|r| r.is_success()),
        "{:?}",
        out.records.iter().map(|r| &r.error).collect::<Vec<_>>()
    );
    let retried: Vec<_> = out.records.iter().filter(|r| !r.attempts.is_empty()).collect();
    assert_eq!(retried.len(), 9);
    assert_eq!(server.served().len(), 19);
    assert_eq!(posts(&out.records), 19);
    for r in retried {
        assert_eq!((r.reconnects, r.stale_resends), (1, 0));
        assert_eq!(r.attempts[0].error.class, ErrorClass::StreamEndedEarly);
        // capped exponential backoff with jitter: the first retry waits 375-500 ms
        let waited = r.sent_ms.unwrap() - r.attempts[0].end_ms;
        assert!((370.0..600.0).contains(&waited), "retried {waited:.1} ms after the failure");
    }
}

#[tokio::test]
async fn a_429_is_retried_when_retry_after_says() {
    // every third POST is refused with 429 and `Retry-After: 1`
    fn script(n: usize) -> Script {
        if n % 3 == 2 {
            vec![Step::Head(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
                     content-length: 2\r\n\r\n{}"
                    .into(),
            )]
        } else {
            goodput_testkit::steady_stream(1.0, 0.5, 2, false)
        }
    }
    let server = ScriptedServer::start(script).await;
    let mut ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    ep.retries = 2;
    let out = run_within(Duration::from_secs(20), ep, config(6, 1), workload(8, 2)).await;
    assert!(out.records.iter().all(|r| r.is_success()));
    // requests 2 and 4 met a 429 (POSTs 2 and 5) and went through a second later
    assert_eq!(server.served().len(), 8);
    assert_eq!(posts(&out.records), 8);
    let retried: Vec<_> = out.records.iter().filter(|r| r.reconnects > 0).collect();
    assert_eq!(retried.len(), 2);
    for r in retried {
        assert_eq!(r.attempts[0].error.status, Some(429));
        let waited = r.sent_ms.unwrap() - r.attempts[0].end_ms;
        assert!((999.0..1300.0).contains(&waited), "resent {waited:.1} ms after the 429");
    }
    let mut sends = goodput_metrics::Sends::default();
    out.records.iter().for_each(|r| sends.add(r));
    assert_eq!((sends.requests, sends.posts, sends.retries), (6, 8, 2));
    assert_eq!(sends.retries_by_class.get("http_429"), Some(&2));
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

/// The silence from the first content event to the failure.
fn silence_ms(r: &RequestRecord) -> f64 {
    r.end_ms.unwrap() - r.event_ms[0]
}

#[tokio::test]
async fn keep_alive_comments_do_not_hold_a_stalled_stream() {
    // the help promises the longest silence *between stream events*: a comment every 100 ms is
    // no event, so the request fails at the 400 ms idle timeout, not at the total timeout
    fn script(_: usize) -> Script {
        let mut v = vec![Step::SseHead, Step::Chunk(sse::completion(" a"))];
        for k in 1..=40 {
            v.push(Step::At(100.0 * k as f64));
            v.push(Step::Chunk(": keep-alive\n\n".into()));
        }
        v
    }
    let r = one(script, Duration::from_secs(8)).await;
    assert_eq!(class(&r), ErrorClass::TimeoutIdle);
    assert!((390.0..900.0).contains(&silence_ms(&r)), "{}", silence_ms(&r));
    let m = &r.error.as_ref().unwrap().message;
    assert!(m.contains("no stream event") && m.contains("comment lines"), "{m}");
}

#[tokio::test]
async fn a_trickle_that_completes_no_event_does_not_hold_a_stream() {
    // one byte every 100 ms of an event that never ends
    fn script(_: usize) -> Script {
        let mut v = vec![Step::SseHead, Step::Chunk(sse::completion(" a"))];
        for (k, b) in "data: {\"choices\":[{\"text\":\"slow\"}]}".chars().enumerate() {
            v.push(Step::At(100.0 * (k + 1) as f64));
            v.push(Step::Chunk(b.to_string()));
        }
        v
    }
    let r = one(script, Duration::from_secs(8)).await;
    assert_eq!(class(&r), ErrorClass::TimeoutIdle);
    assert!((390.0..900.0).contains(&silence_ms(&r)), "{}", silence_ms(&r));
}

#[tokio::test]
async fn the_stall_guard_counts_bytes() {
    // --timeout-stall below --timeout-idle: a silent stream fails at the stall timeout
    let server = ScriptedServer::start(|_| {
        vec![Step::SseHead, Step::Chunk(sse::completion(" a")), Step::Silence(Duration::from_secs(30))]
    })
    .await;
    let mut to = short_timeouts();
    to.stall = Some(Duration::from_millis(150));
    let ep = endpoint(&server.url(), Api::Completions, to);
    let out = run_within(Duration::from_secs(5), ep, config(1, 1), workload(8, 4)).await;
    let r = &out.records[0];
    assert_eq!(class(r), ErrorClass::TimeoutStall);
    assert!((140.0..390.0).contains(&silence_ms(r)), "{}", silence_ms(r));
}

/// One request against `script` with `--retries 2`: its record, and the POSTs the server saw.
async fn retried(script: fn(usize) -> Script) -> (RequestRecord, usize) {
    let server = ScriptedServer::start(script).await;
    let mut ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    ep.retries = 2;
    let out = run_within(Duration::from_secs(10), ep, config(1, 1), workload(8, 4)).await;
    (out.records.into_iter().next().unwrap(), server.served().len())
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_named_and_not_retried() {
    let (r, posts) = retried(|_| {
        let body = r#"{"id":"c","choices":[{"text":"a whole reply","finish_reason":"length"}]}"#;
        vec![Step::Head(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))]
    })
    .await;
    assert_eq!(class(&r), ErrorClass::NotStreamed);
    assert_eq!(posts, 1, "a complete reply is not a broken stream: not retried");
    let m = &r.error.unwrap().message;
    assert!(m.contains("application/json") && m.contains("stream: true") && m.contains("a whole reply"), "{m}");
}

#[tokio::test]
async fn a_proxy_page_names_its_content_type_and_shows_its_start() {
    let (r, posts) = retried(|_| {
        let body = "<html><head><title>Gateway login</title></head><body>Please sign in</body></html>";
        vec![Step::Head(format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))]
    })
    .await;
    assert_eq!(class(&r), ErrorClass::ContentType);
    assert_eq!(posts, 1);
    let m = &r.error.unwrap().message;
    assert!(m.contains("text/html") && m.contains("Gateway login"), "{m}");
}

#[tokio::test]
async fn a_redirect_shows_where_it_points() {
    let (r, posts) = retried(|_| {
        vec![Step::Head(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: https://api.example.com/v1/completions\r\n\
             content-length: 0\r\n\r\n"
                .into(),
        )]
    })
    .await;
    assert_eq!(class(&r), ErrorClass::HttpStatus);
    assert_eq!(posts, 1, "a redirect is not retried");
    let e = r.error.unwrap();
    assert_eq!(e.status, Some(307));
    assert!(e.message.contains("https://api.example.com/v1/completions") && e.message.contains("not followed"));
}

#[tokio::test]
async fn an_event_over_the_size_cap_fails_its_request() {
    let server = ScriptedServer::start(|_| {
        let blob = "x".repeat(64 * 1024);
        vec![Step::SseHead, Step::Chunk(sse::completion(&blob)), Step::Chunk(sse::done()), Step::End]
    })
    .await;
    let mut ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    ep.max_event_bytes = 16 * 1024;
    let out = run_within(Duration::from_secs(5), ep, config(1, 1), workload(8, 4)).await;
    let r = &out.records[0];
    assert_eq!(class(r), ErrorClass::EventTooLarge);
    assert!(r.event_ms.is_empty(), "no token is counted from it");
}

#[tokio::test]
async fn max_errors_stops_the_run() {
    let server = ScriptedServer::start(|_| vec![Step::Status(503, "down".into())]).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let mut cfg = config(1000, 2);
    cfg.sending.bounds.max_errors = Some(5);
    let out = run_within(Duration::from_secs(10), ep, cfg, workload(8, 4)).await;
    assert_eq!(out.stop, goodput_client::StopReason::MaxErrors);
    assert!(out.records.len() >= 5 && out.records.len() < 20, "{}", out.records.len());
}

#[tokio::test]
async fn open_loop_records_schedule() {
    let server = ScriptedServer::start(|_| goodput_testkit::steady_stream(5.0, 1.0, 3, false)).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let mut cfg = config(20, 1);
    cfg.sending.load =
        Load::Open { arrivals: goodput_workload::Arrivals::Constant { rate: 100.0 }, max_concurrency: None };
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
