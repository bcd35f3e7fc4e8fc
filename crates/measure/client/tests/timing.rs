//! Scripted streams with known timing: the client's measurements must match within 2 ms.
#![allow(clippy::await_holding_lock)] // each test holds the timing lock for its whole run, on its own runtime

mod common;

use std::time::Duration;

use common::*;
use goodput_client::{Api, Timeouts};
use goodput_metrics::{PercentileMethod, RequestMetrics, SummaryOptions, TokenSource, summarize};
use goodput_testkit::{ScriptedServer, Step, sse, steady_stream, timing_lock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_completions_stream() {
    let _serial = timing_lock();
    // first token 50 ms after the request arrives, then one token every 10 ms, 20 tokens
    let server = ScriptedServer::start(|_| steady_stream(50.0, 10.0, 20, false)).await;
    let ep = endpoint(&server.url(), Api::Completions, Timeouts::default());
    let out = run_within(Duration::from_secs(20), ep, config(4, 1), workload(32, 20)).await;
    assert_eq!(out.records.len(), 4);
    let ttfts: Vec<f64> = out.records.iter().map(|r| RequestMetrics::of(r).ttft.unwrap()).collect();
    assert_mostly_close("TTFT", &ttfts, 50.0, 2.0, 0.75);
    let served = server.served();
    assert_eq!(served.len(), 4);
    let (mut gaps, mut gap_errors) = (Vec::new(), Vec::new());
    // one request at a time: the i-th served stream is the i-th record's
    for (r, s) in out.records.iter().zip(&served) {
        assert!(r.is_success(), "{:?}", r.error);
        let m = RequestMetrics::of(r);
        assert_close("TPOT", m.tpot.unwrap(), 10.0, 2.0);
        assert_eq!(r.output_tokens, Some(20));
        assert_eq!(r.output_tokens_source, Some(TokenSource::Server));
        assert_eq!(r.input_tokens, Some(10));
        assert_eq!(r.input_tokens_client, Some(32));
        assert_eq!(r.event_tokens, vec![1; 20]);
        assert_eq!(r.other_events, 1); // the usage-only chunk
        gaps.extend(r.event_ms.windows(2).map(|w| w[1] - w[0]));
        // the server's own gaps: a host too busy to run it on time writes a chunk late and the
        // next on time (13.5 then 6.5 ms), and the client must see exactly that
        let written: Vec<f64> = s.chunk_times[..20].iter().map(|&c| out.clock.ms(c)).collect();
        let server_gaps = written.windows(2).map(|w| w[1] - w[0]);
        gap_errors.extend(r.event_ms.windows(2).map(|w| w[1] - w[0]).zip(server_gaps).map(|(c, s)| c - s));
    }
    // every gap as the server wrote it, and ≈ 10 ms as scripted
    assert_mostly_close("ITL − the server's gap", &gap_errors, 0.0, 1.0, 0.95);
    assert_mostly_close("ITL", &gaps, 10.0, 2.0, 0.5);
    let s = summarize(&out.records, &SummaryOptions::new());
    assert_close("ITL p50", s.itl_ms.p50.unwrap(), 10.0, 2.0);
    assert_close("TTFT p50", s.ttft_ms.p50.unwrap(), 50.0, 2.0);
    assert_eq!(s.itl_ms.n, 4 * 19);

    // the request body honours the contract
    let body: serde_json::Value = serde_json::from_str(&server.served()[0].body).unwrap();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["max_tokens"], 20);
    assert_eq!(body["min_tokens"], 20);
    assert_eq!(body["ignore_eos"], true);
    assert_eq!(server.served()[0].path, "POST /v1/completions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_with_role_chunk_and_multi_token_chunks() {
    let _serial = timing_lock();
    // role-only chunk at 5 ms (not a content event), then 10 chunks of two words every 20 ms
    // from 60 ms; usage says 20 tokens → 1 + 19 spread: ITL per token ≈ 10 ms.
    let script = |_| {
        let mut s = vec![Step::SseHead, Step::At(5.0), Step::Chunk(sse::chat_role())];
        for i in 0..10 {
            s.push(Step::At(60.0 + 20.0 * i as f64));
            s.push(Step::Chunk(sse::chat(" hello world")));
        }
        s.extend([Step::Chunk(sse::usage(12, 20)), Step::Chunk(sse::done()), Step::End]);
        s
    };
    let server = ScriptedServer::start(script).await;
    let ep = endpoint(&server.url(), Api::Chat, Timeouts::default());
    let out = run_within(Duration::from_secs(20), ep, config(4, 2), workload(16, 20)).await;
    let ttfts: Vec<f64> = out.records.iter().map(|r| RequestMetrics::of(r).ttft.unwrap()).collect();
    assert_mostly_close("TTFT", &ttfts, 60.0, 2.0, 0.75);
    for r in &out.records {
        assert!(r.is_success(), "{:?}", r.error);
        let m = RequestMetrics::of(r);
        assert_eq!(r.event_ms.len(), 10);
        // N = 20 over 10 events: m1 = 1, later events 2 each except one that takes 3 → sum 20
        assert_eq!(r.event_tokens.iter().sum::<u32>(), 20);
        assert_eq!(r.event_tokens[0], 1);
        assert_eq!(r.event_tokens_source, Some(TokenSource::Tokenizer));
        // TPOT = 180 ms / 19
        assert_close("TPOT", m.tpot.unwrap(), 180.0 / 19.0, 2.0);
        assert_eq!(r.other_events, 2); // role chunk + usage chunk
        assert_eq!(r.output_tokens_client, Some(20));
    }
    assert_eq!(server.served()[0].path, "POST /v1/chat/completions");
    let body: serde_json::Value = serde_json::from_str(&server.served()[0].body).unwrap();
    assert_eq!(body["messages"][0]["role"], "user");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_chunk_usage_from_the_server_wins() {
    let _serial = timing_lock();
    // vLLM continuous usage: each chunk carries cumulative completion tokens; chunks of 1, 3, 2 tokens
    let script = |_| {
        vec![
            Step::SseHead,
            Step::At(30.0),
            Step::Chunk(sse::completion_with_usage(" a", 5, 1)),
            Step::At(60.0),
            Step::Chunk(sse::completion_with_usage(" b c d", 5, 4)),
            Step::At(80.0),
            Step::Chunk(sse::completion_with_usage(" e f", 5, 6)),
            Step::Chunk(sse::done()),
            Step::End,
        ]
    };
    let server = ScriptedServer::start(script).await;
    let ep = endpoint(&server.url(), Api::Completions, Timeouts::default());
    let out = run_within(Duration::from_secs(20), ep, config(1, 1), workload(8, 6)).await;
    let r = &out.records[0];
    assert!(r.is_success(), "{:?}", r.error);
    assert_eq!(r.event_tokens, vec![1, 3, 2]);
    assert_eq!(r.event_tokens_source, Some(TokenSource::Server));
    let mut s = goodput_metrics::Samples::new();
    for (v, w) in goodput_metrics::request::itl_samples(r) {
        s.push_weighted(v, w);
    }
    // gaps 30 ms over 3 tokens (10, 10, 10) and 20 ms over 2 tokens (10, 10)
    let d = s.describe(PercentileMethod::Linear);
    assert_eq!(d.n, 5);
    assert_close("ITL mean", d.mean.unwrap(), 10.0, 2.0);
    assert_close("TPOT", RequestMetrics::of(r).tpot.unwrap(), 10.0, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_times_match_server_write_times() {
    let _serial = timing_lock();
    let server = ScriptedServer::start(|_| steady_stream(20.0, 5.0, 30, false)).await;
    let ep = endpoint(&server.url(), Api::Completions, Timeouts::default());
    let out = run_within(Duration::from_secs(20), ep, config(8, 8), workload(16, 30)).await;
    let clock = out.clock;
    let served = server.served();
    assert_eq!(served.len(), 8);
    // Pair each record with its served stream one to one. Eight sends leave within microseconds
    // and the server accepts them one after another, so arrival order does not identify a stream;
    // pair by the event times themselves (the unused stream whose writes are closest), so that a
    // wrong pairing could only be with a stream written at nearly the same times.
    let mut diffs = Vec::new();
    let mut unused: Vec<&_> = served.iter().collect();
    for r in &out.records {
        let gap = |s: &&goodput_testkit::Served| -> f64 {
            r.event_ms.iter().zip(&s.chunk_times).map(|(&t, &c)| (t - clock.ms(c)).abs()).sum()
        };
        let i = (0..unused.len()).min_by(|&a, &b| gap(&unused[a]).total_cmp(&gap(&unused[b]))).unwrap();
        let s = unused.swap_remove(i);
        for (k, &t) in r.event_ms.iter().enumerate() {
            diffs.push(t - clock.ms(s.chunk_times[k]));
        }
    }
    assert_mostly_close("client event time − server write time", &diffs, 0.0, 2.0, 0.99);
}

/// An event whose bytes arrive while the client cannot run is stamped when they arrived (the
/// kernel's receive time, `goodput_client::arrival`), not when the client got to them; and the
/// request counts from when its bytes left (`written_ms`), which the server saw arrive.
#[cfg(target_os = "linux")]
#[test]
fn an_event_is_stamped_when_its_bytes_arrived_not_when_the_client_read_them() {
    let _serial = timing_lock();
    // the server on a thread and runtime of its own: first token 50 ms after the request
    // arrived, the next two 40 ms apart
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let server = ScriptedServer::start(|_| steady_stream(50.0, 40.0, 3, false)).await;
            tx.send((server.url(), std::sync::Arc::clone(&server.served))).unwrap();
            std::future::pending::<()>().await
        })
    });
    let (url, served) = rx.recv().unwrap();
    // the client on one thread, which a task blocks from 20 to 80 ms after the start: the first
    // token arrives inside the block, the second after it
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = rt.block_on(async {
        tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            std::thread::sleep(Duration::from_millis(60));
        });
        let ep = endpoint(&url, Api::Completions, Timeouts::default());
        run_within(Duration::from_secs(20), ep, config(1, 1), workload(16, 3)).await
    });
    let r = &out.records[0];
    assert!(r.is_success(), "{:?}", r.error);
    let (sent, written, headers) = (r.sent_ms.unwrap(), r.written_ms.unwrap(), r.headers_ms.unwrap());
    assert!(sent <= written && written <= headers, "sent {sent}, written {written}, headers {headers}");
    let s = &served.lock().unwrap()[0];
    // the request's bytes left when the server's kernel received them (the same clock)
    assert_close("written − server arrival", written - out.clock.ms(s.arrived), 0.0, 1.0);
    let m = RequestMetrics::of(r);
    // read at ~80 ms, after the block: a clock read would give TTFT ≈ 80 − send time
    assert_close("TTFT", m.ttft.unwrap(), 50.0, 3.0);
    assert_close("first chunk written − stamped", r.event_ms[0] - out.clock.ms(s.chunk_times[0]), 0.0, 1.0);
}

