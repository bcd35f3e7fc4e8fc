//! Building blocks for faults below the scripted HTTP layer: a gzip member built by hand (so a
//! test can send a real `Content-Encoding: gzip` body without a compression library), and a
//! listener that answers whatever arrives with fixed bytes and closes (a plain-HTTP server that
//! meets a TLS `ClientHello`, for example, and answers `400`), and one that never answers.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The CRC-32 (IEEE 802.3, reflected, as gzip uses it) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// `data` as one gzip member (RFC 1952) holding stored (uncompressed) deflate blocks (RFC 1951
/// §3.2.4): a valid gzip stream any decoder accepts, without compressing.
pub fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut blocks = data.chunks(0xFFFF).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        out.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// A listener that reads once from each connection, writes `reply` and closes it.
pub struct ReplyServer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ReplyServer {
    pub async fn start(reply: Vec<u8>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let reply = reply.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    if matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {
                        let _ = sock.write_all(&reply).await;
                        let _ = sock.shutdown().await;
                    }
                });
            }
        });
        ReplyServer { addr, task }
    }
}

impl Drop for ReplyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener that accepts connections and never says anything on them: a TLS client's handshake
/// (or any request) waits for an answer that never comes. Each connection is held open until the
/// server is dropped.
pub struct SilentServer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl SilentServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                held.push(sock);
            }
        });
        SilentServer { addr, task }
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        // the standard check value of CRC-32/ISO-HDLC
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn gzip_of_a_short_text() {
        let g = gzip_stored(b"hi");
        // header (10) + block header (5) + 2 bytes + trailer (8)
        assert_eq!(g.len(), 25);
        assert_eq!(&g[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(&g[10..15], &[1, 2, 0, 0xfd, 0xff]);
        assert_eq!(&g[15..17], b"hi");
        assert_eq!(&g[21..], &[2, 0, 0, 0]);
    }
}
