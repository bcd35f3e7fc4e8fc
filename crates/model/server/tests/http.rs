//! The embedded server over real HTTP on loopback: every error case, the stream's shape, the
//! non-streaming response, the management endpoints, and freeing a disconnected client's sequence.

use std::time::Duration;

use bytes::Bytes;
use goodput_client::sse::SseDecoder;
use goodput_engine::{Catalog, EngineConfig};
use goodput_server::{Embedded, ServerConfig};
use goodput_tokenizer::Tokenizer;
use http_body_util::BodyExt;
use serde_json::{Value, json};

fn engine(tweak: impl FnOnce(&mut EngineConfig)) -> EngineConfig {
    let c = Catalog::builtin();
    let mut cfg = EngineConfig::new(c.model("llama-3.1-8b").unwrap().clone(), c.gpu("h100").unwrap().clone());
    tweak(&mut cfg);
    cfg
}

async fn start(tweak: impl FnOnce(&mut EngineConfig), server: impl FnOnce(&mut ServerConfig)) -> Embedded {
    let mut sc = ServerConfig::new("llama-3.1-8b");
    server(&mut sc);
    Embedded::start(engine(tweak), Tokenizer::cl100k().unwrap(), sc).await.unwrap()
}

fn client(e: &Embedded) -> goodput_client::HttpClient {
    goodput_client::HttpClient::new(&e.url(), None, 8, Duration::from_secs(5)).unwrap()
}

