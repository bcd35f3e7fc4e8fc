//! A scripted HTTP/1.1 server on `127.0.0.1:0` for tests.
//!
//! Each accepted request is answered by a [`Script`]: a list of steps (status line and headers,
//! SSE chunks at exact times relative to the request's arrival, faults such as a cut connection or
//! silence). Writes are paced from absolute deadlines with a short spin at the end, so tokens leave
//! within tens of microseconds of their scripted times. The server logs when each step's bytes were
//! written, so tests can compare client measurements against the truth.

pub mod fast;
pub mod faults;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// One step of a response.
#[derive(Clone, Debug)]
pub enum Step {
    /// `HTTP/1.1 200` with SSE headers and chunked transfer encoding.
    SseHead,
    /// A complete non-streaming response with this status and body.
    Status(u16, String),
    /// Wait until this many ms after the request arrived.
    At(f64),
    /// One HTTP chunk carrying these bytes (e.g. `data: {...}\n\n`).
    Chunk(String),
    /// The terminating zero-length chunk (a clean end of the body).
    End,
    /// Close the connection abruptly (no terminating chunk).
    Cut,
    /// Say nothing for this long, then close.
    Silence(Duration),
    /// These exact bytes as the status line and headers, e.g. an `HTTP/1.0` head without
    /// chunking or one with `Content-Encoding: gzip` (end it with a blank line).
    Head(String),
    /// One HTTP chunk carrying these bytes, which need not be UTF-8.
    ChunkBytes(Vec<u8>),
    /// These bytes as they are, with no chunk framing (a body that runs until the close).
    Raw(Vec<u8>),
    /// This chunk again and again, as fast as the client reads, until the client goes away (a
    /// server that ignores `max_tokens`). Not logged in `chunk_times`: the log would grow without
    /// end.
    Forever(String),
}

pub type Script = Vec<Step>;

/// Helpers to build OpenAI-style SSE payloads.
pub mod sse {
    pub fn completion(text: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": null}]})
        )
    }
    pub fn completion_finish(reason: &str) -> String {
        format!("data: {}\n\n", serde_json::json!({"choices": [{"index": 0, "text": "", "finish_reason": reason}]}))
    }
    pub fn chat_role() -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        )
    }
    pub fn chat(text: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]})
        )
    }
    /// A content chunk carrying cumulative usage (vLLM's continuous usage stats).
    pub fn completion_with_usage(text: &str, prompt: u64, completion: u64) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "text": text}], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}})
        )
    }
    pub fn usage(prompt: u64, completion: u64) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
        )
    }
    /// A chat chunk carrying reasoning (`delta.reasoning_content`, or `delta.reasoning`).
    pub fn chat_reasoning(text: &str, field: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {field: text}}]})
        )
    }
    /// Usage with `completion_tokens_details.reasoning_tokens`.
    pub fn usage_reasoning(prompt: u64, completion: u64, reasoning: u64) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion, "completion_tokens_details": {"reasoning_tokens": reasoning}}})
        )
    }
    pub fn done() -> String {
        "data: [DONE]\n\n".to_string()
    }
}

/// A regular stream: first token at `first_ms`, then one every `gap_ms`, `n` tokens of one word
/// each, a usage chunk and `[DONE]`.
pub fn steady_stream(first_ms: f64, gap_ms: f64, n: usize, chat: bool) -> Script {
    let mut s = vec![Step::SseHead];
    if chat {
        s.push(Step::Chunk(sse::chat_role()));
    }
    for i in 0..n {
        s.push(Step::At(first_ms + gap_ms * i as f64));
        let w = if chat { sse::chat(" hello") } else { sse::completion(" hello") };
        s.push(Step::Chunk(w));
    }
    s.push(Step::Chunk(sse::usage(10, n as u64)));
    s.push(Step::Chunk(sse::done()));
    s.push(Step::End);
    s
}

