//! A minimal, fast OpenAI-style SSE server: the "server faster than the client" of the load
//! generator's self-check tests and of the harness-ceiling bench.
//!
//! One thread, a current-thread tokio runtime, TCP_NODELAY, no delays: every request to
//! `/v1/completions` or `/v1/chat/completions` is answered at once with one content event per
//! token (each its own write) for the request's `max_tokens` (or `tokens` when it gives none), a
//! usage event and `[DONE]`, over chunked HTTP/1.1 keep-alive. Each response length's bytes are
//! built once. `GET /v1/models` lists one model. [`FastServer::start_closing`] closes each
//! connection after its streamed response without saying so beforehand, as llama.cpp's server
//! does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A running fast server (its thread stops when the process ends, or when dropped).
pub struct FastServer {
    pub addr: SocketAddr,
    /// Requests answered so far.
    pub served: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FastServer {
    /// Starts on `127.0.0.1:port` (0: any free port) on a thread of its own; `on_start` runs on
    /// that thread first (e.g. to pin it to a CPU).
    pub fn start(port: u16, tokens: usize, on_start: impl FnOnce() + Send + 'static) -> std::io::Result<Self> {
        Self::spawn(port, tokens, false, on_start)
    }

    /// As [`FastServer::start`] on any free port, closing each connection once its streamed
    /// response is written (a keep-alive response, then the close: the client pools the
    /// connection and may write its next request into it).
    pub fn start_closing(tokens: usize) -> std::io::Result<Self> {
        Self::spawn(0, tokens, true, || {})
    }

    fn spawn(port: u16, tokens: usize, close: bool, on_start: impl FnOnce() + Send + 'static) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let served = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let count = Arc::clone(&served);
        std::thread::Builder::new().name("fast-sse-server".into()).spawn(move || {
            on_start();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("listener");
                tokio::select! {
                    _ = accept(listener, tokens, close, count) => {}
                    _ = stopped => {}
                }
            });
        })?;
        Ok(FastServer { addr, served, stop: Some(stop) })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FastServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The response to every generation request, as the writes that make it up.
fn response(tokens: usize) -> Vec<Vec<u8>> {
    let chunk = |data: &str| {
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data.as_bytes());
        out.extend_from_slice(b"\r\n");
        out
    };
    let mut writes = vec![
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec(),
    ];
    for i in 0..tokens {
        let finish = if i + 1 == tokens { "\"length\"" } else { "null" };
        writes.push(chunk(&format!(
            "data: {{\"id\":\"cmpl-fast\",\"object\":\"text_completion\",\"model\":\"fast\",\"choices\":[{{\"index\":0,\"text\":\" hello\",\"finish_reason\":{finish}}}]}}\n\n"
        )));
    }
    let usage = format!(
        "data: {{\"id\":\"cmpl-fast\",\"object\":\"text_completion\",\"model\":\"fast\",\"choices\":[],\"usage\":{{\"completion_tokens\":{tokens}}}}}\n\n"
    );
    let mut last = chunk(&usage);
    last.extend_from_slice(&chunk("data: [DONE]\n\n"));
    last.extend_from_slice(b"0\r\n\r\n");
    writes.push(last);
    writes
}

async fn accept(listener: TcpListener, tokens: usize, close: bool, served: Arc<AtomicU64>) {
    while let Ok((sock, _)) = listener.accept().await {
        let _ = sock.set_nodelay(true);
        let served = Arc::clone(&served);
        tokio::spawn(async move {
            let _ = serve(sock, tokens, close, &served).await;
        });
    }
}

/// The response for `tokens` tokens, built once per length (the server has one thread).
fn cached(tokens: usize) -> Arc<Vec<Vec<u8>>> {
    thread_local!(static CACHE: std::cell::RefCell<std::collections::HashMap<usize, Arc<Vec<Vec<u8>>>>> = Default::default());
    CACHE.with(|c| Arc::clone(c.borrow_mut().entry(tokens).or_insert_with(|| Arc::new(response(tokens)))))
}

/// The `max_tokens` of a JSON request body, found without parsing it all.
fn max_tokens(body: &[u8]) -> Option<usize> {
    let key = b"\"max_tokens\"";
    let at = body.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &body[at..];
    let start = rest.iter().position(|b| b.is_ascii_digit())?;
    let digits: Vec<u8> = rest[start..].iter().copied().take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok()?.parse().ok().filter(|&n| n > 0)
}

async fn serve(
    mut sock: tokio::net::TcpStream,
    default_tokens: usize,
    close: bool,
    served: &AtomicU64,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut tmp = [0u8; 16384];
    loop {
        // one request: headers, then a Content-Length body
        let (end, len) = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&buf[..end]).unwrap_or("");
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.trim().eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                break (end, len);
            }
            let n = sock.read(&mut tmp).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&tmp[..n]);
        };
        while buf.len() < end + 4 + len {
            let n = sock.read(&mut tmp).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        let is_get = buf.starts_with(b"GET ");
        let tokens = max_tokens(&buf[end + 4..end + 4 + len]).unwrap_or(default_tokens);
        buf.drain(..end + 4 + len);
        if is_get {
            let b = r#"{"object":"list","data":[{"id":"fast","object":"model"}]}"#;
            let resp =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{b}", b.len());
            sock.write_all(resp.as_bytes()).await?;
            continue;
        }
        for w in cached(tokens).iter() {
            sock.write_all(w).await?;
        }
        served.fetch_add(1, Ordering::Relaxed);
        if close {
            return Ok(());
        }
    }
}

/// Pins the calling thread to `cpu` (Linux; best effort). Returns whether it took.
pub fn pin_to(cpu: usize) -> bool {
    #[cfg(target_os = "linux")]
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        false
    }
}
