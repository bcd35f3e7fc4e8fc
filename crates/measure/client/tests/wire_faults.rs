//! Faults at the wire, each ending in a classified record, on time, with nothing lost: a stream
//! left open after `[DONE]`, invalid UTF-8 in a data line, an HTTP/1.0 body that runs until the
//! close, a gzip-encoded stream nobody asked for, headers and then silence, TLS spoken to a
//! plain-HTTP port and plain HTTP to a TLS port. (A server that closes the connection after
//! every response is `load_truth::a_server_that_closes_each_connection_loses_no_request` and
//! `faults::requests_are_sent_exactly_once_unless_retries_are_asked_for`.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use goodput_client::{Api, HttpClient, Timeouts};
use goodput_metrics::{ErrorClass, RequestRecord};
use goodput_testkit::faults::{ReplyServer, gzip_stored};
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

fn class(r: &RequestRecord) -> ErrorClass {
    r.error.as_ref().unwrap_or_else(|| panic!("expected a failure, got success: {r:?}")).class
}

fn message(r: &RequestRecord) -> String {
    r.error.as_ref().map(|e| e.message.clone()).unwrap_or_default()
}

/// Runs `n` requests one after another against `script`; every record comes back.
async fn records(script: fn(usize) -> Script, n: u64, limit: Duration) -> Vec<RequestRecord> {
    let server = ScriptedServer::start(script).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let out = run_within(limit, ep, config(n, 1), workload(8, 3)).await;
    assert_eq!(out.records.len() as u64, n, "nothing lost");
    out.records
}

fn three_tokens_then(tail: Vec<Step>) -> Script {
    let mut s = vec![Step::SseHead];
    for i in 0..3 {
        s.push(Step::At(1.0 + i as f64));
        s.push(Step::Chunk(sse::completion(" hello")));
    }
    s.push(Step::Chunk(sse::usage(8, 3)));
    s.push(Step::Chunk(sse::done()));
    s.extend(tail);
    s
}

#[tokio::test]
async fn a_stream_left_open_after_done_ends_the_request_at_done() {
    let server = ScriptedServer::start(|_| three_tokens_then(vec![Step::Silence(Duration::from_secs(30))])).await;
    let ep = endpoint(&server.url(), Api::Completions, short_timeouts());
    let started = Instant::now();
    let out = run_within(Duration::from_secs(10), ep, config(20, 1), workload(8, 3)).await;
    let took = started.elapsed();
    assert_eq!(out.records.len(), 20);
    for r in &out.records {
        assert!(r.is_success(), "{:?}", r.error);
        assert_eq!(r.event_ms.len(), 3);
        // the request ends when [DONE] arrives, not when the server lets the stream go
        let after_last = r.end_ms.unwrap() - r.event_ms[2];
        assert!(after_last < 50.0, "ended {after_last:.1} ms after its last token");
    }
    // 20 streams of ~3 ms each, one after another: nowhere near 20 × the 400 ms drain grace
    // (the bound is loose for a loaded machine; before, each request waited for the grace)
    assert!(took < Duration::from_secs(4), "the closed loop took {took:?}");
    assert_eq!(out.streams_open_after_done, 20, "every stream was left open and drained apart");
}

#[tokio::test]
async fn a_stream_that_ends_after_done_is_never_left_open() {
    let recs_server = ScriptedServer::start(|_| three_tokens_then(vec![Step::End])).await;
    let ep = endpoint(&recs_server.url(), Api::Completions, short_timeouts());
    let out = run_within(Duration::from_secs(10), ep, config(10, 1), workload(8, 3)).await;
    assert!(out.records.iter().all(|r| r.is_success()));
    // this server writes the terminating chunk apart from [DONE]: the request does not wait for
    // it (streams_open_after_done counts those drained in the background, up to all 10), and
    // every body ends well within the grace
    assert!(out.streams_open_after_done <= 10, "{}", out.streams_open_after_done);
    assert_eq!(out.streams_left_open, 0);
}