/// A reasoning model's stream with known timing: `thinking` reasoning events from `first_ms`
/// on, then `answer` answer events, one every `gap_ms`, each one word. `how`: `"reasoning_content"`
/// or `"reasoning"` (chat fields), or `"think-tags"` (all in `delta.content`, the thinking between
/// `<think>` and `</think>`, each tag in the event it opens or closes).
pub fn reasoning_stream(first_ms: f64, gap_ms: f64, thinking: usize, answer: usize, how: &str) -> Script {
    let mut s = vec![Step::SseHead, Step::Chunk(sse::chat_role())];
    for i in 0..thinking + answer {
        s.push(Step::At(first_ms + gap_ms * i as f64));
        let chunk = match how {
            "think-tags" => {
                let word = if i < thinking { " hmm" } else { " yes" };
                let open = if i == 0 && thinking > 0 { "<think>" } else { "" };
                let close = if thinking > 0 && i + 1 == thinking { "</think>" } else { "" };
                sse::chat(&format!("{open}{word}{close}"))
            }
            field if i < thinking => sse::chat_reasoning(" hmm", field),
            _ => sse::chat(" yes"),
        };
        s.push(Step::Chunk(chunk));
    }
    let n = (thinking + answer) as u64;
    s.push(Step::Chunk(if how == "think-tags" {
        sse::usage(10, n)
    } else {
        sse::usage_reasoning(10, n, thinking as u64)
    }));
    s.push(Step::Chunk(sse::done()));
    s.push(Step::End);
    s
}

/// Serializes the tests that assert timing to the millisecond: they run one at a time, so that
/// they do not compete with each other for the machine's cores.
pub fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the server saw and did for one request.
#[derive(Clone, Debug)]
pub struct Served {
    /// When the request arrived: on a plain connection, the kernel's receive stamp of its last
    /// bytes (a read that came late does not shift the script); over TLS, when it was parsed.
    pub arrived: Instant,
    pub path: String,
    pub body: String,
    /// When each `Chunk` step's bytes were handed to the socket.
    pub chunk_times: Vec<Instant>,
}

/// A running scripted server.
pub struct ScriptedServer {
    pub addr: SocketAddr,
    pub served: Arc<Mutex<Vec<Served>>>,
    /// The request line of every `GET` (the model list and metrics probes), query included.
    pub probes: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedServer {
    /// Serves `script(n)` for the n-th request (0-based), answering `GET /v1/models` itself.
    pub async fn start<F>(script: F) -> Self
    where
        F: Fn(usize) -> Script + Send + Sync + 'static,
    {
        Self::start_with(script, None).await
    }

    /// The same over TLS, with a fresh self-signed certificate for `localhost`; returns the server
    /// and that certificate (PEM), which a client must trust as its CA.
    pub async fn start_tls<F>(script: F) -> (Self, String)
    where
        F: Fn(usize) -> Script + Send + Sync + 'static,
    {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
        let cert_pem = ck.cert.pem();
        let key = rustls::pki_types::PrivateKeyDer::try_from(ck.signing_key.serialize_der()).expect("key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_no_client_auth()
            .with_single_cert(vec![ck.cert.der().clone()], key)
            .expect("server config");
        (Self::start_with(script, Some(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))).await, cert_pem)
    }

    async fn start_with<F>(script: F, tls: Option<tokio_rustls::TlsAcceptor>) -> Self
    where
        F: Fn(usize) -> Script + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let served = Arc::new(Mutex::new(Vec::new()));
        let probes = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let log = Logs { served: Arc::clone(&served), probes: Arc::clone(&probes) };
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let _ = sock.set_nodelay(true);
                let (script, counter, log, tls) = (Arc::clone(&script), Arc::clone(&counter), log.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(s) = acceptor.accept(sock).await {
                                let _ = serve_conn(s, &*script, &counter, &log, None).await;
                            }
                        }
                        None => {
                            // the request's arrival is the kernel's stamp of its bytes (a busy
                            // server's late read must not shift the script)
                            let io = goodput_client::arrival::StampedTcp::new(sock);
                            let arrivals = io.arrivals().clone();
                            let io = hyper_util::rt::TokioIo::new(io);
                            let _ = serve_conn(io, &*script, &counter, &log, Some(&arrivals)).await;
                        }
                    }
                });
            }
        });
        ScriptedServer { addr, served, probes, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn served(&self) -> Vec<Served> {
        self.served.lock().unwrap().clone()
    }

    /// The `GET` request lines seen (`GET /v1/models?…`).
    pub fn probes(&self) -> Vec<String> {
        self.probes.lock().unwrap().clone()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (headers and a Content-Length body). `None` at EOF.
async fn read_request<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut Vec<u8>) -> Option<(String, String)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<usize>().ok()).flatten()
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let mut tmp = [0u8; 65536];
                let n = sock.read(&mut tmp).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string();
            buf.drain(..end + 4 + len);
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let method = head.split_whitespace().next().unwrap_or("GET").to_string();
            return Some((format!("{method} {path}"), body));
        }
        let mut tmp = [0u8; 65536];
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Waits until `deadline` precisely: the timer (which rounds up to the next millisecond tick) to
/// within 2 ms of it, then yield-spin the rest.
pub async fn precise_sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now + Duration::from_millis(2) {
        tokio::time::sleep_until((deadline - Duration::from_millis(2)).into()).await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}