async fn post(e: &Embedded, path: &str, body: impl Into<Bytes>) -> (u16, Value) {
    let resp = client(e).post(path, body.into()).await.0.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn openai_error(v: &Value, code: u16) -> String {
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(v["error"]["type"].is_string(), "{v}");
    v["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_finishes_its_header_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let e = start(|_| {}, |s| s.header_timeout = Duration::from_millis(300)).await;
    // slowloris: a request line and one header, then nothing. Timed from before the connection
    // (the server's timer cannot start earlier), so a stall while connecting cannot shorten it
    let started = std::time::Instant::now();
    let mut sock = tokio::net::TcpStream::connect(e.addr).await.unwrap();
    sock.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(5), async {
        let mut total = 0;
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    })
    .await
    .expect("the server closes the connection");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(3), "{waited:?}, {n} bytes");
    // a whole request on a connection still works, and the server keeps serving
    let (s, _) = post(&e, "/v1/completions", r#"{"model":"llama-3.1-8b","prompt":"hi","max_tokens":2}"#).await;
    assert_eq!(s, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_parameters_vllm_refuses_get_a_400() {
    let e = start(|_| {}, |_| {}).await;
    for (body, says) in [
        (r#"{"model":"llama-3.1-8b","prompt":"hi","temperature":"warm"}"#, "`temperature` must be a number"),
        (r#"{"model":"llama-3.1-8b","prompt":"hi","temperature":-1}"#, "`temperature` must be non-negative"),
        (r#"{"model":"llama-3.1-8b","prompt":"hi","top_p":0}"#, "`top_p` must be in (0, 1]"),
    ] {
        let (s, v) = post(&e, "/v1/completions", body).await;
        assert_eq!(s, 400, "{body}");
        assert!(openai_error(&v, 400).contains(says), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_case_over_http() {
    let e = start(|_| {}, |s| s.max_body_bytes = 4096).await;
    let (s, v) = post(&e, "/v1/completions", "{not json").await;
    assert_eq!(s, 400);
    assert!(openai_error(&v, 400).contains("invalid JSON"));

    let (s, v) = post(&e, "/v1/completions", r#"{"prompt":"hi"}"#).await;
    assert_eq!(s, 400);
    assert!(openai_error(&v, 400).contains("model"));

    let (s, v) = post(&e, "/v1/chat/completions", r#"{"model":"llama-3.1-8b","messages":"hi"}"#).await;
    assert_eq!(s, 400);
    assert!(openai_error(&v, 400).contains("messages"));

    let (s, v) = post(&e, "/v1/completions", r#"{"model":"gpt-4","prompt":"hi"}"#).await;
    assert_eq!(s, 404);
    assert!(openai_error(&v, 404).contains("gpt-4"));

    let (s, v) = post(&e, "/v1/embeddings", r#"{}"#).await;
    assert_eq!(s, 404);
    openai_error(&v, 404);

    // min_tokens over the default max_tokens (16 for completions)
    let (s, v) = post(&e, "/v1/completions", r#"{"model":"llama-3.1-8b","prompt":"hi","min_tokens":100}"#).await;
    assert_eq!(s, 400);
    assert!(openai_error(&v, 400).contains("`min_tokens` (100) must not exceed `max_tokens` (16"));

    let (s, v) = post(&e, "/v1/models", r#"{}"#).await;
    assert_eq!(s, 405);
    assert!(openai_error(&v, 405).contains("POST is not allowed on /v1/models"));

    let (s, v) = post(&e, "/v1/completions", r#"{"model":"llama-3.1-8b","prompt":"hi","max_tokens":200000}"#).await;
    assert_eq!(s, 400);
    assert!(openai_error(&v, 400).contains("maximum context length is 131072"));

    let big = json!({"model": "llama-3.1-8b", "prompt": "x".repeat(10_000)}).to_string();
    let (s, v) = post(&e, "/v1/completions", big).await;
    assert_eq!(s, 413);
    openai_error(&v, 413);
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_answers_429() {
    let e = start(
        |c| {
            c.max_num_seqs = 1;
            c.max_waiting = 1;
        },
        |_| {},
    )
    .await;
    let long = json!({"model": "llama-3.1-8b", "prompt": "hello", "max_tokens": 5000, "stream": true}).to_string();
    let c = client(&e);
    // one runs, one waits; the third is refused. The second is sent only once the first has
    // streamed a token: until the engine thread has scheduled it, the first still holds the one
    // waiting place (on a loaded machine the second could otherwise be refused instead).
    let mut r1 = c.post("/v1/completions", Bytes::from(long.clone())).await.0.unwrap();
    assert_eq!(r1.status().as_u16(), 200);
    let first = tokio::time::timeout(Duration::from_secs(10), r1.body_mut().frame()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "the first request streamed nothing");
    let r2 = c.post("/v1/completions", Bytes::from(long.clone())).await.0.unwrap();
    assert_eq!(r2.status().as_u16(), 200);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (s, v) = post(&e, "/v1/completions", long).await;
    assert_eq!(s, 429, "{v}");
    assert!(openai_error(&v, 429).contains("waiting"));
    drop((r1, r2));
    e.shutdown().await;
}

async fn sse_events(e: &Embedded, path: &str, body: Value) -> Vec<String> {
    let resp = client(e).post(path, Bytes::from(body.to_string())).await.0.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    d.feed(&bytes, &mut out);
    out.into_iter().map(|e| e.data).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_like_vllm() {
    let e = start(|_| {}, |_| {}).await;
    let tk = Tokenizer::cl100k().unwrap();
    let body = json!({"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "hello there"}],
                      "max_tokens": 5, "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true});
    let ev = sse_events(&e, "/v1/chat/completions", body).await;
    // role, 5 tokens, usage, [DONE]
    assert_eq!(ev.len(), 8, "{ev:?}");
    let j: Vec<Value> = ev[..7].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(j[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String =
        j[1..6].iter().map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap().to_string()).collect();
    assert_eq!(tk.count(&text), 5, "every chunk is one real token: {text:?}");
    assert!(j[1..5].iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
    assert_eq!(j[5]["choices"][0]["finish_reason"], "length");
    assert_eq!(j[6]["usage"]["completion_tokens"], 5);
    // chat template: 2 (content) + 3 per message + 3
    assert_eq!(j[6]["usage"]["prompt_tokens"], 2 + 3 + 3);
    assert_eq!(ev[7], "[DONE]");

    // completions, no usage requested
    let body = json!({"model": "llama-3.1-8b", "prompt": "one two three", "max_tokens": 3, "stream": true, "ignore_eos": true});
    let ev = sse_events(&e, "/v1/completions", body).await;
    assert_eq!(ev.len(), 4);
    let first: Value = serde_json::from_str(&ev[0]).unwrap();
    assert_eq!(first["object"], "text_completion");
    assert!(first["choices"][0]["text"].as_str().unwrap().starts_with(' '));
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_and_management_endpoints() {
    let e = start(|_| {}, |_| {}).await;
    let (s, v) =
        post(&e, "/v1/completions", r#"{"model":"llama-3.1-8b","prompt":"a b c","max_tokens":7,"ignore_eos":true}"#)
            .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 7);
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    assert_eq!(Tokenizer::cl100k().unwrap().count(v["choices"][0]["text"].as_str().unwrap()), 7);
    assert_eq!(v["choices"][0]["finish_reason"], "length");

    let (s, v) = post(
        &e,
        "/v1/chat/completions",
        r#"{"model":"llama-3.1-8b","messages":[{"role":"user","content":"x"}],"max_tokens":2}"#,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["object"], "chat.completion");
    assert!(v["choices"][0]["message"]["content"].is_string());

    let c = client(&e);
    let (s, body) = c.get("/v1/models", Duration::from_secs(5)).await.unwrap();
    assert_eq!(s, 200);
    let m: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(m["data"][0]["id"], "llama-3.1-8b");
    assert_eq!(c.get("/health", Duration::from_secs(5)).await.unwrap().0, 200);
    let (s, body) = c.get("/metrics", Duration::from_secs(5)).await.unwrap();
    assert_eq!(s, 200);
    let text = String::from_utf8_lossy(&body);
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
    ] {
        assert!(text.contains(name), "missing {name}");
    }
    assert!(text.contains("vllm:generation_tokens_total{model_name=\"llama-3.1-8b\"} 9"), "{text}");
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_frees_its_sequence() {
    let e = start(|_| {}, |_| {}).await;
    let body =
        json!({"model": "llama-3.1-8b", "prompt": "hello", "max_tokens": 20000, "stream": true, "ignore_eos": true});
    let resp = client(&e).post("/v1/completions", Bytes::from(body.to_string())).await.0.unwrap();
    let mut b = resp.into_body();
    let _first = b.frame().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(e.state.engine().gauges().running, 1);
    drop(b);
    let mut freed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let g = e.state.engine().gauges();
        if g.running == 0 && g.kv_utilization == 0.0 {
            freed = true;
            break;
        }
    }
    assert!(freed, "the sequence should be aborted and its blocks freed");
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ignore_eos_lengths_are_drawn_up_to_max_tokens() {
    let e = start(|_| {}, |_| {}).await;
    let mut lens = Vec::new();
    for _ in 0..12 {
        let (s, v) = post(&e, "/v1/completions", r#"{"model":"llama-3.1-8b","prompt":"x","max_tokens":20}"#).await;
        assert_eq!(s, 200);
        let n = v["usage"]["completion_tokens"].as_u64().unwrap();
        let reason = v["choices"][0]["finish_reason"].as_str().unwrap().to_string();
        assert_eq!(reason == "length", n == 20);
        lens.push(n);
    }
    assert!(lens.iter().all(|&n| (1..=20).contains(&n)));
    assert!(lens.iter().any(|&n| n < 20), "{lens:?}");
    e.shutdown().await;
}

/// Reads a stream, timestamping each body frame; returns the gaps between frames in ms.
async fn frame_gaps(resp: goodput_client::http::Response) -> Vec<f64> {
    let mut body = resp.into_body();
    let mut last: Option<std::time::Instant> = None;
    let mut gaps = Vec::new();
    while let Some(Ok(f)) = body.frame().await {
        if f.is_data() {
            let now = std::time::Instant::now();
            if let Some(l) = last {
                gaps.push(now.duration_since(l).as_secs_f64() * 1e3);
            }
            last = Some(now);
        }
    }
    gaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_prompts_are_refused_without_stalling_other_streams() {
    let e = start(|_| {}, |s| s.max_body_bytes = 32 << 20).await;
    let c = client(&e);
    // a stream of 400 tokens (a few ms each) runs while two 10 MB prompts arrive
    let body =
        json!({"model": "llama-3.1-8b", "prompt": "hello", "max_tokens": 400, "ignore_eos": true, "stream": true});
    let stream = c.post("/v1/completions", Bytes::from(body.to_string())).await.0.unwrap();
    let gaps = tokio::spawn(frame_gaps(stream));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let huge = |text: String| json!({"model": "llama-3.1-8b", "prompt": text, "max_tokens": 8}).to_string();
    let started = std::time::Instant::now();
    let big = [huge(" hello".repeat((10 << 20) / 6)), huge("a".repeat(10 << 20))];
    let posts: Vec<_> = big
        .into_iter()
        .map(|b| {
            let c = c.clone();
            tokio::spawn(async move {
                let r = c.post("/v1/completions", Bytes::from(b)).await.0.unwrap();
                let status = r.status().as_u16();
                let v: Value = serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
                (status, v, std::time::Instant::now())
            })
        })
        .collect();
    // /health answers at once meanwhile
    let mut health = Vec::new();
    for _ in 0..20 {
        let t = std::time::Instant::now();
        let (s, _) = c.get("/health", Duration::from_secs(30)).await.unwrap();
        assert_eq!(s, 200);
        health.push(t.elapsed().as_secs_f64() * 1e3);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for p in posts {
        let (status, v, done) = p.await.unwrap();
        assert_eq!(status, 400, "{v}");
        assert!(openai_error(&v, 400).contains("maximum context length is 131072"), "{v}");
        let took = done.duration_since(started).as_secs_f64();
        assert!(took < 10.0, "refused after {took:.1} s");
    }
    let gaps = gaps.await.unwrap();
    let worst_gap = gaps.iter().copied().fold(0.0, f64::max);
    let worst_health = health.iter().copied().fold(0.0, f64::max);
    println!("worst gap between tokens {worst_gap:.1} ms; slowest /health {worst_health:.1} ms");
    assert!(gaps.len() > 300, "{}", gaps.len());
    // before: /health took 6.4 s and other streams stalled for 13.4 s
    assert!(worst_health < 500.0, "/health took {worst_health:.0} ms");
    assert!(worst_gap < 200.0, "another stream stalled for {worst_gap:.0} ms");
    e.shutdown().await;
}