#[tokio::test]
async fn invalid_utf8_in_a_data_line_is_replaced_and_the_stream_goes_on() {
    let recs = records(
        |_| {
            let mut bad = b"data: {\"choices\":[{\"index\":0,\"text\":\" caf".to_vec();
            bad.extend_from_slice(&[0xC3, 0x28, 0xFF]);
            bad.extend_from_slice(b"\"}]}\n\n");
            vec![
                Step::SseHead,
                Step::Chunk(sse::completion(" a")),
                Step::ChunkBytes(bad),
                Step::Chunk(sse::completion(" b")),
                Step::Chunk(sse::usage(8, 3)),
                Step::Chunk(sse::done()),
                Step::End,
            ]
        },
        2,
        Duration::from_secs(5),
    )
    .await;
    // WHATWG SSE decodes UTF-8 with replacement: the event counts, its text holds U+FFFD
    for r in &recs {
        assert!(r.is_success(), "{:?}", r.error);
        assert_eq!(r.event_ms.len(), 3);
        assert_eq!(r.output_tokens, Some(3));
    }
}

#[tokio::test]
async fn an_http_1_0_body_that_runs_until_the_close() {
    let recs = records(
        |_| {
            let mut body = Vec::new();
            for w in [" a", " b", " c"] {
                body.extend_from_slice(sse::completion(w).as_bytes());
            }
            body.extend_from_slice(sse::usage(8, 3).as_bytes());
            body.extend_from_slice(sse::done().as_bytes());
            vec![
                Step::Head("HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".into()),
                Step::Raw(body[..40].to_vec()),
                Step::At(5.0),
                Step::Raw(body[40..].to_vec()),
                Step::Cut,
            ]
        },
        3,
        Duration::from_secs(5),
    )
    .await;
    for r in &recs {
        assert!(r.is_success(), "{:?}", r.error);
        assert_eq!(r.event_ms.len(), 3);
    }
}

#[tokio::test]
async fn a_gzip_stream_not_asked_for_is_named() {
    let recs = records(
        |_| {
            let mut plain = Vec::new();
            plain.extend_from_slice(sse::completion(" a").as_bytes());
            plain.extend_from_slice(sse::done().as_bytes());
            vec![
                Step::Head(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n\
                     transfer-encoding: chunked\r\n\r\n"
                        .into(),
                ),
                Step::ChunkBytes(gzip_stored(&plain)),
                Step::End,
            ]
        },
        2,
        Duration::from_secs(5),
    )
    .await;
    for r in &recs {
        assert_eq!(class(r), ErrorClass::MalformedStream);
        let m = message(r);
        assert!(m.contains("Content-Encoding: gzip") && !m.contains("[DONE]"), "{m}");
    }
}

#[tokio::test]
async fn headers_then_nothing_times_out_at_the_first_token_timeout() {
    let recs =
        records(|_| vec![Step::SseHead, Step::Silence(Duration::from_secs(60))], 2, Duration::from_secs(5)).await;
    for r in &recs {
        assert_eq!(class(r), ErrorClass::TimeoutFirstToken);
        assert!(r.headers_ms.is_some());
        let waited = r.end_ms.unwrap() - r.sent_ms.unwrap();
        assert!((400.0..1400.0).contains(&waited), "ended {waited:.1} ms after sending (timeout 400 ms)");
    }
}

#[tokio::test]
async fn tls_to_a_plain_http_port() {
    // a plain HTTP server answers the ClientHello as a bad request, as uvicorn and hyper do
    let server =
        ReplyServer::start(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec())
            .await;
    let url = format!("https://127.0.0.1:{}", server.addr.port());
    let mut ep = endpoint("http://127.0.0.1:1", Api::Completions, short_timeouts());
    ep.client = HttpClient::new(&url, None, 2, Duration::from_secs(2)).unwrap();
    let started = Instant::now();
    let out = run_within(Duration::from_secs(5), ep, config(2, 1), workload(8, 3)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(out.records.len(), 2);
    for r in &out.records {
        assert_eq!(class(r), ErrorClass::Connect);
        let m = message(r);
        assert!(m.contains("plain HTTP") && m.contains("http://"), "{m}");
    }
}

#[tokio::test]
async fn plain_http_to_a_tls_port() {
    let (server, _ca) = ScriptedServer::start_tls(|_| goodput_testkit::steady_stream(5.0, 1.0, 3, false)).await;
    let ep = endpoint(&format!("http://127.0.0.1:{}", server.addr.port()), Api::Completions, short_timeouts());
    let started = Instant::now();
    let out = run_within(Duration::from_secs(5), ep, config(2, 1), workload(8, 3)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(out.records.len(), 2);
    for r in &out.records {
        assert_eq!(class(r), ErrorClass::Connect);
        let m = message(r);
        assert!(m.contains("TLS") && m.contains("https://"), "{m}");
    }
}
