//! A minimal, fast OpenAI-style SSE server: the "server faster than the client" of the load
//! generator's self-check tests and of the harness-ceiling bench.
//!
//! One thread, a current-thread tokio runtime, TCP_NODELAY, no delays: every request to
//! `/v1/completions` or `/v1/chat/completions` is answered at once with one content event per
//! token (each its own write) for the request's `max_tokens` (or `tokens` when it gives none), a
//! usage event and `[DONE]`, over chunked HTTP/1.1 keep-alive; or, with [`Writes::One`], the same
//! bytes in one write (a server whose own cost per request is as small as it gets: on one core of
//! a small host, a write per token makes the server, not the client, the limit). Each response
//! length's bytes are built once. `GET /v1/models` lists one model. [`FastServer::start_closing`] closes each
//! connection after its streamed response without saying so beforehand, as llama.cpp's server
//! does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How a response goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// The headers, each token's event, and the end, each its own write (as a server streaming
    /// tokens as they are generated does).
    PerToken,
    /// The whole response in one write.
    One,
}

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
        Self::spawn(port, tokens, false, Writes::PerToken, on_start)
    }

    /// As [`FastServer::start`], writing each response as `writes` says.
    pub fn start_writing(
        port: u16,
        tokens: usize,
        writes: Writes,
        on_start: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::spawn(port, tokens, false, writes, on_start)
    }

    /// As [`FastServer::start`] on any free port, closing each connection once its streamed
    /// response is written (a keep-alive response, then the close: the client pools the
    /// connection and may write its next request into it).
    pub fn start_closing(tokens: usize) -> std::io::Result<Self> {
        Self::spawn(0, tokens, true, Writes::PerToken, || {})
    }

    fn spawn(
        port: u16,
        tokens: usize,
        close: bool,
        writes: Writes,
        on_start: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Self> {
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
                    _ = accept(listener, tokens, close, writes, count) => {}
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

async fn accept(listener: TcpListener, tokens: usize, close: bool, writes: Writes, served: Arc<AtomicU64>) {
    while let Ok((sock, _)) = listener.accept().await {
        let _ = sock.set_nodelay(true);
        let served = Arc::clone(&served);
        tokio::spawn(async move {
            let _ = serve(sock, tokens, close, writes, &served).await;
        });
    }
}

/// The response for `tokens` tokens as its writes, built once per length and way of writing
/// (the server has one thread).
fn cached(tokens: usize, writes: Writes) -> Arc<Vec<Vec<u8>>> {
    type Cache = std::collections::HashMap<(usize, bool), Arc<Vec<Vec<u8>>>>;
    thread_local!(static CACHE: std::cell::RefCell<Cache> = Default::default());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let r = c.entry((tokens, writes == Writes::One)).or_insert_with(|| {
            let parts = response(tokens);
            Arc::new(if writes == Writes::One { vec![parts.concat()] } else { parts })
        });
        Arc::clone(r)
    })
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
    writes: Writes,
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
        for w in cached(tokens, writes).iter() {
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

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// One request over a plain socket; the response's bytes up to its closing chunk.
    fn exchange(server: &FastServer, max_tokens: usize) -> Vec<u8> {
        let mut sock = std::net::TcpStream::connect(server.addr).unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let body = format!(r#"{{"model":"fast","prompt":"hi","max_tokens":{max_tokens},"stream":true}}"#);
        let head = format!("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n", body.len());
        sock.write_all(format!("{head}{body}").as_bytes()).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"0\r\n\r\n") {
            let n = sock.read(&mut buf).unwrap();
            assert!(n > 0, "closed early after {} bytes", out.len());
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    #[test]
    fn one_write_sends_the_same_bytes_as_a_write_per_token() {
        let per_token = FastServer::start(0, 16, || {}).unwrap();
        let one = FastServer::start_writing(0, 16, Writes::One, || {}).unwrap();
        for n in [1, 5] {
            let (a, b) = (exchange(&per_token, n), exchange(&one, n));
            assert_eq!(a, b);
            let events = String::from_utf8(a).unwrap().matches("data: ").count();
            assert_eq!(events, n + 2, "{n} token events, the usage event and [DONE]");
        }
        assert_eq!(cached(5, Writes::One).len(), 1);
        assert_eq!(cached(5, Writes::PerToken).len(), 5 + 2, "headers, 5 tokens, the end");
    }
}