/// A reasoning model's stream, three ways: 20 thinking events from 50 ms, then 10 answer events,
/// one every 10 ms. TTFT is the first thinking token (50 ms), TTFO the first answer token
/// (50 + 20 · 10 = 250 ms), and each phase's TPOT 10 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_streams_time_the_first_answer_token() {
    let _serial = timing_lock();
    for how in ["reasoning_content", "reasoning", "think-tags"] {
        let server = ScriptedServer::start(move |_| goodput_testkit::reasoning_stream(50.0, 10.0, 20, 10, how)).await;
        let mut ep = endpoint(&server.url(), Api::Chat, Timeouts::default());
        if how == "think-tags" {
            ep.reasoning = goodput_client::reasoning::ReasoningParser::ThinkTags;
        }
        let out = run_within(Duration::from_secs(20), ep, config(4, 1), workload(16, 30)).await;
        let m: Vec<RequestMetrics> = out.records.iter().map(RequestMetrics::of).collect();
        let ttft: Vec<f64> = m.iter().map(|m| m.ttft.unwrap()).collect();
        let ttfo: Vec<f64> = m.iter().map(|m| m.ttfo.unwrap()).collect();
        assert_mostly_close(&format!("{how}: TTFT"), &ttft, 50.0, 2.0, 0.75);
        assert_mostly_close(&format!("{how}: TTFO"), &ttfo, 250.0, 2.0, 0.75);
        for (r, m) in out.records.iter().zip(&m) {
            assert!(r.is_success(), "{how}: {:?}", r.error);
            assert_eq!(r.reasoning_events, Some(20), "{how}");
            assert_eq!(r.output_tokens, Some(30));
            assert_close(&format!("{how}: TPOT reasoning"), m.tpot_reasoning.unwrap(), 10.0, 2.0);
            assert_close(&format!("{how}: TPOT answer"), m.tpot_answer.unwrap(), 10.0, 2.0);
            assert!(!r.think_unclosed);
            if how == "think-tags" {
                // no server count: ours, of "<think> hmm … hmm</think>"
                assert_eq!(r.reasoning_tokens_source, Some(TokenSource::Tokenizer));
                assert!(r.reasoning_tokens.unwrap() >= 20, "{:?}", r.reasoning_tokens);
            } else {
                assert_eq!((r.reasoning_tokens, r.reasoning_tokens_source), (Some(20), Some(TokenSource::Server)));
                assert_eq!(r.reasoning_tokens_client, Some(20), "one token per \" hmm\"");
            }
        }
        let s = summarize(&out.records, &SummaryOptions::new());
        let r = s.reasoning.expect("a reasoning summary");
        assert_eq!((r.requests, r.unanswered), (4, 0));
        assert_close(&format!("{how}: TTFO p50"), r.ttfo_ms.p50.unwrap(), 250.0, 2.0);
        assert_eq!(r.answer_tokens + r.reasoning_tokens, 4 * 30);
    }
}

