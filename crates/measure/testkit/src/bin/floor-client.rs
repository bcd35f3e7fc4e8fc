//! `floor-client ADDR [USERS] [SECONDS] [TOKENS]`: the least a streaming HTTP/1.1 client can do
//! per request, as a floor for the harness-ceiling bench (`scripts/bench-ceiling.sh`).
//!
//! A current-thread tokio runtime with USERS keep-alive connections to ADDR (`127.0.0.1:PORT`,
//! TCP_NODELAY), each in a closed loop: write one fixed completions request, then read whatever
//! has arrived until the response's closing chunk (`0\r\n\r\n`). No HTTP parsing, no JSON, no
//! timestamps, no records: what is left is the kernel's and the runtime's cost of moving the
//! bytes. Prints `floor: N requests in S s = R req/s` after SECONDS (default 10).

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(addr) = args.next() else {
        eprintln!("usage: floor-client 127.0.0.1:PORT [USERS] [SECONDS] [TOKENS]");
        std::process::exit(2);
    };
    let users: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let tokens: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let body = format!(r#"{{"model":"fast","prompt":"hello","max_tokens":{tokens},"stream":true}}"#);
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let (done, elapsed) = rt.block_on(async move {
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..users {
            let (addr, request) = (addr.clone(), request.clone());
            tasks.push(tokio::spawn(async move { user(&addr, request.as_bytes(), deadline).await }));
        }
        let mut done = 0u64;
        for t in tasks {
            match t.await.expect("user task") {
                Ok(n) => done += n,
                Err(e) => {
                    eprintln!("floor-client: {e}");
                    std::process::exit(1);
                }
            }
        }
        (done, start.elapsed().as_secs_f64())
    });
    println!("floor: {done} requests in {elapsed:.2} s = {:.0} req/s", done as f64 / elapsed);
}

/// One connection's closed loop until `deadline`: requests completed.
async fn user(addr: &str, request: &[u8], deadline: Instant) -> std::io::Result<u64> {
    let mut sock = TcpStream::connect(addr).await?;
    sock.set_nodelay(true)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = 0;
    while Instant::now() < deadline {
        sock.write_all(request).await?;
        // the response ends with the last chunk, `0\r\n\r\n`: keep the tail of what was read
        let mut tail = [0u8; 5];
        loop {
            let n = sock.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection"));
            }
            if n >= 5 {
                tail.copy_from_slice(&buf[n - 5..n]);
            } else {
                tail.rotate_left(n);
                tail[5 - n..].copy_from_slice(&buf[..n]);
            }
            if &tail == b"0\r\n\r\n" {
                break;
            }
        }
        done += 1;
    }
    Ok(done)
}