/// What a scripted server logs: the requests it served, and its probes.
#[derive(Clone)]
struct Logs {
    served: Arc<Mutex<Vec<Served>>>,
    probes: Arc<Mutex<Vec<String>>>,
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    script: &(dyn Fn(usize) -> Script + Send + Sync),
    counter: &std::sync::atomic::AtomicUsize,
    logs: &Logs,
    arrivals: Option<&goodput_client::arrival::Arrivals>,
) -> std::io::Result<()> {
    let log = &*logs.served;
    let mut buf = Vec::new();
    while let Some((line, body)) = read_request(&mut sock, &mut buf).await {
        let now = Instant::now();
        let arrived = arrivals.and_then(|a| a.latest()).map_or(now, |t| t.min(now));
        if line.starts_with("GET ") {
            logs.probes.lock().unwrap().push(line.clone());
        }
        // the model list wherever the API root is (`/v1/models`, `/openai/deployments/d/models`)
        if line.starts_with("GET ") && line.split('?').next().unwrap_or_default().ends_with("/models") {
            let b = r#"{"object":"list","data":[{"id":"scripted-model","object":"model"}]}"#;
            let resp =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}", b.len());
            sock.write_all(resp.as_bytes()).await?;
            continue;
        }
        if line.starts_with("GET /metrics") {
            // a scripted server exposes no metrics (a scrape must count the failure and go on)
            let b = "404 page not found";
            let resp =
                format!("HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{b}", b.len());
            sock.write_all(resp.as_bytes()).await?;
            continue;
        }
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let idx = {
            let mut l = log.lock().unwrap();
            l.push(Served { arrived, path: line, body, chunk_times: Vec::new() });
            l.len() - 1
        };
        let mut keep_alive = true;
        for step in script(n) {
            match step {
                Step::SseHead => {
                    sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
                        .await?;
                }
                Step::Status(code, body) => {
                    let resp = format!(
                        "HTTP/1.1 {code} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    sock.write_all(resp.as_bytes()).await?;
                }
                Step::At(ms) => precise_sleep_until(arrived + Duration::from_secs_f64(ms / 1000.0)).await,
                Step::Chunk(data) => {
                    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
                    out.extend_from_slice(data.as_bytes());
                    out.extend_from_slice(b"\r\n");
                    sock.write_all(&out).await?;
                    sock.flush().await?;
                    log.lock().unwrap()[idx].chunk_times.push(Instant::now());
                }
                Step::Head(head) => sock.write_all(head.as_bytes()).await?,
                Step::ChunkBytes(data) => {
                    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
                    out.extend_from_slice(&data);
                    out.extend_from_slice(b"\r\n");
                    sock.write_all(&out).await?;
                    sock.flush().await?;
                    log.lock().unwrap()[idx].chunk_times.push(Instant::now());
                }
                Step::Raw(data) => {
                    sock.write_all(&data).await?;
                    sock.flush().await?;
                    log.lock().unwrap()[idx].chunk_times.push(Instant::now());
                }
                Step::Forever(data) => {
                    let mut one = format!("{:x}\r\n", data.len()).into_bytes();
                    one.extend_from_slice(data.as_bytes());
                    one.extend_from_slice(b"\r\n");
                    // many chunks a write, until the client goes away
                    let many = one.repeat((65536 / one.len()).max(1));
                    loop {
                        if sock.write_all(&many).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                Step::End => sock.write_all(b"0\r\n\r\n").await?,
                Step::Cut => {
                    keep_alive = false;
                    break;
                }
                Step::Silence(d) => {
                    tokio::time::sleep(d).await;
                    keep_alive = false;
                    break;
                }
            }
        }
        if !keep_alive {
            return Ok(());
        }
    }
    Ok(())
}