/// A `<think>` that is never closed: the whole output is reasoning, no TTFO, one warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unclosed_think_tag_is_warned_once_per_run() {
    // three events inside <think>, never closed
    let script = |_| {
        let mut s = vec![Step::SseHead];
        for (i, w) in ["<think> a", " b", " c"].iter().enumerate() {
            s.push(Step::At(5.0 + i as f64));
            s.push(Step::Chunk(sse::chat(w)));
        }
        s.extend([Step::Chunk(sse::usage(4, 3)), Step::Chunk(sse::done()), Step::End]);
        s
    };
    let server = ScriptedServer::start(script).await;
    let mut ep = endpoint(&server.url(), Api::Chat, Timeouts::default());
    ep.reasoning = goodput_client::reasoning::ReasoningParser::ThinkTags;
    let out = run_within(Duration::from_secs(20), ep, config(5, 1), workload(16, 3)).await;
    for r in &out.records {
        assert!(r.think_unclosed && r.reasoning_events == Some(3), "{r:?}");
        assert_eq!(RequestMetrics::of(r).ttfo, None);
    }
    let s = summarize(&out.records, &SummaryOptions::new());
    let warned: Vec<_> = s.warnings.iter().filter(|w| w.code.as_str() == "think_unclosed").collect();
    assert_eq!(warned.len(), 1, "{:?}", s.warnings);
    assert!(warned[0].message.starts_with("5 of 5 reasoning requests opened <think>"), "{}", warned[0].message);
    assert_eq!(s.reasoning.unwrap().unanswered, 5);
}
